"""The embedded local default: spans as OTLP-JSON lines in a file, a line per finished task.

Used when the program set no tracer provider and no OTLP endpoint is configured, so a user
sees budgets with no backend at all.  The file has one OTLP/JSON ``ExportTraceServiceRequest``
per line (the OpenTelemetry Collector's file exporter format), readable by
``agent-latency report``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import semconv
from ._log import warn_once
from .budget import COMPONENTS, Budget


class JsonLinesSpanExporter(SpanExporter):
    """Appends spans to a file as OTLP/JSON, one export request per line.

    A file that cannot be written (a missing directory that cannot be made, a full disk)
    is reported once and the spans are dropped: the host program goes on.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        """Where the spans go."""
        return self._path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            line = json.dumps(spans_to_otlp_json(spans), separators=(",", ":")) + "\n"
            data = line.encode("utf-8")
            with self._lock:
                if self._fd is None:
                    self._path.parent.mkdir(parents=True, exist_ok=True)
                    self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                # One write on an O_APPEND descriptor: lines from several processes sharing
                # the file never interleave.
                written = os.write(self._fd, data)
                while written < len(data):
                    written += os.write(self._fd, data[written:])
            return SpanExportResult.SUCCESS
        except Exception as exc:  # noqa: BLE001
            warn_once(f"jsonl-{self._path}", "agent-latency: cannot write spans to %s: %s",
                      self._path, exc)
            return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def spans_to_otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """OTLP/JSON (hex ids, camelCase, int64 as strings) for a batch of SDK spans."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    data = MessageToDict(encode_spans(spans))
    # OTLP/JSON differs from protobuf's JSON mapping in one place: ids are hex, not base64.
    for rs in data.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _b64_to_hex(span[key])
                for link in span.get("links", ()):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = _b64_to_hex(link[key])
    return data


def _b64_to_hex(value: str) -> str:
    import base64

    return base64.b64decode(value).hex()


_LLM_CALLS = semconv.budget_count("llm_calls")
_TOOL_CALLS = semconv.budget_count("tool_calls")


class TaskSummaryPrinter(SpanProcessor):
    """Prints one line per finished task, e.g. ``task fix 12.41s = output 4.10 | …``.

    The implicit process task (``instrument()`` alone) gets a line only for LLM calls or
    tools of its own: a program that made none, or made them all inside its own tasks or
    agent runs (explicit tasks win), would only be told how long it ran.
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream
        # LLM and tool calls of the tasks that ended right under the implicit process task.
        self._nested: dict[int, list[int]] = {}

    def _remember(self, span: ReadableSpan, attrs: Any) -> None:
        from ._process import process_task

        parent = span.parent
        implicit = process_task.span if process_task.implicit else None
        # Only tasks right under the implicit process task: bounded to one entry.
        if (parent is not None and implicit is not None
                and parent.span_id == implicit.get_span_context().span_id):
            seen = self._nested.setdefault(parent.span_id, [0, 0])
            seen[0] += int(attrs.get(_LLM_CALLS) or 0)
            seen[1] += int(attrs.get(_TOOL_CALLS) or 0)

    def _has_own_work(self, span: ReadableSpan, attrs: Any) -> bool:
        nested = self._nested.pop(span.context.span_id, [0, 0])
        return (int(attrs.get(_LLM_CALLS) or 0) > nested[0]
                or int(attrs.get(_TOOL_CALLS) or 0) > nested[1])

    def on_end(self, span: ReadableSpan) -> None:
        attrs = span.attributes or {}
        name = attrs.get(semconv.TASK_NAME)
        if name is None or semconv.BUDGET_WALL not in attrs:
            return
        try:
            if attrs.get(semconv.PROCESS_TASK):
                if not self._has_own_work(span, attrs):
                    return
            else:
                self._remember(span, attrs)
        except Exception:  # noqa: BLE001 - a line is not worth an error
            pass
        budget = Budget(
            wall=float(attrs[semconv.BUDGET_WALL]),
            shares={c: float(attrs.get(semconv.budget_share(c), 0.0)) for c in COMPONENTS},
            busy={c: float(attrs.get(semconv.budget_busy(c), 0.0)) for c in COMPONENTS},
        )
        try:
            print(budget.summary(str(name)), file=self._stream or sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - a closed stderr must not break the program
            pass
