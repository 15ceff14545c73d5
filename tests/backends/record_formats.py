"""Run tests/report/html_program.py (tasks, nested tasks, LLM calls, nested and parallel
tools) and write the same spans in the formats the readers read.

``python record_formats.py OUTDIR``, in the directory whose ``.agent-latency/traces.jsonl``
the run writes (the reference).  Besides it, from the spans the SDK handed a second
processor, encoded by OpenTelemetry's own OTLP encoder (the one the OTLP exporters send):

* ``otlp.pb``: one ``ExportTraceServiceRequest`` (an OTLP/protobuf file);
* ``collector.pb``: the Collector file exporter's ``proto`` format, one request per
  three spans, each preceded by its length (4 bytes, big-endian), so traces span frames;
* ``requests.json``: each of those requests in protobuf's JSON mapping (base64 ids, enum
  names, 64-bit integers as strings), which is what Tempo's API returns.
"""

from __future__ import annotations

import runpy
import struct
import sys
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import agent_latency

out = Path(sys.argv[1])
PROGRAM = Path(__file__).resolve().parents[1] / "report" / "html_program.py"


class Collected(SpanExporter):
    """Keeps every finished span."""

    def __init__(self) -> None:
        self.spans = []

    def export(self, spans):
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


collected = Collected()
_instrument = agent_latency.instrument


def instrument(*args, **kwargs):
    result = _instrument(*args, **kwargs)
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(collected))
    return result


agent_latency.instrument = instrument
runpy.run_path(str(PROGRAM), run_name="__main__")

spans = collected.spans
(out / "otlp.pb").write_bytes(encode_spans(spans).SerializeToString())
chunks = [spans[i:i + 3] for i in range(0, len(spans), 3)]
with (out / "collector.pb").open("wb") as f:
    for chunk in chunks:
        body = encode_spans(chunk).SerializeToString()
        f.write(struct.pack(">I", len(body)) + body)
import json  # noqa: E402

(out / "requests.json").write_text(json.dumps([MessageToDict(encode_spans([s]))
                                               for s in spans]))
