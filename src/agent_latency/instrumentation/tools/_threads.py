"""The current OpenTelemetry context follows work into threads.

``asyncio.to_thread`` already copies the context (it runs the function in
``contextvars.copy_context()``), but ``ThreadPoolExecutor.submit`` — and so
``loop.run_in_executor`` — and ``threading.Thread`` start with an empty one, so a tool
called from a worker thread would otherwise leave its task.  Patched here:

* ``concurrent.futures.ThreadPoolExecutor.submit`` runs the function under the context that
  was current at ``submit``;
* ``threading.Thread.start`` records the context that was current at ``start`` and the
  thread runs under it (``Thread._bootstrap_inner`` is wrapped, so subclasses that
  override ``run`` are covered too).

Under gevent's ``monkey.patch_all()`` threads are greenlets and the same patches carry the
context into them (``instrumentation/tools/gevent.py`` covers ``gevent.spawn``).

Only the OpenTelemetry context is carried (what decides a span's parent and its task), not
every context variable.  Reference-counted: every instrumentor that needs it acquires it,
and the patches go when the last one releases.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from opentelemetry import context as otel_context

from ..._scope import detach
from .._shared import SharedPatch

_CTX = "_agent_latency_context"
_RUN = "_bootstrap_inner" if hasattr(threading.Thread, "_bootstrap_inner") else "run"


def _run_in(ctx: otel_context.Context, fn: Any) -> Any:
    def run_in_context(*args: Any, **kwargs: Any) -> Any:
        token = otel_context.attach(ctx)
        try:
            return fn(*args, **kwargs)
        finally:
            otel_context.detach(token)

    return run_in_context


def _submit(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if not args:
        return wrapped(*args, **kwargs)
    # Always wrapped, even with an empty context: a pool thread keeps the context of the
    # submit that started it, which must not leak into later work items.
    return wrapped(_run_in(otel_context.get_current(), args[0]), *args[1:], **kwargs)


def _start(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        instance.__dict__[_CTX] = otel_context.get_current()
    except Exception:  # noqa: BLE001, S110 - runs without our context
        pass
    return wrapped(*args, **kwargs)


def _thread_run(wrapped: Any, instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    ctx = instance.__dict__.pop(_CTX, None) if hasattr(instance, "__dict__") else None
    if ctx is None:
        return wrapped(*args, **kwargs)
    token = otel_context.attach(ctx)
    try:
        return wrapped(*args, **kwargs)
    finally:
        detach(token)


# Plain function patches, not wrapt's: this one is applied by instrument() itself, and
# importing wrapt costs ~20 ms of start-up.
_PATCHES = ((ThreadPoolExecutor, "submit", _submit), (threading.Thread, "start", _start),
            (threading.Thread, _RUN, _thread_run))
_originals: list[tuple[type, str, Any]] = []


def _patched(wrapper: Any, original: Any) -> Any:
    @functools.wraps(original)
    def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
        return wrapper(original.__get__(self), self, args, kwargs)

    return patched


def _apply() -> None:
    for owner, name, wrapper in _PATCHES:
        # The class that defines it: after gevent's ``monkey.patch_all()``
        # ``threading.Thread`` is gevent's subclass, which inherits ``start``.
        defining = next(c for c in owner.__mro__ if name in c.__dict__)
        original = defining.__dict__[name]
        _originals.append((defining, name, original))
        setattr(defining, name, _patched(wrapper, original))


def _remove() -> None:
    while _originals:
        owner, name, original = _originals.pop()
        setattr(owner, name, original)


# Carrying the context into threads, reference counted across our instrumentors.
PATCH = SharedPatch(_apply, _remove)
acquire = PATCH.acquire
release = PATCH.release
