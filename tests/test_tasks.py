"""task() and tool() with the budget processor, black-box through exported spans."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from opentelemetry import trace

import agent_latency
from agent_latency import semconv
from agent_latency.budget import COMPONENTS


def budget(span) -> dict[str, float]:
    return {c: span.attributes[semconv.budget_share(c)] for c in COMPONENTS}


def assert_sums_to_wall(span, tol=1e-3):
    wall = span.attributes[semconv.BUDGET_WALL]
    assert abs(sum(budget(span).values()) - wall) < tol
    assert wall == pytest.approx((span.end_time - span.start_time) / 1e9, abs=1e-6)


class TestMustShow:
    """The issue's black-box case: sequential and overlapping tool blocks."""

    def test_tool_execution_is_the_covered_time(self, otel):
        with agent_latency.task("fix-tests"):
            with agent_latency.tool("pytest"):
                time.sleep(0.10)
            with agent_latency.tool("ruff"):
                time.sleep(0.20)
            barrier = threading.Barrier(2)
            ctx = trace.set_span_in_context(trace.get_current_span())

            def overlapping(name, delay):
                from opentelemetry import context
                token = context.attach(ctx)
                try:
                    barrier.wait()
                    time.sleep(delay)
                    with agent_latency.tool(name):
                        time.sleep(0.10)
                finally:
                    context.detach(token)

            threads = [threading.Thread(target=overlapping, args=("a", 0)),
                       threading.Thread(target=overlapping, args=("b", 0.05))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        span = otel.span("invoke_agent fix-tests")
        tools = [s for s in otel.spans() if s.name.startswith("execute_tool")]
        covered = _union([(s.start_time, s.end_time) for s in tools]) / 1e9
        assert span.attributes[semconv.budget_share("tool_execution")] == pytest.approx(
            covered, abs=0.005)
        # 0.45 s on a quiet machine; a loaded one may run the sleeps long or part the
        # threads' overlap, never shorten them.
        assert 0.44 <= covered <= span.attributes[semconv.BUDGET_WALL]
        assert_sums_to_wall(span)
        assert span.attributes[semconv.budget_count("tool_calls")] == 4
        assert span.attributes[semconv.budget_busy("tool_execution")] == pytest.approx(
            sum((s.end_time - s.start_time) for s in tools) / 1e9, abs=1e-6)


def _union(pairs):
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(pairs):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)


class TestTaskSpans:
    """Names, attributes and metrics of task and tool spans."""

    def test_semantic_convention_names(self, otel):
        with agent_latency.task("t"):
            with agent_latency.tool("grep", call_id="call_1", tool_type="extension"):
                pass
        task_span = otel.span("invoke_agent t")
        tool_span = otel.span("execute_tool grep")
        assert task_span.attributes[semconv.GEN_AI_OPERATION_NAME] == "invoke_agent"
        assert task_span.attributes[semconv.GEN_AI_AGENT_NAME] == "t"
        assert tool_span.attributes[semconv.GEN_AI_TOOL_NAME] == "grep"
        assert tool_span.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "call_1"
        assert tool_span.attributes[semconv.GEN_AI_TOOL_TYPE] == "extension"
        assert tool_span.parent.span_id == task_span.context.span_id

    def test_task_duration_histogram_per_component(self, otel):
        with agent_latency.task("m"):
            with agent_latency.tool("x"):
                time.sleep(0.01)
        points = otel.metric_points(semconv.METRIC_TASK_DURATION)
        comps = {p.attributes[semconv.COMPONENT] for p in points}
        assert comps == set(COMPONENTS)
        tool_point = next(p for p in points
                          if p.attributes[semconv.COMPONENT] == "tool_execution")
        assert tool_point.sum == pytest.approx(otel.seconds("execute_tool x"), abs=1e-6)
        assert tool_point.sum >= 0.01
        assert list(tool_point.explicit_bounds) == list(semconv.TASK_DURATION_BUCKETS)

    def test_exception_propagates_and_budget_is_kept(self, otel):
        with pytest.raises(KeyError):
            with agent_latency.task("boom"):
                with agent_latency.tool("x"):
                    raise KeyError("k")
        span = otel.span("invoke_agent boom")
        assert span.status.status_code.name == "ERROR"
        assert span.attributes[semconv.ERROR_TYPE] == "KeyError"
        assert_sums_to_wall(span)
        assert otel.span("execute_tool x").status.status_code.name == "ERROR"

    def test_spans_outside_tasks_are_not_retained(self, otel):
        tracer = trace.get_tracer("t")
        for _ in range(100):
            with tracer.start_as_current_span("free"):
                pass
        assert otel.processor._owner == {} and otel.processor._tasks == {}

    def test_nothing_is_held_after_tasks_end(self, otel):
        for i in range(50):
            with agent_latency.task(f"t{i}"):
                with agent_latency.tool("x"):
                    pass
        assert otel.processor._owner == {} and otel.processor._tasks == {}


