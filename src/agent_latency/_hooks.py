"""The one place where API-side code (``task()``) reaches SDK-side budget processors, and
where a task's end reaches the work it handed out.

A task's budget must be set on its span before ``end()`` freezes it, and only the processor
holds the task's intervals; processors register a finisher here, ``task()`` calls them.
Work that a task started and handed to the program unfinished (a stream it still reads) is
*held* here under the task's span id; the task's end ends it first, so it counts in that
task (:func:`end_held`).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from typing import Any

Finisher = Callable[[Any, int], object]  # what it returns is ignored

#: Set-up's ``(stop, restart)`` of the exports it started, while instrumented (None before
#: and after): gevent's late ``monkey.patch_all()`` restarts them as gevent threads.
export_control: tuple[Callable[[], None], Callable[[], None]] | None = None

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


# Task span id -> {key: end callback} of the work it holds.
_held: dict[int, dict[int, Callable[[], object]]] = {}
if hasattr(os, "register_at_fork"):
    # A forked child's tasks are its own: the parent's held work is the parent's to end.
    os.register_at_fork(after_in_child=_held.clear)


def hold(task_id: int, key: int, end: Callable[[], object]) -> None:
    """``end()`` is to be called when the task with span id ``task_id`` ends, unless
    :func:`release` comes first."""
    _held.setdefault(task_id, {})[key] = end


def release(task_id: int, key: int) -> None:
    """The work under ``key`` finished on its own."""
    held = _held.get(task_id)
    if held is not None:
        held.pop(key, None)
        if not held:
            _held.pop(task_id, None)


# Work a garbage collection found (a stream dropped unfinished): run at the next safe point,
# a call's start or a task's end, never inside the collection.  A finalizer runs wherever
# the collection began, maybe under a lock the SDK holds (its tracer provider's, taken while
# it builds a tracer): ending a span there waited on that lock for ever.
_later: deque[Callable[[], object]] = deque()


def later(work: Callable[[], object]) -> None:
    """Run ``work()`` at the next safe point (it guards itself)."""
    _later.append(work)


def run_later() -> None:
    """Run the work :func:`later` put off (cheap when there is none)."""
    while _later:
        try:
            work = _later.popleft()
        except IndexError:  # another thread took the last one
            return
        work()


def end_held(task_id: int) -> None:
    """End what the task still holds (just before its own end)."""
    held = _held.pop(task_id, None)
    for end in list(held.values()) if held else ():
        end()
