"""The subprocess instrumentation, applied at the program's first process, not at start-up.

Every program has ``subprocess`` imported (the OpenTelemetry SDK imports it), so an
import trigger would apply the subprocess instrumentation at once, and with it
``opentelemetry-instrumentation`` and wrapt: ~50 ms of start-up for a program that may never
start a process.  Instead two plain stand-ins take the place of
``subprocess.Popen._execute_child`` and ``os.system`` (every way of starting a process goes
through one of them: ``subprocess.run``/``Popen``, asyncio subprocesses, ``os.system``).
The first call puts the originals back, applies the real instrumentation, and goes on
through it — so the first process already gets its span.

What must hold from the start is done at once: the context follows work into threads
(``_threads``), and a process started by an instrumented parent joins its trace.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from ..._log import internal_error

_lock = threading.Lock()
_state: dict[str, Any] = {}


def defer(apply: Callable[[], None]) -> None:
    """Stand in for the spawn functions until the first call, which runs ``apply()`` (the
    real instrumentation) first."""
    # At the first spawn, not at instrument(): the start-up path stays light.
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    from ..._child_context import parent_context_from_env
    from . import _threads

    with _lock:
        if _state:
            return
        original_execute = subprocess.Popen.__dict__["_execute_child"]
        original_system = os.system if os.name == "posix" else None

        def activate() -> None:
            with _lock:
                if not _state:
                    return  # another thread was first, or cancelled
                _restore()
            try:
                apply()
            except Exception:  # noqa: BLE001 - the process starts all the same
                internal_error("subprocess.first_spawn")

        def _execute_child(self: Any, *args: Any, **kwargs: Any) -> Any:
            activate()
            # The base class's method, as instrumented now (a subclass's own override has
            # already run and called up to here).
            return subprocess.Popen._execute_child(  # type: ignore[attr-defined]  # private, not in typeshed
                self, *args, **kwargs)

        def system(command: Any) -> int:
            activate()
            return os.system(command)  # noqa: S605 - the program's own os.system call

        _state.update(execute=original_execute, system=original_system)
        subprocess.Popen._execute_child = _execute_child  # type: ignore[attr-defined]  # private, not in typeshed
        if original_system is not None:
            os.system = system
        _threads.acquire()
        _state["threads"] = True
        # A process started by an instrumented parent joins the parent's trace.
        if not trace.get_current_span().get_span_context().is_valid:
            ctx = parent_context_from_env()
            if ctx is not None:
                _state["token"] = otel_context.attach(ctx)


def _restore() -> None:
    """Originals back (lock held); the thread patch stays until :func:`cancel`."""
    subprocess.Popen._execute_child = _state.pop("execute")  # type: ignore[attr-defined]  # private, not in typeshed
    system = _state.pop("system")
    if system is not None:
        os.system = system


def cancel() -> None:
    """Undo :func:`defer` (``uninstrument()``): stand-ins out, thread patch released."""
    # At the first spawn, not at instrument(): the start-up path stays light.
    from . import _threads

    with _lock:
        if "execute" in _state:
            _restore()
        if _state.pop("threads", False):
            _threads.release()
        token = _state.pop("token", None)
    if token is not None:
        # At the first spawn, not at instrument(): the start-up path stays light.
        from ..._scope import detach

        detach(token)
