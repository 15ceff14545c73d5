"""Garbage-collection pauses of this process, from ``gc.callbacks``: when each collection
started and ended, kept in a bounded ring, and who wants to hear of the long ones.

A collection holds the GIL: no thread of the program runs meanwhile, so a stream's bytes that
arrive then are handed over late (the network layer dates them from the wire instead), and
the pause is a part of a task's ``other`` time.
"""

from __future__ import annotations

import gc
import threading
from collections import deque
from collections.abc import Callable
from time import perf_counter, process_time_ns
from typing import Any

#: A pause at least this long tells the listeners (a young-generation collection takes
#: microseconds; a full one of a large heap, a tenth of a second).
LONG_PAUSE = 0.001
_KEEP = 4096


class Pauses:
    """The recent long collections: ``(start, end, cpu_start, cpu_end)``, oldest first, the
    times in ``perf_counter`` seconds, the process's CPU time in nanoseconds where it was
    read (collections of the older generations; ``None`` for the youngest, which are
    frequent and short); ``total`` is all collections' time, long or not."""

    __slots__ = ("_started", "installed", "listeners", "recent", "total")

    def __init__(self) -> None:
        self.recent: deque[tuple[float, float, int | None, int | None]] = deque(maxlen=_KEEP)
        self.listeners: list[Callable[[float, float], None]] = []
        self.total = 0.0
        self.installed = False
        self._started = threading.local()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        try:
            if phase == "start":
                # The CPU clock costs a system call: read only for the older generations,
                # whose collections are rare and the long ones.
                self._started.t = (perf_counter(),
                                   process_time_ns() if info.get("generation") else None)
                return
            started = getattr(self._started, "t", None)
            if started is None:
                return
            self._started.t = None
        except RuntimeError:
            # gevent's patched thread-local in a greenlet being finalized ("greenlet is being
            # finalized", seen on CPython 3.10): this collection is not timed.
            return
        end = perf_counter()
        start, cpu_start = started
        pause = end - start
        self.total += pause
        if pause >= LONG_PAUSE:
            self.recent.append((start, end, cpu_start,
                                process_time_ns() if cpu_start is not None else None))
            for listener in tuple(self.listeners):
                try:
                    listener(start, end)
                except Exception:  # noqa: BLE001, S110 - a listener must not break the collector
                    pass

    def collecting(self) -> bool:
        """Whether this thread is inside a collection now (where finalizers run)."""
        try:
            return getattr(self._started, "t", None) is not None
        except RuntimeError:  # gevent's thread-local, as above: assume the worst
            return True

    def install(self) -> None:
        """Start listening to the collector (idempotent)."""
        if not self.installed:
            gc.callbacks.append(self._callback)
            self.installed = True

    def uninstall(self) -> None:
        """Stop listening."""
        if self.installed:
            try:
                gc.callbacks.remove(self._callback)
            except ValueError:
                pass
            self.installed = False

    def within(self, start: float, end: float) -> float:
        """Seconds of long pauses inside ``[start, end]``."""
        total = 0.0
        for a, b, _, _ in reversed(self.recent):
            if b <= start:
                break
            total += max(0.0, min(b, end) - max(a, start))
        return total


PAUSES = Pauses()
