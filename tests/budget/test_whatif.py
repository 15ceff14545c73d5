"""The what-if scheduler."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_latency.budget import Interval, Scenario, connection_setup_saving, project

MS = 1_000_000
PHASES = ["tool", "prefill", "output_generation", "rtt", "client", "dns", "tail", "connect"]

intervals_st = st.lists(
    st.tuples(st.integers(0, 1_000 * MS), st.integers(0, 300 * MS), st.sampled_from(PHASES),
              st.integers(0, 500)).map(lambda t: Interval(t[0], t[0] + t[1], t[2], 0, t[3])),
    max_size=30,
)
speedups_st = st.builds(
    Scenario,
    output_speedup=st.none() | st.floats(1, 10),
    prefill_speedup=st.none() | st.floats(1, 10),
    ttft_reduction=st.none() | st.floats(0, 1),
    network_reduction=st.none() | st.floats(0, 1),
    persistent_connection=st.booleans(),
    tool_speedup=st.none() | st.floats(1, 10),
)


class TestWhatIfInvariants:
    """Invariants of the projection over random tasks."""

    @settings(max_examples=300)
    @given(intervals_st)
    def test_no_change_returns_recorded_wall(self, ivs):
        p = project(ivs, 0, 1_400 * MS, Scenario())
        assert p.projected_wall == pytest.approx(p.recorded_wall, abs=1e-9)
        for iv, s, e in p.schedule:
            assert (s, e) == (iv.start, iv.end)

    @settings(max_examples=300)
    @given(intervals_st, speedups_st)
    def test_speedups_never_make_the_task_longer(self, ivs, scenario):
        p = project(ivs, 0, 1_400 * MS, scenario)
        assert p.projected_wall <= p.recorded_wall + 1e-9
        assert p.projected_wall >= 0

    @settings(max_examples=200)
    @given(intervals_st, speedups_st)
    def test_happens_before_is_kept(self, ivs, scenario):
        p = project(ivs, 0, 1_400 * MS, scenario)
        for a, _, a_end in p.schedule:
            for b, b_start, _ in p.schedule:
                if a.end <= b.start:
                    assert a_end <= b_start + 1


class TestWhatIfCases:
    """Hand-checked projections."""

    def test_sequential_chain_saves_the_sped_up_part(self):
        ivs = [Interval(0, 100 * MS, "tool"), Interval(100 * MS, 300 * MS, "prefill"),
               Interval(300 * MS, 500 * MS, "output_generation", tokens=101)]
        p = project(ivs, 0, 500 * MS, Scenario(output_tps=1000))  # 100 gaps after token 1
        assert p.projected_wall == pytest.approx(0.4)
        assert p.saved == pytest.approx(0.1)

    def test_parallel_work_is_not_double_saved(self):
        ivs = [Interval(0, 100 * MS, "tool", name="a"), Interval(0, 100 * MS, "tool", name="b")]
        p = project(ivs, 0, 100 * MS, Scenario(tool_speedup={"a": 10.0}))
        assert p.projected_wall == pytest.approx(0.1)
        p = project(ivs, 0, 100 * MS, Scenario(tool_speedup=2.0))
        assert p.projected_wall == pytest.approx(0.05)

    def test_agent_think_time_is_kept(self):
        ivs = [Interval(0, 100 * MS, "tool"), Interval(300 * MS, 400 * MS, "tool")]
        p = project(ivs, 0, 500 * MS, Scenario(tool_speedup=2.0))
        assert p.projected_wall == pytest.approx(0.4)

    def test_waiting_on_the_latest_predecessor_not_an_earlier_one(self):
        ivs = [Interval(0, 100 * MS, "tool"), Interval(100 * MS, 200 * MS, "prefill"),
               Interval(200 * MS, 300 * MS, "tool")]
        p = project(ivs, 0, 300 * MS, Scenario(prefill_speedup=2.0))
        assert p.projected_wall == pytest.approx(0.25)

    def test_persistent_connection_removes_setup_after_the_first(self):
        # Two calls, each on a new connection: the second's DNS, connect and TLS go; the
        # task's first connection is still opened once.
        ivs = [Interval(0, 30 * MS, "dns", call=1), Interval(30 * MS, 60 * MS, "connect", call=1),
               Interval(60 * MS, 100 * MS, "prefill", call=1),
               Interval(100 * MS, 110 * MS, "dns", call=2),
               Interval(110 * MS, 130 * MS, "connect", call=2),
               Interval(130 * MS, 150 * MS, "tls", call=2),
               Interval(150 * MS, 200 * MS, "prefill", call=2)]
        p = project(ivs, 0, 200 * MS, Scenario(persistent_connection=True))
        assert p.projected_wall == pytest.approx(0.15)
        assert connection_setup_saving(ivs) == pytest.approx(0.05)

    def test_persistent_connection_keeps_the_only_connection(self):
        ivs = [Interval(0, 30 * MS, "dns", call=1), Interval(30 * MS, 60 * MS, "connect", call=1),
               Interval(60 * MS, 100 * MS, "prefill", call=1)]
        p = project(ivs, 0, 100 * MS, Scenario(persistent_connection=True))
        assert p.projected_wall == pytest.approx(0.1)
        assert connection_setup_saving(ivs) == 0.0

    def test_persistent_connection_removes_a_websocket_upgrade_after_the_first(self):
        ivs = [Interval(0, 10 * MS, "connect", call=1),
               Interval(10 * MS, 30 * MS, "upgrade", call=1),
               Interval(30 * MS, 40 * MS, "connect", call=2),
               Interval(40 * MS, 60 * MS, "upgrade", call=2)]
        p = project(ivs, 0, 60 * MS, Scenario(persistent_connection=True))
        assert p.projected_wall == pytest.approx(0.03)

    def test_slower_model_makes_the_task_longer(self):
        ivs = [Interval(0, 100 * MS, "output_generation", tokens=101)]
        assert project(ivs, 0, 100 * MS, Scenario(output_tps=500)).projected_wall == (
            pytest.approx(0.2))

    def test_invalid_scenarios_are_clear_errors(self):
        with pytest.raises(ValueError, match="output_speedup must be > 0"):
            Scenario(output_speedup=0)
        with pytest.raises(ValueError, match="fraction"):
            Scenario(network_reduction=1.5)


@settings(max_examples=100)
@given(intervals_st)
def test_no_change_is_exact_at_epoch_nanoseconds(ivs):
    """Real spans carry epoch nanoseconds (~1.7e18), beyond a double's exact integers."""
    base = 1_764_000_000_000_000_000
    shifted = [iv._replace(start=iv.start + base, end=iv.end + base) for iv in ivs]
    p = project(shifted, base, base + 1_400 * MS, Scenario())
    assert p.projected_wall == p.recorded_wall


