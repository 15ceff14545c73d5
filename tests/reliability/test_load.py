"""Load: 10,000 concurrent asyncio tasks, 100 threads spawning tools, streams abandoned
half-way and spans leaked on purpose — no span of ours left open, every budget adds up, and
memory stays flat over 1,000,000 calls."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agent_latency
from agent_latency import semconv
from agent_latency.budget import COMPONENTS
from agent_latency.instrumentation.httpx import HttpxInstrumentor
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
from agent_latency.instrumentation.tools.subprocess import SubprocessInstrumentor
from agent_latency.processor import BudgetSpanProcessor
from agent_latency.simulator import Simulator, SimulatorConfig

LEAKED = "leaked on purpose"


class OpenSpans(SpanProcessor):
    """Counts spans started and not ended (those the test leaks on purpose aside)."""

    def __init__(self) -> None:
        self.open: set[int] = set()
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        if span.name != LEAKED:
            with self._lock:
                self.open.add(span.context.span_id)

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.open.discard(span.context.span_id)


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.fixture
def provider(reset_globals: Callable[[], None]
             ) -> Iterator[tuple[TracerProvider, BudgetSpanProcessor, OpenSpans]]:
    reset_otel_globals = reset_globals
    reset_otel_globals()
    provider = TracerProvider()
    budget = BudgetSpanProcessor()
    open_spans = OpenSpans()
    provider.add_span_processor(budget)
    provider.add_span_processor(open_spans)
    trace.set_tracer_provider(provider)
    yield provider, budget, open_spans
    budget.shutdown()
    provider.shutdown()
    reset_otel_globals()


def _leak() -> None:
    agent_latency._scope.tracer().start_span(LEAKED)  # never ended


def _assert_adds_up(spans: list[ReadableSpan]) -> int:
    checked = 0
    for span in spans:
        attrs = span.attributes or {}
        if semconv.BUDGET_WALL not in attrs:
            continue
        wall = float(attrs[semconv.BUDGET_WALL])
        total = sum(float(attrs.get(semconv.budget_share(c), 0.0)) for c in COMPONENTS)
        assert abs(total - wall) <= 1e-6 + 1e-9 * wall, (span.name, wall, total)
        checked += 1
    return checked


class TestConcurrency:
    """Thousands of tasks at once, threads spawning processes, abandoned streams."""

    def test_asyncio_threads_and_abandoned_streams(
            self, provider: tuple[TracerProvider, BudgetSpanProcessor, OpenSpans]) -> None:
        tracer_provider, budget, open_spans = provider
        exporter = InMemorySpanExporter()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        instrumentors = [HttpxInstrumentor(), OpenAIInstrumentor(), SubprocessInstrumentor()]
        for i in instrumentors:
            i.instrument()
        try:
            with Simulator(SimulatorConfig(prefill_tps=50000.0, output_tps=5000.0,
                                           default_output_tokens=16)) as sim:
                client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k")

                async def one(i: int) -> None:
                    async with agent_latency.task(f"a{i}"):
                        with agent_latency.tool("step"):
                            await asyncio.sleep(0)
                        if i % 1000 == 0:
                            _leak()
                        if i % 200 == 0:  # 50 streams, each abandoned after one chunk
                            stream = await client.chat.completions.create(
                                model="sim", messages=[{"role": "user", "content": "x"}],
                                stream=True)
                            async for _ in stream:
                                break
                            del stream
                        await asyncio.sleep(0)

                async def all_tasks() -> None:
                    await asyncio.gather(*(one(i) for i in range(10_000)))
                    await client.close()

                started = time.perf_counter()
                asyncio.run(all_tasks())

                def spawner(n: int) -> None:
                    with agent_latency.task(f"thread{n}"):
                        for _ in range(3):
                            subprocess.run([sys.executable, "-c", "pass"] if n % 50 == 0
                                           else ["true"], check=True)
                            with agent_latency.tool("t"):
                                pass
                        _leak()

                threads = [threading.Thread(target=spawner, args=(n,)) for n in range(100)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                print(f"\nconcurrency part: {time.perf_counter() - started:.1f} s")
        finally:
            for i in reversed(instrumentors):
                i.uninstrument()
        gc.collect()
        assert not open_spans.open, f"{len(open_spans.open)} spans of ours still open"
        assert not budget._tasks
        spans = exporter.get_finished_spans()
        names = [s.name for s in spans]
        assert sum(n.startswith("invoke_agent a") for n in names) == 10_000
        assert sum(n.startswith("invoke_agent thread") for n in names) == 100
        assert _assert_adds_up(list(spans)) == 10_100


class TestMemoryFlat:
    """RSS after 300,000 tool calls (with leaked spans) within 10 % of RSS after the first
    30,000 (benchmarks/bench_long_task.py runs a million)."""

    @pytest.mark.slow
    def test_rss_flat_over_many_calls(
            self, provider: tuple[TracerProvider, BudgetSpanProcessor, OpenSpans]) -> None:
        _, budget, open_spans = provider
        tool = agent_latency.tool
        started = time.perf_counter()
        baseline = 0
        for block in range(3_000):  # 3,000 tasks of 100 tool calls: 300,000 calls
            with agent_latency.task("load"):
                for _ in range(100):
                    with tool("cheap"):
                        pass
                if block % 10 == 0:
                    _leak()
            if block == 300:
                gc.collect()
                baseline = _rss_kib()
        gc.collect()
        final = _rss_kib()
        elapsed = time.perf_counter() - started
        print(f"\nRSS after 30,000 calls {baseline} KiB, after 300,000 {final} KiB "
              f"({(final - baseline) / baseline:+.1%}); {elapsed:.1f} s")
        assert final <= baseline * 1.10
        assert not open_spans.open
        assert list(budget.open_tasks()) == []
