"""Read stored spans: OTLP/JSON files, one export request per line or one document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class TraceFileError(ValueError):
    """A trace file that cannot be read at all (missing, empty, not OTLP/JSON)."""


@dataclass(slots=True)
class StoredSpan:
    """One span as stored: ids in hex, times in integer nanoseconds, plain attributes."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str = "UNSET"


@dataclass(slots=True)
class ReadResult:
    """The spans read and one message per line that could not be used."""

    spans: list[StoredSpan]
    problems: list[str]


def read_spans(path: str | Path) -> ReadResult:
    """Every span in an OTLP/JSON file; malformed lines are reported and skipped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFileError(f"{path}: no such file (run an instrumented program first, or "
                             "name the file to read)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFileError(f"{path}: cannot read: {exc}") from None
    spans: list[StoredSpan] = []
    problems: list[str] = []
    documents = list(_documents(text, path, problems))
    for where, doc in documents:
        try:
            spans.extend(_spans_of(doc))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problems.append(f"{where}: not an OTLP/JSON trace export ({type(exc).__name__}: "
                            f"{exc}); skipped")
    if not spans and problems and not documents:
        raise TraceFileError(f"{path}: no OTLP/JSON spans found ({problems[0]})")
    return ReadResult(spans, problems)


def _documents(text: str, path: Path, problems: list[str]) -> Iterator[tuple[str, Any]]:
    stripped = text.strip()
    if not stripped:
        return
    if stripped.startswith("{") and "\n" in stripped:
        try:
            yield str(path), json.loads(stripped)
            return
        except json.JSONDecodeError:
            pass  # JSON lines, not one pretty-printed document
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{number}", json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{number}: malformed JSON ({exc.msg} at column "
                            f"{exc.colno}); line skipped")


def _spans_of(doc: Any) -> Iterator[StoredSpan]:
    for rs in doc["resourceSpans"]:
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                yield StoredSpan(
                    trace_id=span["traceId"],
                    span_id=span["spanId"],
                    parent_id=span.get("parentSpanId", "") or "",
                    name=span.get("name", ""),
                    start_ns=int(span["startTimeUnixNano"]),
                    end_ns=int(span["endTimeUnixNano"]),
                    attributes={kv["key"]: _value(kv.get("value", {}))
                                for kv in span.get("attributes", ())},
                    status=_status(span.get("status", {})),
                )


def _value(value: dict[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [_value(v) for v in value["arrayValue"].get("values", ())]
    return None


def _status(status: dict[str, Any]) -> str:
    code = status.get("code", 0)
    return {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_OK": "OK",
            "STATUS_CODE_ERROR": "ERROR"}.get(code, "UNSET")