class TestNestedTools:
    """Tools run by a tool (same ``call``) are projected inside it."""

    def test_named_speedup_of_a_nested_tool_shortens_the_outer_one(self):
        ivs = [Interval(0, 100 * MS, "tool", call=7, name="run_shell"),
               Interval(10 * MS, 90 * MS, "tool", call=7, name="pytest"),
               Interval(100 * MS, 150 * MS, "prefill")]
        p = project(ivs, 0, 150 * MS, Scenario(tool_speedup={"pytest": 2.0}))
        assert p.projected_wall == pytest.approx(0.11)

    def test_global_speedup_scales_the_outer_tool_once(self):
        ivs = [Interval(0, 100 * MS, "tool", call=7, name="run_shell"),
               Interval(10 * MS, 90 * MS, "tool", call=7, name="pytest")]
        assert project(ivs, 0, 100 * MS, Scenario(tool_speedup=2.0)).projected_wall == (
            pytest.approx(0.05))

    def test_unknown_call_ids_are_never_grouped(self):
        ivs = [Interval(0, 100 * MS, "tool", name="a"), Interval(0, 100 * MS, "tool", name="b")]
        p = project(ivs, 0, 100 * MS, Scenario(tool_speedup={"a": 10.0}))
        assert p.projected_wall == pytest.approx(0.1)


nested_st = st.lists(
    st.tuples(st.integers(0, 1_000 * MS), st.integers(1, 300 * MS),
              st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), max_size=3),
              st.sampled_from(["a", "b", "c"])),
    max_size=10,
).map(lambda groups: [
    iv for call, (start, length, children, name) in enumerate(groups, 1)
    for iv in [Interval(start, start + length, "tool", call=call, name=name)] + [
        Interval(start + int(length * min(x, y)), start + int(length * max(x, y)), "tool",
                 call=call, name=("a", "b", "c")[k % 3])
        for k, (x, y) in enumerate(children)]
])


@settings(max_examples=200)
@given(nested_st, st.dictionaries(st.sampled_from(["a", "b", "c"]), st.floats(1, 10)))
def test_nested_tools_keep_the_invariants(ivs, factors):
    assert project(ivs, 0, 1_400 * MS, Scenario()).projected_wall == pytest.approx(1.4)
    p = project(ivs, 0, 1_400 * MS, Scenario(tool_speedup=factors or None))
    assert p.projected_wall <= p.recorded_wall + 1e-9


def _stream(start: int, prefill: int, generation: int, tail: int, client_tail: int,
            lag: int, call: int, tokens: int = 41) -> list[Interval]:
    """One streamed call's phases laid end to end (ms), its client ``lag`` ms behind the
    wire at the last token."""
    out, cursor = [], start * MS
    for phase, ms in (("prefill", prefill), ("output_generation", generation),
                      ("tail", tail), ("client_tail", client_tail)):
        if ms:
            # A client tail's tokens hold its lag.
            out.append(Interval(cursor, cursor + ms * MS, phase, call,
                                tokens if phase != "client_tail" else lag * MS))
            cursor += ms * MS
    return out


