"""Busy time of tools: a tool run by a tool is not counted twice; parallel tools add up."""

from __future__ import annotations

import pytest

from agent_latency import semconv
from agent_latency.budget import Interval, split
from agent_latency.budget._split import RunningSplit
from agent_latency.report._read import StoredSpan
from agent_latency.report._tasks import find_tasks

MS = 1_000_000
OUTER = 7  # the outermost tool's id: what nested tools' intervals carry as ``call``


def _tools() -> list[Interval]:
    return [
        Interval(100 * MS, 600 * MS, "tool", OUTER, 0, "run_shell"),
        Interval(120 * MS, 580 * MS, "tool", OUTER, 0, "pytest"),  # the process it ran
        Interval(150 * MS, 200 * MS, "tool", OUTER, 0, "git"),  # and another inside
        Interval(300 * MS, 400 * MS, "tool", 9, 0, "grep"),  # a separate call, in parallel
    ]


class TestNestedToolsBusyOnce:
    """Busy of tool execution: each outermost tool's union, summed over parallel calls."""

    def test_split(self):
        budget = split(_tools(), 0, 1_000 * MS)
        assert budget.busy["tool_execution"] == pytest.approx(0.5 + 0.1)
        assert budget.shares["tool_execution"] == pytest.approx(0.5)  # overlap shared, once

    @pytest.mark.parametrize("fold_at", [0, 50 * MS, 100 * MS])
    def test_running_split_folded_before_the_outer_tool(self, fold_at):
        running = RunningSplit(0)
        ivs = sorted(_tools(), key=lambda iv: iv.start)
        # Nested tools end first and arrive first; the fold never passes an open span's
        # start, so it stops before the outer tool's while that is open.
        running.add([iv for iv in ivs if iv.end <= 600 * MS])
        running.fold(fold_at)
        budget = running.finish(1_000 * MS)
        assert budget.busy["tool_execution"] == pytest.approx(0.6)

    def test_late_nested_tool(self):
        """Intervals that arrive after their time was folded are still a union."""
        running = RunningSplit(0)
        running.fold(900 * MS)
        running.add(_tools())
        assert running.finish(1_000 * MS).busy["tool_execution"] == pytest.approx(0.6)

    def test_stored_trace(self):
        """The report's task tree: a process span under a function tool's span."""
        trace = "ab" * 16

        def span(sid: str, parent: str, name: str, start: int, end: int, attrs: dict):
            return StoredSpan(trace, sid, parent, name, start * MS, end * MS, attrs)

        spans = [
            span("01", "", "invoke_agent t", 0, 1_000, {semconv.TASK_NAME: "t"}),
            span("02", "01", "execute_tool run_shell", 100, 600,
                 {semconv.COMPONENT: semconv.TOOL_EXECUTION,
                  semconv.GEN_AI_TOOL_NAME: "run_shell"}),
            span("03", "02", "execute_tool pytest", 120, 580,
                 {semconv.COMPONENT: semconv.TOOL_EXECUTION,
                  semconv.GEN_AI_TOOL_NAME: "pytest"}),
        ]
        (task,), _ = find_tasks(spans)
        assert task.budget.busy["tool_execution"] == pytest.approx(0.5)  # was 0.96
        assert task.budget.shares["tool_execution"] == pytest.approx(0.5)
        assert task.budget.counts["tool_calls"] == 1
