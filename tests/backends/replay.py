"""Jaeger's and Tempo's query APIs, replayed from spans by a small local HTTP server.

The responses are built from OTLP requests (protobuf's JSON mapping, as
``record_formats.py`` writes them) the way each backend builds its own:

* Jaeger (``GET /api/traces?service=…``, ``GET /api/traces/{id}``): its JSON model, as its
  query service returns it for spans received over OTLP — ``traceID``/``spanID`` in hex,
  ``startTime`` and ``duration`` in whole microseconds (truncated), attributes as
  ``tags`` of type ``string``/``bool``/``int64``/``float64`` (arrays as JSON strings), the
  span kind as ``span.kind``, the status as ``otel.status_code`` (and ``error`` = true), the
  scope as ``otel.scope.name``, the parent as a ``CHILD_OF`` reference, the resource as a
  process (``p1`` …) with ``serviceName`` and ``tags``; the envelope ``{"data", "total",
  "limit", "offset", "errors"}``.
* Tempo (``GET /api/search``, ``GET /api/traces/{id}``): the search answers
  ``{"traces": [{"traceID", "rootServiceName", "rootTraceName", "startTimeUnixNano",
  "durationMs"}], "metrics": {…}}`` with the trace id's leading zeros dropped; a trace is
  OTLP in protobuf's JSON mapping (base64 ids, enum names, 64-bit integers as strings),
  under ``batches`` (Tempo 1.x and 2.x's ``/api/traces``) or ``resourceSpans``.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _hex(b64: str) -> str:
    return base64.b64decode(b64).hex() if b64 else ""


def _otlp_value(value: dict[str, Any]) -> tuple[str, Any]:
    if "stringValue" in value:
        return "string", value["stringValue"]
    if "boolValue" in value:
        return "bool", value["boolValue"]
    if "intValue" in value:
        return "int64", int(value["intValue"])
    if "doubleValue" in value:
        return "float64", value["doubleValue"]
    if "arrayValue" in value:
        return "string", json.dumps([_otlp_value(v)[1] for v in
                                     value["arrayValue"].get("values", [])])
    return "string", ""


def spans_by_trace(requests: list[dict[str, Any]]) -> dict[str, list[tuple[dict, dict, dict]]]:
    """``{trace id hex: [(resource, scope, span), …]}`` from OTLP requests."""
    out: dict[str, list[tuple[dict, dict, dict]]] = {}
    for request in requests:
        for rs in request.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    out.setdefault(_hex(span["traceId"]), []).append(
                        (rs.get("resource", {}), ss.get("scope", {}), span))
    return out


def jaeger_trace(trace_id: str, items: list[tuple[dict, dict, dict]]) -> dict[str, Any]:
    """One trace in Jaeger's JSON model."""
    processes: dict[str, dict[str, Any]] = {}
    process_ids: dict[str, str] = {}
    spans = []
    for resource, scope, span in items:
        tags = [{"key": kv["key"], "type": t, "value": v} for kv in resource.get("attributes", [])
                for t, v in [_otlp_value(kv["value"])] if kv["key"] != "service.name"]
        service = next((kv["value"].get("stringValue", "") for kv in
                        resource.get("attributes", []) if kv["key"] == "service.name"), "")
        key = json.dumps([service, tags], sort_keys=True)
        if key not in process_ids:
            process_ids[key] = f"p{len(process_ids) + 1}"
            processes[process_ids[key]] = {"serviceName": service, "tags": tags}
        span_tags = [{"key": "otel.scope.name", "type": "string", "value": scope.get("name", "")}]
        if scope.get("version"):
            span_tags.append({"key": "otel.scope.version", "type": "string",
                              "value": scope["version"]})
        kind = span.get("kind", "SPAN_KIND_INTERNAL").removeprefix("SPAN_KIND_").lower()
        if kind != "unspecified":
            span_tags.append({"key": "span.kind", "type": "string", "value": kind})
        status = span.get("status", {}).get("code", "")
        if status == "STATUS_CODE_ERROR":
            span_tags += [{"key": "otel.status_code", "type": "string", "value": "ERROR"},
                          {"key": "error", "type": "bool", "value": True}]
        elif status == "STATUS_CODE_OK":
            span_tags.append({"key": "otel.status_code", "type": "string", "value": "OK"})
        for kv in span.get("attributes", []):
            t, v = _otlp_value(kv["value"])
            span_tags.append({"key": kv["key"], "type": t, "value": v})
        start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
        parent = _hex(span.get("parentSpanId", ""))
        spans.append({
            "traceID": trace_id, "spanID": _hex(span["spanId"]), "flags": 1,
            "operationName": span["name"],
            "references": [{"refType": "CHILD_OF", "traceID": trace_id, "spanID": parent}]
            if parent else [],
            "startTime": start // 1000, "duration": (end - start) // 1000,
            "tags": span_tags, "logs": [], "processID": process_ids[key], "warnings": None,
        })
    return {"traceID": trace_id, "spans": spans, "processes": processes, "warnings": None}