busy_stream_st = st.builds(
    lambda start, prefill, generation, tail, behind, final, call: _stream(
        start, prefill, generation, tail, max(behind - tail, 0) + final, behind, call),
    st.integers(0, 200), st.integers(1, 300), st.integers(1, 500), st.integers(0, 5),
    st.integers(0, 800), st.integers(0, 50), st.integers(1, 4))


class TestBusyClient:
    """A client that read a stream slower than the server sent it keeps its pace."""

    def test_a_saturated_client_gets_no_saving_from_a_faster_model(self):
        # Generation 400 ms, the client 790 ms behind at the last token, then 10 ms of work.
        ivs = _stream(0, 100, 400, 1, 799, 790, call=1)
        fast = Scenario(output_speedup=2)
        p = project(ivs, 0, 1_300 * MS, fast)
        assert p.projected_wall == pytest.approx(1.3)
        assert (p.llm_calls, p.client_bound) == (1, 1)
        assert p.client_kept == pytest.approx(0.2)  # 1.3 s against 1.1 s unpaced
        today = project(ivs, 0, 1_300 * MS, Scenario(output_speedup=2, client_pace=False))
        assert today.projected_wall == pytest.approx(1.1)

    def test_a_faster_prefill_still_moves_the_whole_stream_earlier(self):
        ivs = _stream(0, 100, 400, 1, 799, 790, call=1)
        p = project(ivs, 0, 1_300 * MS, Scenario(prefill_speedup=2, output_speedup=2))
        assert p.projected_wall == pytest.approx(1.25)

    @pytest.mark.parametrize(("client_tail", "lag", "speedup", "projected", "bound"), [
        # 3 ms behind at the end: under 5 ms, it kept up.
        (12, 3, 2, 0.313, 0),
        # 50 ms behind at the end of a 400 ms stream (a pause, not a pace): under a quarter.
        (59, 50, 2, 0.36, 0),
        # A quarter behind: its pace is kept, twice as fast a server saves nothing.
        (109, 100, 2, 0.61, 1),
        # A slower server: the client keeps up with an 800 ms stream, its 10 ms of final
        # work remain.
        (109, 100, 0.5, 0.911, 0),
    ])
    def test_how_far_behind(self, client_tail, lag, speedup, projected, bound):
        ivs = _stream(0, 100, 400, 1, client_tail, lag, call=1)
        p = project(ivs, 0, (501 + client_tail) * MS, Scenario(output_speedup=speedup))
        assert p.projected_wall == pytest.approx(projected)
        assert p.client_bound == bound

    def test_the_pace_counts_from_the_calls_own_first_token(self):
        """A client tail that another interval delays starts late; the client's pace still
        runs from its own call's first token."""
        ivs = [*_stream(0, 100, 400, 1, 799, 790, call=1),
               Interval(0, 600 * MS, "tool", 2)]  # ends after the stream's last byte
        p = project(ivs, 0, 1_300 * MS, Scenario(output_speedup=2))
        assert p.projected_wall == pytest.approx(1.3)

    def test_kept_is_the_task_against_its_unpaced_projection(self):
        ivs = [*_stream(0, 100, 400, 1, 799, 790, call=1),
               Interval(1_300 * MS, 1_700 * MS, "tool", 9, 0, "run_shell"),
               Interval(1_350 * MS, 1_650 * MS, "tool", 9, 0, "pytest")]
        fast = Scenario(output_speedup=2, tool_speedup={"pytest": 3})
        p = project(ivs, 0, 1_700 * MS, fast)
        unpaced = project(ivs, 0, 1_700 * MS, Scenario(
            output_speedup=2, tool_speedup={"pytest": 3}, client_pace=False))
        assert p.client_kept == pytest.approx(p.projected_wall - unpaced.projected_wall)
        assert p.client_kept == pytest.approx(0.2)

    @settings(max_examples=300)
    @given(st.lists(busy_stream_st, min_size=1, max_size=4), speedups_st)
    def test_speedups_never_make_busy_streams_longer(self, streams, scenario):
        ivs = [iv for stream in streams for iv in stream]
        end = max(iv.end for iv in ivs)
        p = project(ivs, 0, end, scenario)
        assert p.projected_wall <= p.recorded_wall + 1e-9
        assert project(ivs, 0, end, Scenario()).projected_wall == pytest.approx(
            p.recorded_wall, abs=1e-9)

    @settings(max_examples=300)
    @given(busy_stream_st, speedups_st)
    def test_the_pace_of_one_stream_never_saves_more(self, stream, scenario):
        end = stream[-1].end
        kept = project(stream, 0, end, scenario)
        today = project(stream, 0, end,
                        Scenario(**{**_fields(scenario), "client_pace": False}))
        assert today.projected_wall - 1e-9 <= kept.projected_wall


def _fields(scenario: Scenario) -> dict:
    return {name: getattr(scenario, name) for name in Scenario.__dataclass_fields__}
