"""The phases of one LLM call."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent_latency.budget import (
    CallMarks,
    CallPhases,
    call_phases,
    split_server_time,
)


class TestCallPhases:
    """Phases follow DESIGN.md and add up to the call's duration."""

    def test_streaming_call(self):
        marks = CallMarks(t_call=10.0, t_send=10.05, t_sent=10.06, t_first=10.5, t_last=12.5,
                          t_end=12.52, dns=0.01, connect=0.02, tls=0.015, rtt=0.02)
        p = call_phases(marks)
        assert p.client == pytest.approx(0.005)
        assert p.upload == pytest.approx(0.01)
        assert p.prefill == pytest.approx(0.42)
        assert p.output_generation == pytest.approx(2.0)
        assert p.tail == pytest.approx(0.02)
        assert p.ttft == pytest.approx(0.5)
        assert p.network == pytest.approx(0.01 + 0.02 + 0.015 + 0.01 + 0.02 + 0.02)
        assert p.total == pytest.approx(2.52)
        assert p.notes == []

    def test_rtt_longer_than_wait_is_clamped_prefill_zero(self):
        p = call_phases(CallMarks(t_call=0, t_send=0, t_sent=0, t_first=0.001, t_last=0.002,
                                  t_end=0.002, rtt=0.01))
        assert p.rtt == pytest.approx(0.001) and p.prefill == 0

    def test_non_streaming_call_keeps_server_block_for_later_split(self):
        p = call_phases(CallMarks(t_call=0, t_send=0.001, t_sent=0.002, t_end=1.002, rtt=0.002))
        assert p.prefill == pytest.approx(0.998) and p.output_generation == 0
        assert p.total == pytest.approx(1.002)

    def test_server_reported_split(self):
        p = call_phases(CallMarks(t_call=0, t_send=0, t_sent=0, t_end=1.0))
        split_server_time(p, input_tokens=10, output_tokens=10, server_generation=0.7)
        assert p.output_generation == pytest.approx(0.7)
        assert p.prefill == pytest.approx(0.3)
        assert p.source == "server-reported"

    def test_estimated_split_from_rates(self):
        p = call_phases(CallMarks(t_call=0, t_send=0, t_sent=0, t_end=2.0))
        split_server_time(p, input_tokens=1000, output_tokens=100, prefill_tps=1000,
                          output_tps=100)
        assert p.prefill == pytest.approx(1.0) and p.output_generation == pytest.approx(1.0)
        assert p.source == "estimated"

    def test_backwards_clock_is_clamped_and_noted(self):
        p = call_phases(CallMarks(t_call=5, t_send=4, t_sent=3, t_first=2, t_last=1, t_end=6))
        assert p.total == pytest.approx(1.0)
        assert all(v >= 0 for _, v in p.items())
        assert p.notes

    def test_intervals_tile_the_span_exactly(self):
        p = CallPhases(client=0.001, dns=0.002, prefill=0.3333333, output_generation=0.6666667)
        ivs = p.intervals(1000, 1000 + 1_003_000_000, call=7, input_tokens=5, output_tokens=9)
        assert ivs[0].start == 1000 and ivs[-1].end == 1000 + 1_003_000_000
        assert all(a.end == b.start for a, b in itertools.pairwise(ivs))
        assert [iv.tokens for iv in ivs if iv.phase == "output_generation"] == [9]


marks_st = st.builds(
    lambda t, d, received, streamed: CallMarks(
        t_call=t[0], t_send=t[1], t_sent=t[2], t_first=t[3] if streamed else None,
        t_last=t[4] if streamed else None, t_end=t[5], dns=d[0], connect=d[1], tls=d[2],
        rtt=d[3], retry=d[4], t_received=received, first_token_cpu=d[5]),
    st.tuples(*[st.floats(0, 100)] * 6),
    st.tuples(*[st.floats(0, 5)] * 6),
    st.none() | st.floats(0, 100),
    st.booleans(),
)


@settings(max_examples=300)
@given(marks_st)
# Retries that fill the whole call: t_call + retry rounded past t_end (a negative RTT).
@example(CallMarks(t_call=1.209041564052298, t_send=0.0, t_sent=0.0, t_end=3.3608346540170246,
                   retry=3.0))
def test_phases_are_non_negative_and_sum_to_duration(marks):
    p = call_phases(marks)
    assert all(v >= 0 for _, v in p.items())
    assert p.total == pytest.approx(max(marks.t_end - marks.t_call, 0), abs=1e-9)


class TestLastByte:
    """Only the wire's tail is network; the client's work after the last byte is other."""

    def test_stream_tail_splits_at_the_last_byte(self):
        p = call_phases(CallMarks(t_call=0.0, t_send=0.0, t_sent=0.0, t_first=0.1, t_last=1.0,
                                  t_end=1.5, t_received=1.02))
        assert p.tail == pytest.approx(0.02)
        assert p.client_tail == pytest.approx(0.48)

    def test_last_byte_before_last_token_leaves_no_wire_tail(self):
        p = call_phases(CallMarks(t_call=0.0, t_send=0.0, t_sent=0.0, t_first=0.1, t_last=1.0,
                                  t_end=1.2, t_received=0.9))
        assert p.tail == 0 and p.client_tail == pytest.approx(0.2)

    def test_non_streaming_body_parse_is_client_tail(self):
        p = call_phases(CallMarks(t_call=0.0, t_send=0.0, t_sent=0.0, t_end=1.0,
                                  t_received=0.6))
        assert p.prefill == pytest.approx(0.6) and p.client_tail == pytest.approx(0.4)

    def test_unknown_last_byte_keeps_the_whole_tail_as_network(self):
        p = call_phases(CallMarks(t_call=0.0, t_send=0.0, t_sent=0.0, t_first=0.1, t_last=1.0,
                                  t_end=1.2))
        assert p.tail == pytest.approx(0.2) and p.client_tail == 0


class TestClientCpuBeforeFirstToken:
    """CPU the client spent before handing the first token over is client work."""

    def test_moves_from_prefill_to_client(self):
        p = call_phases(CallMarks(t_call=0.0, t_send=0.0, t_sent=0.0, t_first=0.5, t_last=1.0,
                                  t_end=1.0, first_token_cpu=0.2))
        assert p.prefill == pytest.approx(0.3) and p.client == pytest.approx(0.2)
        assert p.ttft == pytest.approx(0.5)

    def test_never_more_than_the_wait(self):
        p = call_phases(CallMarks(t_call=0.0, t_send=0.0, t_sent=0.0, t_first=0.1, t_last=0.2,
                                  t_end=0.2, first_token_cpu=5.0))
        assert p.prefill == 0 and p.client == pytest.approx(0.1)


class TestPartialRates:
    """A non-streaming split with only one learned rate."""

    def test_only_output_rate(self):
        p = call_phases(CallMarks(t_call=0, t_send=0, t_sent=0, t_end=1.0))
        split_server_time(p, input_tokens=3, output_tokens=60, output_tps=100)
        assert p.output_generation == pytest.approx(0.6) and p.prefill == pytest.approx(0.4)

    def test_only_prefill_rate_capped_at_the_block(self):
        p = call_phases(CallMarks(t_call=0, t_send=0, t_sent=0, t_end=1.0))
        split_server_time(p, input_tokens=5000, output_tokens=10, prefill_tps=1000)
        assert p.prefill == pytest.approx(1.0) and p.output_generation == 0
        assert p.total == pytest.approx(1.0)