def tempo_trace(items: list[tuple[dict, dict, dict]], style: str) -> dict[str, Any]:
    """One trace as Tempo's ``/api/traces/{id}`` returns it."""
    batches = [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": [span]}]}
               for resource, scope, span in items]
    return {"batches": batches} if style == "batches" else {"resourceSpans": batches}


class Backend:
    """The responses one replayed backend gives, by path."""

    def __init__(self, kind: str, requests: list[dict[str, Any]], style: str = "batches"):
        self.kind = kind
        self.traces = spans_by_trace(requests)
        self.style = style
        self.paths: list[str] = []

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, Any]:
        self.paths.append(path + ("?" + urllib.parse.urlencode(query) if query else ""))
        if self.kind == "jaeger":
            if path == "/api/traces":
                if "service" not in query:
                    return 400, {"data": None, "total": 0, "limit": 0, "offset": 0,
                                 "errors": [{"code": 400, "msg": "parameter 'service' "
                                                                "is required"}]}
                data = [jaeger_trace(t, items) for t, items in self.traces.items()]
                return 200, {"data": data, "total": 0, "limit": 0, "offset": 0,
                             "errors": None}
            if path.startswith("/api/traces/"):
                trace_id = path.rsplit("/", 1)[1].zfill(32)
                if trace_id not in self.traces:
                    return 404, {"data": None, "total": 0, "limit": 0, "offset": 0,
                                 "errors": [{"code": 404, "msg": "trace not found"}]}
                return 200, {"data": [jaeger_trace(trace_id, self.traces[trace_id])],
                             "total": 0, "limit": 0, "offset": 0, "errors": None}
        if self.kind == "tempo":
            if path == "/api/search":
                found = []
                for trace_id, items in list(self.traces.items())[:int(query.get("limit", 20))]:
                    root = min(items, key=lambda i: int(i[2]["startTimeUnixNano"]))
                    start = int(root[2]["startTimeUnixNano"])
                    end = max(int(i[2]["endTimeUnixNano"]) for i in items)
                    found.append({"traceID": trace_id.lstrip("0"),
                                  "rootServiceName": "unknown_service:python",
                                  "rootTraceName": root[2]["name"],
                                  "startTimeUnixNano": str(start),
                                  "durationMs": (end - start) // 1_000_000})
                return 200, {"traces": found, "metrics": {"inspectedBytes": "1024",
                                                          "completedJobs": 1, "totalJobs": 1}}
            if path.startswith("/api/traces/"):
                trace_id = path.rsplit("/", 1)[1].zfill(32)
                if trace_id not in self.traces:
                    return 404, "trace not found"
                return 200, tempo_trace(self.traces[trace_id], self.style)
        return 404, "404 page not found"


@contextmanager
def serve(backend: Backend) -> Iterator[str]:
    """``backend`` on 127.0.0.1 (a free port); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            parts = urllib.parse.urlsplit(self.path)
            status, body = backend.answer(parts.path, dict(urllib.parse.parse_qsl(parts.query)))
            data = (json.dumps(body) if not isinstance(body, str) else body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(body, str)
                             else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
