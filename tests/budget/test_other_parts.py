"""The parts of other: gc, imports, lag, cpu and idle, in that priority, adding up to other."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_latency.budget import COMPONENTS, OTHER_PARTS, Interval, RunningSplit, other_parts, split

MS = 1_000_000
PHASES = ["tool", "prefill", "output_generation", "rtt", "client", "client_tail", "tail",
          "other"]
OVERLAYS = ["gc", "imports"]

intervals_st = st.lists(
    st.tuples(st.integers(-50 * MS, 1_050 * MS), st.integers(0, 400 * MS),
              st.sampled_from(PHASES + OVERLAYS))
    .map(lambda t: Interval(t[0], t[0] + t[1], t[2])),
    max_size=40,
)
# Cumulative CPU time at moments of the task: any times, CPU never decreasing.
samples_st = st.lists(st.tuples(st.integers(-20 * MS, 1_020 * MS), st.integers(0, 300 * MS)),
                      max_size=30).map(
    lambda pairs: list(zip(sorted(t for t, _ in pairs),
                           _cumulative(d for _, d in pairs), strict=True)))


def _cumulative(deltas):
    total, out = 0, []
    for d in deltas:
        total += d
        out.append(total)
    return out


class TestInvariants:
    """Over random intervals, overlays and CPU samples."""

    @settings(max_examples=400)
    @given(intervals_st, samples_st)
    def test_parts_non_negative_and_add_up_to_other_exactly(self, ivs, samples):
        budget = split(ivs, 0, 1_000 * MS, cpu=samples)
        parts = budget.other_parts
        assert tuple(parts) == OTHER_PARTS
        assert all(v >= 0 for v in parts.values())
        assert sum(parts.values()) == budget.shares["other"]
        assert budget.other_measured

    @settings(max_examples=200)
    @given(intervals_st, samples_st)
    def test_overlays_leave_the_components_alone(self, ivs, samples):
        """A pause or an import names other time; it takes none from a component."""
        without = split([iv for iv in ivs if iv.phase not in OVERLAYS], 0, 1_000 * MS)
        with_ = split(ivs, 0, 1_000 * MS, cpu=samples)
        for c in COMPONENTS:
            assert with_.shares[c] == pytest.approx(without.shares[c], abs=1e-9)
            assert with_.busy[c] == pytest.approx(without.busy[c], abs=1e-9)

    @settings(max_examples=200)
    @given(intervals_st, samples_st, st.randoms())
    def test_independent_of_input_order(self, ivs, samples, rnd):
        shuffled, mixed = list(ivs), list(samples)
        rnd.shuffle(shuffled)
        rnd.shuffle(mixed)
        a = split(ivs, 0, 1_000 * MS, cpu=samples)
        b = split(shuffled, 0, 1_000 * MS, cpu=mixed)
        for part in OTHER_PARTS:
            assert a.other_parts[part] == pytest.approx(b.other_parts[part], abs=1e-9)

    @settings(max_examples=200)
    @given(intervals_st, samples_st)
    def test_cpu_never_exceeds_the_cpu_time_sampled(self, ivs, samples):
        budget = split(ivs, 0, 1_000 * MS, cpu=samples)
        inside = [c for t, c in samples]
        sampled = (inside[-1] - inside[0]) * 1e-9 if inside else 0.0
        assert budget.other_parts["cpu"] <= sampled + 1e-9

    @settings(max_examples=300)
    @given(st.floats(0, 1e4), st.dictionaries(st.sampled_from(OTHER_PARTS[:-1]),
                                              st.floats(-1e4, 1e4, allow_nan=False)))
    def test_other_parts_of_any_claims_add_up_exactly(self, other, claims):
        parts = other_parts(other, claims)
        assert tuple(parts) == OTHER_PARTS
        assert all(v >= 0 for v in parts.values())
        assert sum(parts.values()) == other


class TestRunning:
    """Folded as a long task folds, the parts are the full sweep's."""

    @settings(max_examples=300)
    @given(intervals_st, samples_st, st.integers(1, 7))
    def test_folded_parts_equal_the_full_sweep(self, ivs, samples, every):
        running = RunningSplit(0)
        ordered = sorted(ivs, key=lambda iv: iv.start)
        times = sorted(samples)
        for i, iv in enumerate(ordered):
            running.add([iv])
            if (i + 1) % every == 0 and i + 1 < len(ordered):
                # Samples come in real time: a fold (to a time well past) has them all.
                until = min(ordered[i + 1].start, 1_000 * MS)  # a fold never passes "now"
                running.sample([s for s in times if s[0] < until])
                times = [s for s in times if s[0] >= until]
                running.fold(until)
        running.sample(times)
        folded = running.finish(1_000 * MS)
        full = split(ivs, 0, 1_000 * MS, cpu=samples)
        for part in OTHER_PARTS:
            assert folded.other_parts[part] == pytest.approx(full.other_parts[part], abs=1e-6)
        assert sum(folded.other_parts.values()) == folded.shares["other"]


