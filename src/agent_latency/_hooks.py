"""The one place where API-side code (``task()``) reaches SDK-side budget processors.

A task's budget must be set on its span before ``end()`` freezes it, and only the processor
holds the task's intervals; processors register a finisher here, ``task()`` calls them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Finisher = Callable[[Any, int], object]  # what it returns is ignored

finishers: list[Finisher] = []


def register(finisher: Finisher) -> None:
    """Add a finisher, called with ``(span, end_time_ns)`` before a task span ends."""
    if finisher not in finishers:
        finishers.append(finisher)


def unregister(finisher: Finisher) -> None:
    """Remove a finisher added by :func:`register`; unknown ones are ignored."""
    try:
        finishers.remove(finisher)
    except ValueError:
        pass
