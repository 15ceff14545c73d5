"""Read spans back from the local default's JSONL file (OTLP/JSON, one request per line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _value(v: dict[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    return None


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Every span in the file as ``{name, trace_id, span_id, parent, start, end, status,
    attributes}`` (times in ns)."""
    spans = []
    if not path.exists():
        return spans
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    spans.append({
                        "name": s["name"],
                        "trace_id": s["traceId"],
                        "span_id": s["spanId"],
                        "parent": s.get("parentSpanId") or None,
                        "start": int(s["startTimeUnixNano"]),
                        "end": int(s["endTimeUnixNano"]),
                        "status": s.get("status", {}).get("code", "STATUS_CODE_UNSET"),
                        "attributes": {a["key"]: _value(a["value"])
                                       for a in s.get("attributes", [])},
                    })
    return spans
