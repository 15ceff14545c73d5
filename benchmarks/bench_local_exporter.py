"""CPU per span of the local default's file exporter: the protobuf path it used before
(``encode_spans`` + ``MessageToDict`` + ``json.dumps``) beside the direct OTLP/JSON encoder
now in use, on realistic spans: an LLM call with the ~25 attributes our instrumentation sets,
its phase spans, and a task span with its budget.

    PYTHONPATH=src python benchmarks/bench_local_exporter.py [--spans 20000]

Prints µs of CPU (``time.process_time``) per span, encoding and writing included, beside the
20 µs goal.  Never fails on timing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from agent_latency import semconv
from agent_latency._local import JsonLinesSpanExporter, protobuf_otlp_json

GOAL_US = 20.0
BATCH = 512  # the BatchSpanProcessor's default export size


class _Keep(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def realistic_spans(count: int) -> list[ReadableSpan]:
    """``count`` spans shaped like a task's: per LLM call one CLIENT span with ~25
    attributes and three phase spans; a task span with its budget every 20 calls."""
    keep = _Keep()
    provider = TracerProvider(resource=Resource.create({
        "service.name": "agent", "process.pid": os.getpid(), "host.name": "bench"}))
    provider.add_span_processor(keep)
    tracer = provider.get_tracer("agent_latency", "0.1")
    while len(keep.spans) < count:
        with tracer.start_as_current_span("task fix", attributes={
                semconv.TASK_NAME: "fix", semconv.PROCESS_TASK: False}) as task:
            for i in range(20):
                with tracer.start_as_current_span("chat gpt-5", kind=SpanKind.CLIENT) as call:
                    call.set_attributes({
                        semconv.GEN_AI_OPERATION_NAME: "chat",
                        semconv.GEN_AI_PROVIDER_NAME: "openai",
                        semconv.GEN_AI_REQUEST_MODEL: "gpt-5-mini",
                        semconv.GEN_AI_REQUEST_MAX_TOKENS: 4096,
                        semconv.GEN_AI_REQUEST_TEMPERATURE: 0.2,
                        semconv.GEN_AI_REQUEST_STREAM: True,
                        semconv.GEN_AI_RESPONSE_MODEL: "gpt-5-mini-2025-08-07",
                        semconv.GEN_AI_RESPONSE_ID: f"chatcmpl-{i:024d}",
                        semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
                        semconv.GEN_AI_USAGE_INPUT_TOKENS: 12_345 + i,
                        semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 321,
                        semconv.SERVER_ADDRESS: "api.openai.com",
                        semconv.SERVER_PORT: 443,
                        semconv.LLM_CLIENT: 0.0012,
                        semconv.LLM_STREAMING: True,
                        semconv.LLM_TTFT: 0.41234,
                        semconv.LLM_DNS: 0.0,
                        semconv.LLM_CONNECT: 0.0,
                        semconv.LLM_TLS: 0.0,
                        semconv.LLM_UPLOAD: 0.0021,
                        semconv.LLM_RTT: 0.0123,
                        semconv.LLM_RTT_SOURCE: "tcp_info",
                        semconv.LLM_PREFILL: 0.3881,
                        semconv.LLM_OUTPUT_GENERATION: 2.104,
                        semconv.LLM_CONNECTION_REUSED: True,
                        semconv.LLM_ATTEMPTS: 1,
                        semconv.LLM_CHUNKS: 322,
                    })
                    for phase in ("network", "prefill", "output_generation"):
                        with tracer.start_as_current_span(phase) as child:
                            child.set_attribute(semconv.COMPONENT, phase)
                    call.set_status(Status(StatusCode.OK))
            task.set_attributes({semconv.BUDGET_WALL: 61.5, **{
                semconv.budget_share(c): 12.3 for c in ("output_generation", "prefill",
                                                         "tool_execution", "network_overhead",
                                                         "other")}})
    return keep.spans[:count]


def cpu_per_span(spans: list[ReadableSpan], export) -> float:
    start = time.process_time()
    for i in range(0, len(spans), BATCH):
        export(spans[i:i + BATCH])
    return (time.process_time() - start) / len(spans) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=20_000)
    args = parser.parse_args()
    spans = realistic_spans(args.spans)
    with tempfile.TemporaryDirectory() as tmp:
        before_path = Path(tmp) / "before.jsonl"
        fd = os.open(before_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        def protobuf_path(batch):
            os.write(fd, (json.dumps(protobuf_otlp_json(batch), separators=(",", ":"))
                          + "\n").encode())

        exporter = JsonLinesSpanExporter(Path(tmp) / "after.jsonl")
        cpu_per_span(spans[:BATCH], protobuf_path)  # imports and caches out of the timing
        cpu_per_span(spans[:BATCH], exporter.export)
        size_warmup = (Path(tmp) / "after.jsonl").stat().st_size
        before = cpu_per_span(spans, protobuf_path)
        after = cpu_per_span(spans, exporter.export)
        size = (Path(tmp) / "after.jsonl").stat().st_size - size_warmup
        llm = [s for s in spans if s.attributes.get(semconv.LLM_CLIENT)]
        llm_before = cpu_per_span(llm, protobuf_path)
        llm_after = cpu_per_span(llm, exporter.export)
        os.close(fd)
        exporter.shutdown()
    print(f"{len(spans):,} spans, batches of {BATCH}, {size / len(spans):,.0f} bytes per span")
    print(f"  before (protobuf + MessageToDict): {before:7.1f} µs CPU per span")
    print(f"  after  (direct OTLP/JSON):         {after:7.1f} µs CPU per span "
          f"(goal ≤ {GOAL_US:.0f}; {before / after:.1f}x less)")
    print(f"LLM call spans alone ({len(llm):,}, {len(llm[0].attributes)} attributes each):")
    print(f"  before: {llm_before:7.1f} µs CPU per span")
    print(f"  after:  {llm_after:7.1f} µs CPU per span")


if __name__ == "__main__":
    main()