class TestNesting:
    """Nested tasks: own budget, and counted inside the outer one."""

    def test_inner_task_counts_inside_outer(self, otel):
        with agent_latency.task("outer"):
            with agent_latency.tool("a"):
                time.sleep(0.02)
            with agent_latency.task("inner"):
                with agent_latency.tool("b"):
                    time.sleep(0.03)
        outer, inner = otel.span("invoke_agent outer"), otel.span("invoke_agent inner")
        assert inner.attributes[semconv.budget_count("tool_calls")] == 1
        assert outer.attributes[semconv.budget_count("tool_calls")] == 2
        assert outer.attributes[semconv.budget_count("subtasks")] == 1
        # The tools' spans, however long a loaded machine made their sleeps.
        a, b = otel.seconds("execute_tool a"), otel.seconds("execute_tool b")
        assert a >= 0.02 and b >= 0.03
        assert inner.attributes[semconv.budget_share("tool_execution")] == pytest.approx(
            b, abs=1e-6)
        assert outer.attributes[semconv.budget_share("tool_execution")] == pytest.approx(
            a + b, abs=1e-6)
        assert_sums_to_wall(outer)
        assert_sums_to_wall(inner)


class TestDecorators:
    """task() and tool() as decorators, sync and async, concurrent."""

    def test_sync_decorators(self, otel):
        @agent_latency.tool("step")
        def step(x):
            return x * 2

        @agent_latency.task("deco")
        def run():
            return step(1) + step(2)

        assert run() == 6
        span = otel.span("invoke_agent deco")
        assert span.attributes[semconv.budget_count("tool_calls")] == 2

    async def test_async_decorators_and_gather(self, otel):
        @agent_latency.tool("fetch")
        async def fetch(delay):
            await asyncio.sleep(delay)
            return delay

        @agent_latency.task("async-deco")
        async def run():
            return await asyncio.gather(fetch(0.05), fetch(0.05), fetch(0.05))

        assert await run() == [0.05] * 3
        span = otel.span("invoke_agent async-deco")
        assert span.attributes[semconv.budget_count("tool_calls")] == 3
        # Measured against the tool spans themselves: on a busy machine the three sleeps
        # overlap less than they would on a quiet one, and that is what the budget shows.
        tools = sorted((s.start_time, s.end_time) for s in otel.spans()
                       if s.name == "execute_tool fetch")
        union, reach = 0, tools[0][0]
        for start, end in tools:
            union += max(0, end - max(start, reach))
            reach = max(reach, end)
        busy = sum(end - start for start, end in tools)
        assert span.attributes[semconv.budget_share("tool_execution")] == pytest.approx(
            union / 1e9, abs=1e-6)
        assert span.attributes[semconv.budget_busy("tool_execution")] == pytest.approx(
            busy / 1e9, abs=1e-6)

    async def test_async_context_managers(self, otel):
        async with agent_latency.task("acm"):
            async with agent_latency.tool("x"):
                await asyncio.sleep(0.01)
        assert_sums_to_wall(otel.span("invoke_agent acm"))

    def test_generator_decorator_keeps_span_open_while_iterating(self, otel):
        @agent_latency.tool("gen")
        def gen():
            yield 1
            time.sleep(0.02)
            yield 2

        with agent_latency.task("g"):
            assert list(gen()) == [1, 2]
        assert otel.span("execute_tool gen").end_time - otel.span(
            "execute_tool gen").start_time >= 0.02e9


