"""A long-lived process: per-call CPU and memory of one process task over many LLM calls.

Not a test: prints figures.  Run: ``python benchmarks/bench_long_task.py [--calls N]``
(default 1,000,000).

``instrument()`` with its implicit process task, spans computed but not exported
(``OTEL_TRACES_EXPORTER=none``: the figure is our per-call state, not the exporter's file),
and N streamed LLM calls one after another through the provider-neutral LLM core: a tiny
in-process fake SDK (a module-level ``create(stream=True)`` that returns a generator of five
chunks, wrapped by ``instrumentation.llm._invoke.call_wrapper`` as a provider module would),
so no network and no SDK parsing, only ours.  Printed: process CPU per call of the first and
the last 10,000 calls, resident memory after warm-up and at the end, and the process task's
budget beside an offline recomputation (``span_intervals`` and ``split`` over every LLM
span, recorded to a side file as the run goes, the full sweep the processor used to run).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
os.environ.setdefault("OTEL_METRICS_EXPORTER", "none")
os.environ.setdefault("AGENT_LATENCY_SUMMARY", "false")

import wrapt  # after the environment the SDK reads
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

import agent_latency
from agent_latency import semconv
from agent_latency.budget import split
from agent_latency.codec import span_intervals
from agent_latency.instrumentation.llm import Endpoint, Settings
from agent_latency.instrumentation.llm._invoke import call_wrapper

BLOCK = 10_000
# The LLM span attributes the budget reads, in a fixed order for the side file.
RECORDED = (*(attr for attr, _, _ in semconv.LLM_PHASES), semconv.GEN_AI_USAGE_INPUT_TOKENS,
            semconv.GEN_AI_USAGE_OUTPUT_TOKENS)


class _Chunk:
    __slots__ = ("content",)

    def __init__(self, content: str) -> None:
        self.content = content


def _observe(state: Any, chunk: _Chunk) -> bool:
    return bool(chunk.content)


def _from_stream(call: Any) -> None:
    call.info.input_tokens = 12
    call.info.output_tokens = call.outputs


def _chunks() -> Any:
    yield _Chunk("")  # a role-only first chunk
    for word in ("one", "two", "three", "four"):
        yield _Chunk(word)


def _create(**request: Any) -> Any:
    """The fake SDK method: a stream of five chunks."""
    return _chunks()


ENDPOINT = Endpoint(provider="fake", operation=semconv.OPERATION_CHAT, observe=_observe,
                    from_stream=_from_stream)
create = wrapt.FunctionWrapper(_create, call_wrapper(ENDPOINT, Settings()))


class SideRecorder(SpanProcessor):
    """Appends each LLM span's times and budget attributes to a file (constant memory)."""

    _FORMAT = struct.Struct("<qq" + "d" * len(RECORDED))

    def __init__(self, path: Path) -> None:
        self.file = path.open("wb", buffering=1 << 20)

    def on_end(self, span: ReadableSpan) -> None:
        attrs = span.attributes or {}
        if semconv.LLM_CLIENT not in attrs:
            return
        self.file.write(self._FORMAT.pack(span.start_time or 0, span.end_time or 0,
                                          *(float(attrs.get(a, 0) or 0) for a in RECORDED)))

    def read(self) -> list[Any]:
        self.file.close()
        data = Path(self.file.name).read_bytes()
        size = self._FORMAT.size
        intervals: list[Any] = []
        for offset in range(0, len(data), size):
            start, end, *values = self._FORMAT.unpack_from(data, offset)
            attrs = dict(zip(RECORDED, values, strict=True))
            attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] = int(attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS])
            attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = int(
                attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS])
            intervals.extend(span_intervals(attrs, start, end)[0])
        return intervals


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def one_call() -> None:
    for _chunk in create(model="fake-model", stream=True):
        pass


def run(calls: int, side: Path | None) -> dict[str, Any]:
    """N calls in the process task; figures per block of 10,000 calls."""
    agent_latency.instrument()
    recorder = SideRecorder(side) if side is not None else None
    if recorder is not None:
        trace.get_tracer_provider().add_span_processor(recorder)  # type: ignore[attr-defined]
    from agent_latency._process import process_task

    blocks: list[float] = []
    rss: list[float] = []
    done = 0
    while done < calls:
        n = min(BLOCK, calls - done)
        t0 = time.process_time()
        for _ in range(n):
            one_call()
        blocks.append((time.process_time() - t0) / n)
        done += n
        gc.collect()
        rss.append(rss_mb())
    span = process_task.span
    result: dict[str, Any] = {"calls": calls, "cpu_per_call": blocks, "rss_mb": rss}
    start_ns = span.start_time  # type: ignore[union-attr]
    process_task.end()
    attrs = span.attributes  # type: ignore[union-attr]
    result["budget"] = {c: attrs[semconv.budget_share(c)] for c in semconv.COMPONENTS}
    result["wall"] = attrs[semconv.BUDGET_WALL]
    if recorder is not None:
        offline = split(recorder.read(), start_ns, span.end_time)  # type: ignore[union-attr]
        result["offline"] = offline.shares
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--no-offline", action="store_true",
                        help="skip the offline recomputation (it holds every interval)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    side = None if args.no_offline else Path(tempfile.mkdtemp()) / "llm_spans.bin"
    result = run(args.calls, side)
    if args.json:
        print(json.dumps(result))
        return
    report(result)


def report(result: dict[str, Any]) -> None:
    """Print the figures of :func:`run`."""
    blocks, rss = result["cpu_per_call"], result["rss_mb"]
    first, last = blocks[0], blocks[-1]
    print(f"{result['calls']:,} streamed calls in one process task (load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"CPU per call: first {BLOCK:,} {first * 1e6:.0f} µs, last {BLOCK:,} "
          f"{last * 1e6:.0f} µs ({(last / first - 1) * 100:+.1f} %; goal within 10 %); "
          f"median block {sorted(blocks)[len(blocks) // 2] * 1e6:.0f} µs")
    if len(blocks) >= 10:
        # Single blocks move by 10 % and more on a loaded machine: medians of the first and
        # the last five blocks say whether the cost grows.
        head, tail = sorted(blocks[:5])[2], sorted(blocks[-5:])[2]
        print(f"median of the first 5 blocks {head * 1e6:.0f} µs, of the last 5 "
              f"{tail * 1e6:.0f} µs ({(tail / head - 1) * 100:+.1f} %)")
    warm = rss[min(1, len(rss) - 1)]
    print(f"RSS after {BLOCK * 2:,} calls {warm:.1f} MB, at the end {rss[-1]:.1f} MB "
          f"({rss[-1] - warm:+.1f} MB; goal under 10 MB)")
    if "offline" in result:
        worst = max(abs(result["budget"][c] - result["offline"][c]) for c in result["budget"])
        print(f"process task: wall {result['wall']:.3f} s, shares {result['budget']}")
        print(f"offline recomputation differs by at most {worst * 1e6:.3f} µs (goal ≤ 1 µs)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
