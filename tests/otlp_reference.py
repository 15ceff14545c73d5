"""The OTLP exporter's own protobuf encoding as OTLP/JSON: the reference the local file's
direct encoder is tested against, and the local exporter benchmark's "before"."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan


def protobuf_otlp_json(spans: Sequence[ReadableSpan], *,
                       integer_enums: bool = False) -> dict[str, Any]:
    """``spans`` through the OTLP exporter's protobuf encoding and ``MessageToDict``."""
    data = MessageToDict(encode_spans(spans), use_integers_for_enums=integer_enums)
    # OTLP/JSON differs from protobuf's JSON mapping in one place: ids are hex, not base64.
    for rs in data.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
                for link in span.get("links", ()):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = base64.b64decode(link[key]).hex()
    return data
