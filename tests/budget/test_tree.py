"""The task tree (codec): one assembly of tasks for the processor and the report."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_latency import semconv
from agent_latency.budget import COMPONENTS, COUNT_NAMES
from agent_latency.codec import TaskNode, assemble, is_tool
from agent_latency.report._read import StoredSpan as Span  # the record assemble() reads


def _llm(**phases: float) -> dict[str, Any]:
    attrs: dict[str, Any] = {attr: 0.0 for attr, _, _ in semconv.LLM_PHASES}
    attrs.update({f"agent_latency.llm.{k}": v for k, v in phases.items()})
    attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] = 100
    attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = 10
    return attrs


KINDS = ("task", "tool", "framework_tool", "llm", "plain", "network")
# A tool span of another instrumentation (google-adk, AutoGen, Strands): the GenAI
# conventions' attributes and none of ours.
FRAMEWORK_TOOL = {semconv.GEN_AI_OPERATION_NAME: "execute_tool", semconv.GEN_AI_TOOL_NAME: "f"}


@st.composite
def traces(draw: Any) -> list[Span]:
    """A random trace: a root task and up to 25 spans nested under earlier ones."""
    spans = [Span("t", "1", "", "root", 0, draw(st.integers(1, 10**9)),
                  {semconv.TASK_NAME: "root"})]
    for i in range(draw(st.integers(0, 25))):
        parent = draw(st.sampled_from(spans))
        start = draw(st.integers(parent.start_ns, parent.end_ns))
        end = draw(st.integers(start, parent.end_ns + 10**6))  # may outlive its parent
        kind = draw(st.sampled_from(KINDS))
        attrs: dict[str, Any] = {}
        if kind == "task":
            attrs[semconv.TASK_NAME] = f"task{i}"
        elif kind == "tool":
            attrs = {semconv.COMPONENT: semconv.TOOL_EXECUTION, semconv.GEN_AI_TOOL_NAME: "t"}
        elif kind == "framework_tool":
            attrs = dict(FRAMEWORK_TOOL)
        elif kind == "llm":
            d = (end - start) / 1e9
            attrs = _llm(client=d * 0.1, rtt=d * 0.2, prefill=d * 0.3, output_generation=d * 0.4)
        elif kind == "network":
            attrs = {semconv.COMPONENT: semconv.NETWORK_OVERHEAD}
        spans.append(Span("t", f"{i + 2:x}", parent.span_id, kind, start, end, attrs))
    return spans


def _check(task: TaskNode) -> None:
    budget = task.budget
    assert budget is not None
    assert all(v >= 0 for v in budget.shares.values())
    assert all(v >= 0 for v in budget.busy.values())
    assert set(budget.shares) == set(COMPONENTS)
    assert sum(budget.shares.values()) == pytest.approx(budget.wall, rel=1e-12, abs=1e-12)
    assert set(budget.counts) == set(COUNT_NAMES)
    assert all(v >= 0 for v in budget.counts.values())


class TestTreeInvariants:
    """Any tree of spans: components non-negative and adding up to the wall time."""

    @settings(max_examples=200)
    @given(traces())
    def test_components_are_non_negative_and_sum_to_wall(self, spans: list[Span]) -> None:
        tasks, problems = assemble(spans)
        assert problems == []
        assert tasks and tasks[0].name == "root"
        for task in tasks:
            _check(task)

    @settings(max_examples=200)
    @given(traces())
    def test_nested_tasks_count_in_the_tasks_around_them(self, spans: list[Span]) -> None:
        tasks, _ = assemble(spans)
        for task in tasks:
            if task.parent is not None:
                for name in ("llm_calls", "tool_calls", "output_tokens"):
                    assert task.parent.counts[name] >= task.counts[name]
                assert task.parent.counts["subtasks"] > task.counts["subtasks"]
        root = tasks[0]
        assert root.counts["subtasks"] == len(tasks) - 1

    @settings(max_examples=100)
    @given(traces())
    def test_span_by_span_gives_the_same_budgets(self, spans: list[Span]) -> None:
        """Fed as the processor feeds it (spans as they end, nested tasks absorbed as they
        end), the tree gives the budgets assembled all at once."""
        tasks, _ = assemble(spans)
        by_key = {(s.trace_id, s.span_id): s for s in spans}
        nodes: dict[str, TaskNode] = {}

        def owner(span: Span) -> tuple[TaskNode | None, Span]:
            top, parent = span, by_key.get(("t", span.parent_id))
            while parent is not None:
                if parent.span_id in nodes:
                    return nodes[parent.span_id], top
                if is_tool(parent.attributes):
                    top = parent
                parent = by_key.get(("t", parent.parent_id))
            return None, top

        for span in spans:  # opened in order: parents first
            if semconv.TASK_NAME in span.attributes:
                nodes[span.span_id] = TaskNode(span.span_id, span.attributes[
                    semconv.TASK_NAME], span.start_ns, owner(span)[0])
        for span in sorted(spans, key=lambda s: -len(_chain(s, by_key))):  # innermost first
            if span.span_id in nodes:
                node = nodes[span.span_id]
                node.finish(span.end_ns)
                if node.parent is not None:
                    node.parent.absorb(node)
                continue
            task, top = owner(span)
            if task is not None and span.attributes:
                task.add_span(span.attributes, span.start_ns, span.end_ns, int(top.span_id, 16),
                              nested_tool=top is not span)
        for task in tasks:
            live = nodes[task.span.span_id].budget
            assert live is not None and task.budget is not None
            assert live.counts == task.budget.counts
            for c in COMPONENTS:
                assert live.shares[c] == pytest.approx(task.budget.shares[c], abs=1e-9)


def _chain(span: Span, by_key: dict[tuple[str, str], Span]) -> list[Span]:
    out, parent = [], by_key.get(("t", span.parent_id))
    while parent is not None:
        out.append(parent)
        parent = by_key.get(("t", parent.parent_id))
    return out


class TestTreeCases:
    """Named cases: nested tools, unknown components, idle process tasks."""

    def test_a_tool_run_by_a_tool_is_tool_time_not_another_call(self) -> None:
        tool = {semconv.COMPONENT: semconv.TOOL_EXECUTION}
        spans = [Span("t", "1", "", "task", 0, 100, {semconv.TASK_NAME: "x"}),
                 Span("t", "2", "1", "shell", 10, 60, tool),
                 Span("t", "3", "2", "pytest", 20, 50, tool)]
        (task,), _ = assemble(spans)
        assert task.counts["tool_calls"] == 1
        assert {iv.call for iv in task.intervals} == {2}

    def test_the_outermost_of_our_tool_and_a_frameworks_counts(self) -> None:
        """Either way round, a framework's tool span and ours around the same run (or a
        process it starts) are one tool call of tool time."""
        ours = {semconv.COMPONENT: semconv.TOOL_EXECUTION, semconv.TOOL_SOURCE: "pydantic_ai"}
        for outer, inner in ((FRAMEWORK_TOOL, ours), (ours, FRAMEWORK_TOOL)):
            spans = [Span("t", "1", "", "task", 0, 100, {semconv.TASK_NAME: "x"}),
                     Span("t", "2", "1", "outer", 10, 60, outer),
                     Span("t", "3", "2", "inner", 11, 59, inner)]
            (task,), _ = assemble(spans)
            assert task.counts["tool_calls"] == 1
            assert task.budget is not None
            assert task.budget.shares["tool_execution"] == pytest.approx(50e-9)
            assert {iv.call for iv in task.intervals} == {2}

    def test_a_framework_tool_span_is_a_named_tool_call(self) -> None:
        spans = [Span("t", "1", "", "task", 0, 100, {semconv.TASK_NAME: "x"}),
                 Span("t", "2", "1", "execute_tool lookup", 10, 30,
                      {**FRAMEWORK_TOOL, semconv.GEN_AI_TOOL_NAME: "lookup"}),
                 Span("t", "3", "1", "execute_tool lookup", 40, 60, FRAMEWORK_TOOL)]
        (task,), _ = assemble(spans)
        assert task.counts["tool_calls"] == 2
        assert task.budget is not None
        assert task.budget.shares["tool_execution"] == pytest.approx(40e-9)
        assert [iv.name for iv in task.intervals] == ["lookup", "f"]

    def test_spans_that_only_look_like_tools_are_not_counted(self) -> None:
        """Our own span that counts through its children (an MCP call split into transport
        and server time), google-adk's record of merged parallel calls, another operation."""
        mcp = {**FRAMEWORK_TOOL, semconv.TOOL_SOURCE: "mcp"}
        merged = {**FRAMEWORK_TOOL, semconv.GEN_AI_TOOL_NAME: "(merged tools)"}
        chat = {semconv.GEN_AI_OPERATION_NAME: "chat"}
        spans = [Span("t", "1", "", "task", 0, 100, {semconv.TASK_NAME: "x"}),
                 Span("t", "2", "1", "execute_tool search", 10, 60, mcp),
                 Span("t", "3", "2", "mcp transport", 10, 20,
                      {semconv.COMPONENT: "network"}),
                 Span("t", "4", "2", "mcp server", 20, 60,
                      {semconv.COMPONENT: semconv.TOOL_EXECUTION}),
                 Span("t", "5", "1", "execute_tool (merged)", 60, 61, merged),
                 Span("t", "6", "1", "chat", 70, 80, chat)]
        (task,), _ = assemble(spans)
        assert task.counts["tool_calls"] == 1
        assert task.budget is not None
        assert task.budget.shares["tool_execution"] == pytest.approx(40e-9)
        assert task.budget.shares["network_overhead"] == pytest.approx(10e-9)

    def test_a_connection_setup_counts_one_tls_handshake(self) -> None:
        setup = {semconv.COMPONENT: semconv.NETWORK_OVERHEAD, semconv.NET_UPGRADE: 0.001,
                 semconv.LLM_CONNECT: 0.001, semconv.LLM_TLS: 0.002}
        spans = [Span("t", "1", "", "task", 0, 10**7, {semconv.TASK_NAME: "x"}),
                 Span("t", "2", "1", "connect", 0, 5 * 10**6, setup)]
        (task,), _ = assemble(spans)
        assert task.counts["new_connections"] == 1
        assert task.counts["tls_handshakes"] == 1

    def test_unknown_component_is_other_and_a_problem(self) -> None:
        spans = [Span("t", "1", "", "task", 0, 100, {semconv.TASK_NAME: "x"}),
                 Span("t", "2", "1", "odd", 0, 100, {semconv.COMPONENT: "magic"})]
        (task,), problems = assemble(spans)
        assert task.budget is not None and task.budget.shares["other"] == pytest.approx(100e-9)
        assert "magic" in problems[0]

    def test_an_idle_process_task_is_left_out(self) -> None:
        spans = [Span("t", "1", "", "process", 0, 100,
                      {semconv.TASK_NAME: "p", semconv.PROCESS_TASK: True}),
                 Span("t", "2", "1", "task", 10, 50, {semconv.TASK_NAME: "x"})]
        tasks, _ = assemble(spans)
        assert [t.name for t in tasks] == ["x"]

    def test_intervals_can_be_dropped_after_the_budget(self) -> None:
        spans = [Span("t", "1", "", "task", 0, 100, {semconv.TASK_NAME: "x"}),
                 Span("t", "2", "1", "tool", 0, 50, {semconv.COMPONENT: "tool_execution"})]
        (task,), _ = assemble(spans, keep_intervals=False)
        assert task.intervals == [] and task.budget is not None
        assert task.budget.shares["tool_execution"] == pytest.approx(50e-9)

    def test_semconv_reexports_the_engines_names(self) -> None:
        assert semconv.COMPONENTS is COMPONENTS and semconv.COUNT_NAMES is COUNT_NAMES
