"""The processor's memory is bounded: spans never ended inside finished tasks are swept
after a bounded count, and evicting the oldest open task costs O(1)."""

from __future__ import annotations

import time

import pytest
from opentelemetry.sdk.trace import TracerProvider

from agent_latency import processor as processor_module
from agent_latency.processor import BudgetSpanProcessor


@pytest.fixture
def setup() -> tuple[TracerProvider, BudgetSpanProcessor]:
    provider = TracerProvider()
    budget = BudgetSpanProcessor()
    provider.add_span_processor(budget)
    yield provider, budget
    budget.shutdown()
    provider.shutdown()


def _task_attrs(name: str) -> dict[str, str]:
    from agent_latency._scope import task_attributes

    return task_attributes(name)


class TestLeakedSpansSwept:
    """Spans left open inside finished tasks do not pile up."""

    def test_bounded_by_count(self, setup: tuple[TracerProvider, BudgetSpanProcessor],
                              monkeypatch: pytest.MonkeyPatch) -> None:
        provider, budget = setup
        monkeypatch.setattr(processor_module, "_SWEEP_AFTER_LEAKED", 100)
        tracer = provider.get_tracer("t")
        from opentelemetry import trace

        for i in range(2_000):
            task = tracer.start_span(f"invoke_agent {i}", attributes=_task_attrs(str(i)))
            ctx = trace.set_span_in_context(task)
            tracer.start_span("leaked", context=ctx)  # never ended
            tracer.start_span("ended", context=ctx).end()
            task.end()
        assert len(budget._owner) <= 100 + 2
        assert len(budget._in_tool) <= 100 + 2
        assert not budget._tasks

    def test_bounded_by_age(self, setup: tuple[TracerProvider, BudgetSpanProcessor],
                            monkeypatch: pytest.MonkeyPatch) -> None:
        provider, budget = setup
        monkeypatch.setattr(processor_module, "_SWEEP_AFTER_S", 0.0)
        tracer = provider.get_tracer("t")
        from opentelemetry import trace

        for i in range(50):
            task = tracer.start_span(f"invoke_agent {i}", attributes=_task_attrs(str(i)))
            tracer.start_span("leaked", context=trace.set_span_in_context(task))
            time.sleep(0.001)
            task.end()
        assert len(budget._owner) <= 1

    def test_spans_of_open_tasks_are_kept(
            self, setup: tuple[TracerProvider, BudgetSpanProcessor],
            monkeypatch: pytest.MonkeyPatch) -> None:
        provider, budget = setup
        monkeypatch.setattr(processor_module, "_SWEEP_AFTER_LEAKED", 1)
        tracer = provider.get_tracer("t")
        from opentelemetry import trace

        outer = tracer.start_span("invoke_agent outer", attributes=_task_attrs("outer"))
        child = tracer.start_span("open", context=trace.set_span_in_context(outer))
        for i in range(10):
            task = tracer.start_span(f"invoke_agent {i}", attributes=_task_attrs(str(i)))
            tracer.start_span("leaked", context=trace.set_span_in_context(task))
            task.end()
        assert child.get_span_context().span_id in budget._owner
        child.end()
        outer.end()


class TestEvictionCost:
    """Past max_open_tasks, starting a task costs about what it costs below it."""

    def test_eviction_is_constant_time(self) -> None:
        provider = TracerProvider()
        budget = BudgetSpanProcessor(max_open_tasks=20_000)
        provider.add_span_processor(budget)
        tracer = provider.get_tracer("t")

        def start_many(count: int) -> float:
            began = time.perf_counter()
            for i in range(count):
                tracer.start_span(f"invoke_agent {i}", attributes=_task_attrs(str(i)))
            return (time.perf_counter() - began) / count

        # one process task first: never evicted, must not make eviction scan
        from agent_latency import semconv

        tracer.start_span("invoke_agent p", attributes={**_task_attrs("p"),
                                                       semconv.PROCESS_TASK: True})
        below = start_many(15_000)
        start_many(5_000)  # reach the cap
        above = min(start_many(5_000) for _ in range(3))
        assert len(budget._tasks) <= 20_000
        # O(n) eviction (a scan of 20,000 entries per start) is >10x; generous for a busy box
        assert above < 5 * below + 50e-6, (below, above)
        budget.shutdown()
        provider.shutdown()
