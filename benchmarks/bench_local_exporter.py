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

from opentelemetry.sdk.trace import ReadableSpan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _agent_trace import task_spans
from otlp_reference import protobuf_otlp_json

from agent_latency import semconv
from agent_latency._local import JsonLinesSpanExporter

GOAL_US = 20.0
BATCH = 512  # the BatchSpanProcessor's default export size


def realistic_spans(count: int) -> list[ReadableSpan]:
    """``count`` spans shaped like a task's (``_agent_trace.task_spans``): per LLM call one
    CLIENT span with its ~30 attributes and three phase spans, a tool span, and a task span
    with its budget every 20 calls."""
    spans: list[ReadableSpan] = []
    while len(spans) < count:
        spans.extend(task_spans(20))
    return spans[:count]


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