class TestBadInput:
    """Misuse gets a clear message and never an exception in the user's path."""

    def test_tool_outside_task_warns_once(self, otel, caplog):
        from agent_latency import _log
        _log._said.discard("tool-outside-task")
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            with agent_latency.tool("lonely"):
                pass
            with agent_latency.tool("lonely"):
                pass
        msgs = [r.message for r in caplog.records if "outside any task" in r.message]
        assert len(msgs) == 1
        assert len(otel.spans()) == 2

    def test_unknown_component_counts_as_other_with_a_warning(self, otel, caplog):
        from agent_latency import _log
        _log._said.discard("unknown-component")
        tracer = trace.get_tracer("user")
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            with agent_latency.task("u"):
                with tracer.start_as_current_span(
                        "thinking", attributes={semconv.COMPONENT: "thinking"}):
                    time.sleep(0.01)
        assert any("not a budget component" in r.message for r in caplog.records)
        assert_sums_to_wall(otel.span("invoke_agent u"))

    def test_task_ended_twice(self, otel, caplog):
        from agent_latency import _hooks, _log
        _log._said.discard("task-ended-twice")
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            with agent_latency.task("twice") as span:
                pass
            for finisher in _hooks.finishers:  # a second end reaches no open task: no error
                finisher(span, 0)
        assert_sums_to_wall(otel.span("invoke_agent twice"))

    def test_scope_entered_twice_is_a_clear_error(self, otel):
        scope = agent_latency.task("once")
        with scope:
            with pytest.raises(RuntimeError, match="already open"):
                scope.__enter__()

    def test_backwards_clock_in_a_span(self, otel, caplog):
        tracer = trace.get_tracer("user")
        with agent_latency.task("clock"):
            span = tracer.start_span("weird", attributes={semconv.COMPONENT: "tool_execution"},
                                     start_time=time.time_ns() + 10**9)
            span.end(end_time=time.time_ns())
        task_span = otel.span("invoke_agent clock")
        assert_sums_to_wall(task_span)
        assert task_span.attributes[semconv.budget_share("tool_execution")] == 0

    def test_bad_names_are_type_errors_at_definition(self):
        with pytest.raises(TypeError):
            agent_latency.task("")
        with pytest.raises(TypeError):
            agent_latency.tool(None)  # type: ignore[arg-type]

    def test_open_task_cap_evicts_oldest_with_a_warning(self, otel, caplog):
        from agent_latency import BudgetSpanProcessor, _log
        _log._said.discard("evict")
        small = BudgetSpanProcessor(max_open_tasks=3)
        otel.provider.add_span_processor(small)
        tracer = trace.get_tracer("user")
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            spans = [tracer.start_span(f"t{i}", attributes={semconv.TASK_NAME: f"t{i}"})
                     for i in range(5)]
        assert len(small._tasks) == 3
        assert any("dropping open task" in r.message for r in caplog.records)
        for s in spans:
            s.end()
        assert small._tasks == {} and small._owner == {}
        small.shutdown()


    def test_process_task_is_never_evicted(self, otel):
        from agent_latency import BudgetSpanProcessor
        small = BudgetSpanProcessor(max_open_tasks=2, max_task_age=0.0)
        otel.provider.add_span_processor(small)
        tracer = trace.get_tracer("user")
        process = tracer.start_span("p", attributes={semconv.TASK_NAME: "p",
                                                     semconv.PROCESS_TASK: True})
        spans = [tracer.start_span(f"t{i}", attributes={semconv.TASK_NAME: f"t{i}"})
                 for i in range(3)]
        assert [t.name for t in small._tasks.values()] == ["p", "t2"]
        for s in [*spans, process]:
            s.end()
        small.shutdown()


