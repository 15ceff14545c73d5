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
from time import perf_counter
from typing import Any

#: A pause at least this long tells the listeners (a young-generation collection takes
#: microseconds; a full one of a large heap, a tenth of a second).
LONG_PAUSE = 0.001
_KEEP = 4096


class Pauses:
    """The recent collections: ``(start, end)`` in ``perf_counter`` seconds, oldest first."""

    __slots__ = ("_started", "installed", "listeners", "recent", "total")

    def __init__(self) -> None:
        self.recent: deque[tuple[float, float]] = deque(maxlen=_KEEP)
        self.listeners: list[Callable[[float, float], None]] = []
        self.total = 0.0
        self.installed = False
        self._started = threading.local()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started.t = perf_counter()
            return
        start = getattr(self._started, "t", None)
        if start is None:
            return
        self._started.t = None
        end = perf_counter()
        pause = end - start
        self.total += pause
        if pause >= LONG_PAUSE:
            self.recent.append((start, end))
            for listener in tuple(self.listeners):
                try:
                    listener(start, end)
                except Exception:  # noqa: BLE001, S110 - a listener must not break the collector
                    pass

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
        for a, b in reversed(self.recent):
            if b <= start:
                break
            total += max(0.0, min(b, end) - max(a, start))
        return total


PAUSES = Pauses()
