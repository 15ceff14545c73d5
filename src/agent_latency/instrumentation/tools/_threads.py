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
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from opentelemetry import context as otel_context

from ..._lifecycle import defer_in_forked_child, in_forked_child_hooks
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
    if in_forked_child_hooks() and _called_from_sdk(sys._getframe(2)):
        return _done_here(args[0], args[1:], kwargs)
    # Always wrapped, even with an empty context: a pool thread keeps the context of the
    # submit that started it, which must not leak into later work items.
    return wrapped(_run_in(otel_context.get_current(), args[0]), *args[1:], **kwargs)


def _start(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        instance.__dict__[_CTX] = otel_context.get_current()
    except Exception:  # noqa: BLE001, S110 - runs without our context
        pass
    if _is_export_worker(instance) and defer_in_forked_child(
            functools.partial(wrapped, *args, **kwargs)):
        return None
    return wrapped(*args, **kwargs)


def _called_from_sdk(frame: Any) -> bool:
    return str(frame.f_globals.get("__name__", "")).startswith("opentelemetry.sdk")


def _done_here(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future[Any]:
    """``fn`` run now, on this thread, as a finished future: the SDK's resource detection in
    a forked child's fork hook, where a pool thread under gevent would yield to the hub
    (see :func:`defer_in_forked_child`)."""
    future: Future[Any] = Future()
    try:
        future.set_result(fn(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - handed to the caller as a pool would
        future.set_exception(exc)
    return future


def _is_export_worker(thread: Any) -> bool:
    """The OpenTelemetry SDK's own worker (a batch processor's, a metric reader's)."""
    owner = getattr(getattr(thread, "_target", None), "__self__", None)
    return type(owner).__module__.startswith("opentelemetry.sdk")


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