class TestNestedTools:
    """A tool run by a tool is tool time but not another tool call."""

    def test_process_under_a_function_tool_is_one_call(self, otel):
        with agent_latency.task("n"):
            with agent_latency.tool("run_shell"):
                with trace.get_tracer("x").start_as_current_span("helper"):
                    with agent_latency.tool("pytest"):
                        time.sleep(0.01)
            with agent_latency.tool("grep"):
                pass
        span = otel.span("invoke_agent n")
        assert span.attributes[semconv.budget_count("tool_calls")] == 2
        assert otel.processor._in_tool == {}


class TestFrameworkToolSpans:
    """Any instrumentation's GenAI tool span (``gen_ai.operation.name = execute_tool``) is
    tool time and one tool call, counted once with ours inside or around it."""

    def _framework_tool(self, name: str, *, attributes_at_end: bool = False):
        """A tool span as google-adk (conventions' attributes set as it ends) or AutoGen and
        Strands (set as it starts) make it, on a tracer of their own."""
        attributes = {semconv.GEN_AI_OPERATION_NAME: "execute_tool",
                      semconv.GEN_AI_TOOL_NAME: name, semconv.GEN_AI_TOOL_TYPE: "function",
                      semconv.GEN_AI_TOOL_CALL_ID: "call_1"}
        tracer = trace.get_tracer("some.framework")
        if not attributes_at_end:
            return tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes)

        class _LateAttributes:
            def __enter__(self):
                self._cm = tracer.start_as_current_span(f"execute_tool {name}")
                self.span = self._cm.__enter__()
                return self.span

            def __exit__(self, *exc):
                self.span.set_attributes(attributes)
                return self._cm.__exit__(*exc)

        return _LateAttributes()

    @pytest.mark.parametrize("attributes_at_end", [False, True], ids=["start", "end"])
    def test_a_framework_tool_is_tool_time(self, otel, attributes_at_end):
        with agent_latency.task("t"):
            with self._framework_tool("lookup", attributes_at_end=attributes_at_end):
                time.sleep(0.05)
            time.sleep(0.02)
        span = otel.span("invoke_agent t")
        a = span.attributes
        assert a[semconv.budget_count("tool_calls")] == 1
        tool = otel.span("execute_tool lookup")
        assert a[semconv.budget_share(semconv.TOOL_EXECUTION)] == pytest.approx(
            (tool.end_time - tool.start_time) / 1e9, abs=1e-6)
        assert_sums_to_wall(span)
        points = otel.metric_points(semconv.METRIC_TOOL_DURATION)
        assert [p.attributes.get(semconv.GEN_AI_TOOL_NAME) for p in points] == ["lookup"]

    @pytest.mark.parametrize("attributes_at_end", [False, True], ids=["start", "end"])
    def test_ours_inside_a_frameworks_is_one_call(self, otel, attributes_at_end):
        with agent_latency.task("t"):
            with self._framework_tool("run_shell", attributes_at_end=attributes_at_end):
                with agent_latency.tool("pytest"):
                    time.sleep(0.01)
        span = otel.span("invoke_agent t")
        assert span.attributes[semconv.budget_count("tool_calls")] == 1
        assert otel.processor._in_tool == {}

    def test_a_frameworks_inside_ours_is_one_call(self, otel):
        with agent_latency.task("t"):
            with agent_latency.tool("lookup"), self._framework_tool("lookup"):
                time.sleep(0.01)
        span = otel.span("invoke_agent t")
        assert span.attributes[semconv.budget_count("tool_calls")] == 1

    def test_other_genai_operations_do_not_count(self, otel):
        with agent_latency.task("t"):
            with trace.get_tracer("f").start_as_current_span(
                    "invoke_agent helper", attributes={
                        semconv.GEN_AI_OPERATION_NAME: "invoke_agent"}):
                time.sleep(0.01)
        a = otel.span("invoke_agent t").attributes
        assert a[semconv.budget_count("tool_calls")] == 0
        assert a[semconv.budget_share(semconv.TOOL_EXECUTION)] == 0
