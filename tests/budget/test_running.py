"""The running split: a task's budget kept as intervals arrive, folded into totals, equal to
the full sweep over every interval."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_latency.budget import Interval, RunningSplit, connection_setup_saving, split

MS = 1_000_000
PHASES = ["tool", "prefill", "output_generation", "rtt", "client", "dns", "connect", "tls",
          "tail", "upgrade"]

spans_st = st.lists(
    st.tuples(st.integers(-50 * MS, 1_050 * MS), st.integers(0, 400 * MS),
              st.sampled_from(PHASES), st.integers(1, 6)),
    max_size=60,
)


def _intervals(raw: list[tuple[int, int, str, int]]) -> list[Interval]:
    return [Interval(s, s + d, phase, call) for s, d, phase, call in raw]


def _same(a, b) -> None:
    assert a.wall == b.wall
    for component in a.shares:
        assert a.shares[component] == pytest.approx(b.shares[component], abs=1e-6)
        assert a.busy[component] == pytest.approx(b.busy[component], abs=1e-9)


def _arrive_and_fold(ivs: list[Interval], running: RunningSplit, every: int) -> None:
    """Intervals arrive in start order, as spans end; after every ``every`` arrivals the
    time before the next start is final and folded."""
    ordered = sorted(ivs, key=lambda iv: iv.start)
    for i, iv in enumerate(ordered):
        running.add([iv])
        if (i + 1) % every == 0 and i + 1 < len(ordered):
            running.fold(ordered[i + 1].start)


class TestEqualsTheFullSweep:
    """Folded as it goes, the budget is the full sweep's, to 1 µs."""

    @settings(max_examples=300)
    @given(spans_st, st.integers(1, 7), st.integers(1_050 * MS, 1_500 * MS))
    def test_same_budget_and_setup_saving(self, raw, every, end):
        ivs = _intervals(raw)
        running = RunningSplit(0)
        _arrive_and_fold(ivs, running, every)
        _same(running.finish(end), split(ivs, 0, end))
        assert running.connection_setup_saving == pytest.approx(
            connection_setup_saving(sorted(ivs, key=lambda iv: iv.start)), abs=1e-9)

    @settings(max_examples=200)
    @given(spans_st)
    def test_folding_everywhere_or_nowhere_is_the_same(self, raw):
        ivs = _intervals(raw)
        never = RunningSplit(0)
        never.add(ivs)
        always = RunningSplit(0)
        _arrive_and_fold(ivs, always, 1)
        _same(never.finish(1_500 * MS), always.finish(1_500 * MS))

    def test_memory_stays_bounded_over_a_long_task(self):
        """100,000 sequential calls, folded as they end: a handful of intervals kept."""
        running = RunningSplit(0)
        t = 0
        for call in range(100_000):
            running.add([Interval(t, t + 3, "prefill", call),
                         Interval(t + 3, t + 9, "output_generation", call),
                         Interval(t + 5, t + 12, "tool", call)])
            running.fold(t + 9)
            assert len(running.pending) <= 3
            t += 20
        budget = running.finish(t)
        assert budget.shares["other"] == pytest.approx(100_000 * 8e-9)
        assert budget.busy["tool_execution"] == pytest.approx(100_000 * 7e-9)


class TestLateIntervals:
    """An interval that arrives after its time was folded: busy exact, shares still add up."""

    @settings(max_examples=200)
    @given(spans_st, st.integers(0, 1_000 * MS))
    def test_busy_exact_and_shares_sum_to_wall(self, raw, fold_at):
        ivs = _intervals(raw)
        running = RunningSplit(0)
        running.fold(fold_at)  # before anything arrived: everything before is "late"
        running.add(ivs)
        budget = running.finish(1_000 * MS)
        full = split(ivs, 0, 1_000 * MS)
        assert budget.busy == pytest.approx(full.busy, abs=1e-9)
        assert sum(budget.shares.values()) == pytest.approx(budget.wall, abs=1e-9)
        assert all(v >= 0 for v in budget.shares.values())

    def test_late_time_is_counted(self):
        running = RunningSplit(0)
        running.fold(10 * MS)
        running.add([Interval(4 * MS, 12 * MS, "tool")])
        assert running.late_ns == 6 * MS
        assert running.finish(20 * MS).busy["tool_execution"] == pytest.approx(8e-3)


class TestEndBeforeFolded:
    """A task that ends before time already folded keeps its proportions, scaled."""

    def test_scaled_to_the_wall(self):
        running = RunningSplit(0)
        running.add([Interval(0, 50 * MS, "tool")])
        running.fold(100 * MS)
        budget = running.finish(50 * MS)
        assert budget.wall == pytest.approx(0.05)
        assert sum(budget.shares.values()) == pytest.approx(0.05)
        assert budget.shares["tool_execution"] == pytest.approx(0.025)
