"""The task split: five components, shared overlaps, exact sums."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_latency.budget import COMPONENTS, Interval, UnknownComponentError, split

MS = 1_000_000
PHASES = ["tool", "prefill", "output_generation", "rtt", "client", "dns", "tail"]

intervals_st = st.lists(
    st.tuples(
        st.integers(-50 * MS, 1_050 * MS), st.integers(0, 400 * MS), st.sampled_from(PHASES)
    ).map(lambda t: Interval(t[0], t[0] + t[1], t[2])),
    max_size=40,
)


class TestSplitInvariants:
    """Invariants over random interval sets."""

    @settings(max_examples=300)
    @given(intervals_st)
    def test_components_non_negative_and_sum_to_wall(self, ivs):
        budget = split(ivs, 0, 1_000 * MS)
        assert all(v >= 0 for v in budget.shares.values())
        assert set(budget.shares) == set(COMPONENTS)
        assert abs(sum(budget.shares.values()) - budget.wall) < 1e-6
        assert budget.wall == pytest.approx(1.0)

    @settings(max_examples=200)
    @given(intervals_st, st.randoms())
    def test_independent_of_input_order(self, ivs, rnd):
        shuffled = list(ivs)
        rnd.shuffle(shuffled)
        a, b = split(ivs, 0, 1_000 * MS), split(shuffled, 0, 1_000 * MS)
        for c in COMPONENTS:
            assert a.shares[c] == pytest.approx(b.shares[c], abs=1e-9)
            assert a.busy[c] == pytest.approx(b.busy[c], abs=1e-9)

    @settings(max_examples=200)
    @given(intervals_st)
    def test_share_never_exceeds_busy_except_other(self, ivs):
        budget = split(ivs, 0, 1_000 * MS)
        for c in COMPONENTS:
            if c != "other":
                assert budget.shares[c] <= budget.busy[c] + 1e-9


class TestSplitCases:
    """Hand-checked splits."""

    def test_sequential_and_overlapping_tools(self):
        ivs = [Interval(0, 100 * MS, "tool"), Interval(100 * MS, 300 * MS, "tool"),
               Interval(400 * MS, 500 * MS, "tool"), Interval(420 * MS, 520 * MS, "tool")]
        budget = split(ivs, 0, 600 * MS)
        assert budget.shares["tool_execution"] == pytest.approx(0.42)
        assert budget.shares["other"] == pytest.approx(0.18)
        assert budget.busy["tool_execution"] == pytest.approx(0.5)

    def test_overlap_of_two_components_is_shared_equally(self):
        ivs = [Interval(0, 100 * MS, "tool"), Interval(50 * MS, 150 * MS, "prefill")]
        budget = split(ivs, 0, 200 * MS)
        assert budget.shares["tool_execution"] == pytest.approx(0.075)
        assert budget.shares["prefill"] == pytest.approx(0.075)
        assert budget.shares["other"] == pytest.approx(0.05)

    def test_intervals_outside_the_task_are_clipped(self):
        budget = split([Interval(-10 * MS, 10 * MS, "tool"),
                        Interval(90 * MS, 200 * MS, "dns")], 0, 100 * MS)
        assert budget.shares["tool_execution"] == pytest.approx(0.01)
        assert budget.shares["network_overhead"] == pytest.approx(0.01)

    def test_backwards_task_has_zero_wall(self):
        budget = split([Interval(0, 10, "tool")], 100, 50)
        assert budget.wall == 0 and sum(budget.shares.values()) == 0

    def test_backwards_interval_is_ignored(self):
        budget = split([Interval(50 * MS, 10 * MS, "tool")], 0, 100 * MS)
        assert budget.shares["other"] == pytest.approx(0.1)

    def test_unknown_phase_is_a_clear_error(self):
        with pytest.raises(UnknownComponentError, match="unknown budget phase"):
            split([Interval(0, 10, "thinking")], 0, 100)

    def test_component_names_are_accepted_as_phases(self):
        budget = split([Interval(0, 10 * MS, "network_overhead")], 0, 10 * MS)
        assert budget.shares["network_overhead"] == pytest.approx(0.01)

    def test_summary_line(self):
        budget = split([Interval(0, 1_000 * MS, "tool")], 0, 2_000 * MS)
        assert budget.summary("fix") == (
            "task fix 2.00s = output 0.00 | prefill 0.00 | tools 1.00 | network 0.00 | other 1.00"
        )

    def test_derived_rates(self):
        budget = split([Interval(0, 500 * MS, "output_generation")], 0, MS * 1000,
                       counts={"output_tokens": 100})
        assert budget.output_tokens_per_second == pytest.approx(200)
        assert budget.prefill_tokens_per_second is None

    def test_many_intervals_are_fast_enough(self):
        rnd = random.Random(1)
        ivs = [Interval(s, s + rnd.randint(0, 10 * MS), rnd.choice(PHASES))
               for s in (rnd.randint(0, 1000 * MS) for _ in range(20_000))]
        budget = split(ivs, 0, 1_000 * MS)
        assert abs(sum(budget.shares.values()) - budget.wall) < 1e-6
