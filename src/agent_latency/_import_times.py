"""Time spent importing modules: when each outermost import of a thread started and ended,
kept in a bounded ring, for the ``imports`` part of a task's ``other`` time.

CPython runs every import of a module not loaded yet through
``importlib._bootstrap._find_and_load``, looking the name up on the module each time (the
``import`` statement, ``__import__`` and ``importlib.import_module`` alike; checked on
3.10-3.13), so replacing that attribute times them all.  Only a thread's outermost import is
kept (depth 0): the modules it imports in turn are inside its interval.  A module already
loaded never gets there and costs nothing.
"""

from __future__ import annotations

import threading
from collections import deque
from time import perf_counter, process_time_ns, time_ns
from typing import Any

from . import semconv

_KEEP = 4096


class ImportTimes:
    """The recent outermost imports: ``(start, end, cpu_start, cpu_end)`` in the order they
    ended, the times in ``perf_counter`` seconds, the process's CPU time in nanoseconds;
    ``total`` is all of them, kept or not; ``since_ns`` when timing first began (epoch ns; 0
    before): what came before is start-up."""

    __slots__ = ("_depth", "_original", "recent", "since_ns", "total")

    def __init__(self) -> None:
        # The CPU times are never None here; the type is the pauses' ring's (read alike).
        self.recent: deque[tuple[float, float, int | None, int | None]] = deque(maxlen=_KEEP)
        self.total = 0.0
        self.since_ns = 0
        self._depth = threading.local()
        self._original: Any = None

    @property
    def installed(self) -> bool:
        """Whether imports are being timed."""
        return self._original is not None

    def install(self) -> None:
        """Time imports from now on (idempotent)."""
        if self._original is not None:
            return
        bootstrap = _bootstrap()

        if not self.since_ns:
            self.since_ns = time_ns()
        original = bootstrap._find_and_load
        depth = self._depth
        recent = self.recent

        def _find_and_load(*args: Any, **kwargs: Any) -> Any:
            level = getattr(depth, "n", 0)
            if level:
                depth.n = level + 1
                try:
                    return original(*args, **kwargs)
                finally:
                    depth.n = level
            depth.n = 1
            cpu = process_time_ns()
            start = perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                end = perf_counter()
                depth.n = 0
                recent.append((start, end, cpu, process_time_ns()))
                self.total += end - start

        _find_and_load.__wrapped__ = original  # type: ignore[attr-defined]  # for uninstall
        self._original = original
        bootstrap._find_and_load = _find_and_load

    def uninstall(self) -> None:
        """Stop timing imports (only if nobody replaced the hook after us)."""
        original, self._original = self._original, None
        if original is None:
            return
        bootstrap = _bootstrap()

        if getattr(bootstrap._find_and_load, "__wrapped__", None) is original:
            bootstrap._find_and_load = original


def _bootstrap() -> Any:
    """``importlib._bootstrap``, where CPython looks ``_find_and_load`` up (typed loosely:
    typeshed does not list its private functions)."""
    # Private: loaded with the interpreter, named here only, where it is looked up.
    import importlib._bootstrap as bootstrap

    return bootstrap


IMPORTS = ImportTimes()


def startup_attributes(start_ns: int) -> dict[str, float]:
    """A process task's ``agent_latency.task.startup``: from ``start_ns`` to when imports
    began to be timed (none before they are)."""

    if not IMPORTS.since_ns:
        return {}
    return {semconv.TASK_STARTUP: max(IMPORTS.since_ns - start_ns, 0) * 1e-9}
