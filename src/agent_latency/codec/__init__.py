"""Spans and the budget, both ways: what a span's attributes say as budget intervals and
counts, a task's budget as attributes, and the task tree assembled from spans.

The one reading of our attributes: the live span processor, the local exporter's summary
and the offline report all read spans through it, and write budgets through it, so the
tiling of a call's phases exists once.  It sits between ``semconv`` (the names) and the
pure engine (``budget``) on one side, and the processor and the report on the other.
"""

from ._phases import (
    PHASE_SPANS,
    phase_attributes,
    phase_span_tiles,
    phase_span_tiles_of,
    phases_of,
)
from ._spans import (
    adopt_other_parts,
    budget_attributes,
    connection_reuse_ratio,
    count_span,
    is_tool,
    other_part_attributes,
    span_intervals,
    split_source,
    startup_overlay,
)
from ._tree import SpanRecord, TaskNode, assemble

__all__ = [
    "PHASE_SPANS",
    "SpanRecord",
    "TaskNode",
    "adopt_other_parts",
    "assemble",
    "budget_attributes",
    "connection_reuse_ratio",
    "count_span",
    "is_tool",
    "other_part_attributes",
    "phase_attributes",
    "phase_span_tiles",
    "phase_span_tiles_of",
    "phases_of",
    "span_intervals",
    "split_source",
    "startup_overlay",
]
