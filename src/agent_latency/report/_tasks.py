"""Tasks and their budgets recomputed from stored spans: the budget engine's task tree
(``codec``) run on a trace's spans at once, as the live processor runs it span by
span."""

from __future__ import annotations

from typing import Any

from ..codec import TaskNode, assemble
from ._read import StoredSpan

#: One task found in a trace: ``span`` (its :class:`StoredSpan`), ``name``, ``intervals``,
#: ``counts``, ``budget`` and ``parent`` (see :class:`agent_latency.codec.TaskNode`).
StoredTask = TaskNode


def find_tasks(spans: list[StoredSpan], *, keep_intervals: bool = True,
               on_span: Any = None) -> tuple[list[StoredTask], list[str]]:
    """Every task in ``spans`` in start order, each with its budget, and problems found.

    A span belongs to its nearest task ancestor; a nested task's intervals also count in
    the tasks around it, as in the live processor.
    """
    return assemble(spans, keep_intervals=keep_intervals, on_span=on_span)
