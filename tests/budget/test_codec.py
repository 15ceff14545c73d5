"""The codec: a call's phases as attributes and back, and the one tiling of its time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_latency import semconv
from agent_latency.budget import PHASE_ORDER, CallPhases, phases_to_intervals
from agent_latency.codec import (
    phase_attributes,
    phase_span_tiles,
    phase_span_tiles_of,
    phases_of,
    span_intervals,
)

seconds = st.floats(min_value=0.0, max_value=50.0, allow_nan=False)
phases_strategy = st.builds(CallPhases, **dict.fromkeys(PHASE_ORDER, seconds))


class TestPhaseAttributes:
    """Written once, read once: the attributes give back the phases in time order."""

    @given(phases_strategy)
    def test_round_trip(self, phases: CallPhases) -> None:
        """phases -> attributes -> phases loses nothing."""
        assert phases_of(phase_attributes(phases)) == phases.items()

    def test_missing_attributes_read_as_zero(self) -> None:
        """A span from an older version without some phases still reads."""
        assert dict(phases_of({semconv.LLM_PREFILL: 0.5}))["prefill"] == 0.5
        assert dict(phases_of({}))["tail"] == 0.0


class TestOneTiling:
    """The child spans are drawn from the intervals the processor computes."""

    @given(phases_strategy)
    def test_children_match_the_processor(self, phases: CallPhases) -> None:
        """Each child span covers exactly its phases' intervals, as the budget sees them."""
        start = 1_000_000_000
        end = start + round(phases.total * 1e9)
        mine = phases_to_intervals(phases.items(), start, end)
        attributes = {**phase_attributes(phases), semconv.LLM_CLIENT: phases.client}
        processor, kind = span_intervals(attributes, start, end)
        assert kind == "llm"
        assert [(i.start, i.end, i.phase) for i in processor] == [
            (i.start, i.end, i.phase) for i in mine]
        tiles = phase_span_tiles(mine)
        names = [name for name, _, _ in tiles]
        assert names == sorted(names, key=[semconv.SPAN_NETWORK, semconv.SPAN_PREFILL,
                                           semconv.SPAN_OUTPUT_GENERATION].index)
        for name, tile_start, tile_end in tiles:
            assert start <= tile_start < tile_end <= end
            covered = {semconv.SPAN_NETWORK: ("dns", "connect", "tls", "upload", "rtt"),
                       semconv.SPAN_PREFILL: ("prefill",),
                       semconv.SPAN_OUTPUT_GENERATION: ("output_generation",)}[name]
            inside = sum(i.end - i.start for i in mine if i.phase in covered)
            assert tile_end - tile_start == inside  # contiguous: no gap inside a child


class TestTilesWithoutIntervals:
    """The hot path's tiling gives the intervals' tiles, whatever the phases and bounds."""

    @given(phases_strategy, st.integers(min_value=-10**10, max_value=10**11))
    def test_same_tiles(self, phases: CallPhases, stretch: int) -> None:
        """Phases longer or shorter than the call (clamped, stretched), zero ones, ones that
        round to no nanosecond: the same children, the same bounds."""
        start = 1_000_000_000
        end = start + round(phases.total * 1e9) + stretch
        assert phase_span_tiles_of(phases.items(), start, end) == phase_span_tiles(
            phases_to_intervals(phases.items(), start, end))

    @given(st.lists(st.tuples(st.sampled_from(PHASE_ORDER),
                              st.floats(min_value=0.0, max_value=1e-8)), max_size=12))
    def test_nanosecond_phases(self, items: list[tuple[str, float]]) -> None:
        """Phases of a few nanoseconds or less, in any order: empty as laid, one stretched
        to the call's end."""
        start = 5
        for end in (start, start + 1, start + 40):
            assert phase_span_tiles_of(items, start, end) == phase_span_tiles(
                phases_to_intervals(items, start, end))
