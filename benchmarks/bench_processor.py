"""CPU cost per span of BudgetSpanProcessor, and memory over a million spans.

Not a test: prints figures.  Run: ``python benchmarks/bench_processor.py [--spans N]``.

CPU: the same workload (tasks of 100 spans: half tool spans that count in the budget, half
plain spans) runs on an SDK TracerProvider without and with the processor, alternating, and
the per-span difference of process CPU time is reported (median of the rounds).
Memory: 1,000,000 spans in 10,000 tasks; resident set size is sampled every 1,000 tasks.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from agent_latency import semconv
from agent_latency._hooks import finishers
from agent_latency.processor import BudgetSpanProcessor

TASK_ATTRS = {semconv.TASK_NAME: "bench", semconv.GEN_AI_OPERATION_NAME: "invoke_agent"}
TOOL_ATTRS = {semconv.COMPONENT: semconv.TOOL_EXECUTION, semconv.GEN_AI_TOOL_NAME: "t"}


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def run_tasks(tracer: trace.Tracer, tasks: int, spans_per_task: int) -> None:
    for _ in range(tasks):
        task = tracer.start_span("invoke_agent bench", attributes=TASK_ATTRS)
        ctx = trace.set_span_in_context(task)
        for i in range(spans_per_task):
            span = tracer.start_span("execute_tool t" if i % 2 else "work", context=ctx,
                                     attributes=TOOL_ATTRS if i % 2 else None)
            span.end()
        end = time.time_ns()
        for finisher in finishers:
            finisher(task, end)
        task.end(end_time=end)


def cpu_per_span(with_processor: bool, tasks: int, spans_per_task: int) -> float:
    provider = TracerProvider()
    processor = None
    if with_processor:
        processor = BudgetSpanProcessor(MeterProvider())
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    run_tasks(tracer, 50, spans_per_task)  # warm-up
    gc.collect()
    t0 = time.process_time()
    run_tasks(tracer, tasks, spans_per_task)
    elapsed = time.process_time() - t0
    if processor is not None:
        processor.shutdown()
    return elapsed / (tasks * (spans_per_task + 1)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tasks", type=int, default=400)
    parser.add_argument("--memory-spans", type=int, default=1_000_000)
    args = parser.parse_args()

    base, withp = [], []
    for _ in range(args.rounds):
        base.append(cpu_per_span(False, args.tasks, 100))
        withp.append(cpu_per_span(True, args.tasks, 100))
    diffs = [w - b for w, b in zip(withp, base, strict=True)]
    print(f"CPU per span (µs, process time; median of {args.rounds} rounds of "
          f"{args.tasks * 101} spans)")
    print(f"  SDK span alone            {statistics.median(base):7.2f}")
    print(f"  SDK span + budget proc.   {statistics.median(withp):7.2f}")
    print(f"  added by the processor    {statistics.median(diffs):7.2f}"
          f"   (min {min(diffs):.2f}, max {max(diffs):.2f}; goal <= 2.00)")

    provider = TracerProvider()
    processor = BudgetSpanProcessor(MeterProvider())
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    tasks = args.memory_spans // 100
    samples = []
    gc.collect()
    start = rss_mb()
    t0 = time.perf_counter()
    for _ in range(0, tasks, 1000):
        run_tasks(tracer, 1000, 99)
        gc.collect()
        samples.append(rss_mb())
    elapsed = time.perf_counter() - t0
    warm = samples[min(1, len(samples) - 1)]
    print(f"\nMemory over {tasks * 100:,} spans in {tasks:,} tasks ({elapsed:.0f} s):")
    print(f"  RSS at start {start:.1f} MB, after 1st 1,000 tasks {samples[0]:.1f} MB, "
          f"at end {samples[-1]:.1f} MB")
    print(f"  growth over the run {samples[-1] - start:.1f} MB (goal < 50), "
          f"after warm-up {samples[-1] - warm:+.1f} MB (flat = ~0)")
    print("  samples (MB):", " ".join(f"{s:.1f}" for s in samples))
    print(f"  open tasks held at end: {len(processor._tasks)}, open spans: "
          f"{len(processor._owner)}")


if __name__ == "__main__":
    main()
