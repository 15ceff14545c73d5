"""Spans read back from the local default's JSONL file, as plain dicts for assertions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_latency.report import read_spans as read_stored_spans


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Every span in the file as ``{name, trace_id, span_id, parent, start, end, status,
    attributes}`` (times in ns, status ``UNSET``/``OK``/``ERROR``); none if no file yet."""
    if not path.exists():
        return []
    return [
        {"name": s.name, "trace_id": s.trace_id, "span_id": s.span_id,
         "parent": s.parent_id or None, "start": s.start_ns, "end": s.end_ns,
         "status": s.status, "attributes": s.attributes}
        for s in read_stored_spans(path).spans
    ]
