"""gevent: greenlets carry the task context, and ``monkey.patch_all()`` after
``instrument()`` leaves forked children working.

* ``gevent.spawn``, ``gevent.spawn_later``, ``gevent.pool.Group.spawn`` and its ``map``
  family (so ``Pool``'s too) run the function under the OpenTelemetry context current at
  the spawn, as ``threading.Thread`` does under ``_threads``: a tool or an LLM call in a
  greenlet counts in the task that spawned it (a greenlet starts with an empty context).  A
  ``Greenlet`` built and started by hand (``Greenlet(fn).start()``) is not covered: gevent's
  ``Greenlet`` is a compiled type whose methods cannot be patched.  Nor is a ``spawn``
  imported by name before gevent was imported with agent-latency instrumenting.
* gevent's ``monkey.patch_all()`` after ``instrument()``: the export threads of the tracer
  provider we built were started as real threads, and the SDK restarts them in a forked
  child before gevent's own fork hook, which then fails and leaves the parent's greenlets
  running in the child (a process started from a greenlet hangs).  On gevent's
  will-patch-all event the exports are flushed and stopped, and on its did-patch-all event
  they start again as gevent threads (:func:`configure.stop_exports`).  One warning says
  that patching first is the supported order.
"""

from __future__ import annotations

import functools
from typing import Any

from opentelemetry import context as otel_context

from ... import _hooks
from ..._log import Guard, warn_once
from .._base import Instrumentor
from ._threads import _run_in


def _spawn(original: Any, func_at: int) -> Any:
    """``original`` with its function argument (at ``func_at``) run under the spawner's
    OpenTelemetry context."""

    @functools.wraps(original)
    def spawn(*args: Any, **kwargs: Any) -> Any:
        if len(args) > func_at and callable(args[func_at]):
            args = (*args[:func_at], _run_in(otel_context.get_current(), args[func_at]),
                    *args[func_at + 1:])
        return original(*args, **kwargs)

    return spawn


@Guard("gevent.patch_all")
def _on_gevent_event(event: Any) -> None:
    """A ``zope.event`` subscriber: gevent announces its monkey-patching with events."""
    name = type(event).__name__
    if name not in ("GeventWillPatchAllEvent", "GeventDidPatchAllEvent"):
        return
    control = _hooks.export_control
    if control is None:  # not instrumented (any more)
        return
    stop_exports, restart_exports = control
    if name == "GeventWillPatchAllEvent":
        warn_once("gevent-after-instrument", "agent-latency: gevent's monkey.patch_all() "
                  "ran after agent_latency.instrument(); the exports are restarted as "
                  "gevent threads. Patch first (before importing agent_latency) where "
                  "you can: threads the program started before the patch stay real")
        stop_exports()
    else:
        restart_exports()


class GeventInstrumentor(Instrumentor):
    """Task context into greenlets; exports that survive a late ``monkey.patch_all()``."""

    _instruments = ("gevent >= 20.0",)

    def applied(self) -> None:
        # Patched by hand, not wrapped: the map family hands the function to a greenlet it
        # starts itself (through the compiled ``Greenlet.spawn``), so it is wrapped where the
        # caller's context is still current.
        import gevent  # the trigger: imported already
        import gevent.pool

        self._originals: list[tuple[Any, str, Any]] = []
        mapping = gevent.pool.GroupMappingMixin
        patches = [(gevent, "spawn", 0), (gevent, "spawn_later", 1),
                   (gevent.pool.Group, "spawn", 1)]
        patches += [(mapping, name, 1) for name in ("map", "map_async", "imap",
                                                    "imap_unordered", "apply_async")]
        for owner, name, func_at in patches:
            original = owner.__dict__.get(name)
            if original is None:
                continue
            self._originals.append((owner, name, original))
            setattr(owner, name, _spawn(original, func_at))
        try:
            import zope.event  # a dependency of gevent
        except ImportError:
            return
        if _on_gevent_event not in zope.event.subscribers:
            zope.event.subscribers.append(_on_gevent_event)

    def removed(self) -> None:
        for owner, name, original in reversed(getattr(self, "_originals", [])):
            setattr(owner, name, original)
        self._originals = []
        try:
            import zope.event  # a dependency of gevent
        except ImportError:
            return
        if _on_gevent_event in zope.event.subscribers:
            zope.event.subscribers.remove(_on_gevent_event)