class TestCases:
    """Hand-checked parts."""

    def test_a_pause_under_a_component_is_not_on_the_path(self):
        budget = split([Interval(0, 400 * MS, "tool"), Interval(300 * MS, 500 * MS, "gc")],
                       0, 1_000 * MS)
        assert budget.shares["tool_execution"] == pytest.approx(0.4)
        assert budget.other_parts["gc"] == pytest.approx(0.1)
        assert budget.other_parts["idle"] == pytest.approx(0.5)

    def test_lag_is_the_client_tail_share_of_other(self):
        budget = split([Interval(0, 200 * MS, "client_tail"),
                        Interval(100 * MS, 300 * MS, "output_generation")], 0, 400 * MS)
        # 0-100 ms the tail alone, 100-200 ms shared with output generation.
        assert budget.other_parts["lag"] == pytest.approx(0.15)
        assert budget.other_parts["idle"] == pytest.approx(0.1)
        assert budget.busy["other"] == pytest.approx(0.2)

    def test_priority_gc_then_imports_then_lag(self):
        budget = split([Interval(0, 300 * MS, "client_tail"),
                        Interval(0, 200 * MS, "imports"), Interval(100 * MS, 150 * MS, "gc")],
                       0, 300 * MS)
        assert budget.other_parts["gc"] == pytest.approx(0.05)
        assert budget.other_parts["imports"] == pytest.approx(0.15)
        assert budget.other_parts["lag"] == pytest.approx(0.1)
        assert budget.other_parts["idle"] == pytest.approx(0.0, abs=1e-12)

    def test_cpu_of_a_stretch_goes_to_its_unclaimed_other_time_at_most(self):
        samples = [(0, 0), (500 * MS, 300 * MS), (1_000 * MS, 300 * MS)]
        budget = split([Interval(0, 400 * MS, "tool")], 0, 1_000 * MS, cpu=samples)
        # First stretch: 300 ms of CPU, 100 ms of other time; second: no CPU.
        assert budget.other_parts["cpu"] == pytest.approx(0.1)
        assert budget.other_parts["idle"] == pytest.approx(0.5)

    def test_an_overlay_with_samples_at_its_edges_keeps_its_own_cpu(self):
        samples = [(0, 0), (100 * MS, 50 * MS), (300 * MS, 250 * MS), (400 * MS, 260 * MS)]
        budget = split([Interval(100 * MS, 300 * MS, "gc")], 0, 400 * MS, cpu=samples)
        assert budget.other_parts["gc"] == pytest.approx(0.2)
        assert budget.other_parts["cpu"] == pytest.approx(0.06)
        assert budget.other_parts["idle"] == pytest.approx(0.14)

    def test_samples_outside_the_task_count_at_its_edges(self):
        budget = split([], 0, 100 * MS, cpu=[(-5 * MS, 0), (105 * MS, 40 * MS)])
        assert budget.other_parts["cpu"] == pytest.approx(0.04)

    def test_without_samples_the_parts_are_not_measured(self):
        budget = split([Interval(0, 100 * MS, "client_tail")], 0, 200 * MS)
        assert not budget.other_measured
        assert budget.other_parts == {"gc": 0.0, "imports": 0.0, "lag": pytest.approx(0.1),
                                      "cpu": 0.0, "idle": pytest.approx(0.1)}

    def test_summary_line_names_the_parts_when_other_is_large(self):
        samples = [(0, 0), (1_000 * MS, 200 * MS)]
        budget = split([Interval(0, 300 * MS, "gc")], 0, 1_000 * MS, cpu=samples)
        assert budget.summary("t").endswith(
            "other 1.00 (gc 0.30, imports 0.00, lag 0.00, cpu 0.20, idle 0.50)")
        small = split([Interval(0, 900 * MS, "tool")], 0, 1_000 * MS, cpu=samples)
        assert small.summary("t").endswith("other 0.10")
