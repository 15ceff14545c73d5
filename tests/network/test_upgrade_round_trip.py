"""A WebSocket upgrade's round trip from the kernel's ``TCP_INFO`` times (its last data sent
and received, counted in ticks), bounded by the wall time the client saw."""

from __future__ import annotations

import struct
import sys

import pytest

from agent_latency.instrumentation.net import _websocket
from agent_latency.instrumentation.net._kernel import KERNEL_TICK

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="TCP_INFO is Linux's")


class _Socket:
    """A socket whose ``TCP_INFO`` says its last data went out ``sent_ms`` and came in
    ``received_ms`` ago."""

    def __init__(self, sent_ms: int, received_ms: int) -> None:
        self.info = bytearray(104)
        struct.pack_into("=I4xI", self.info, 44, sent_ms, received_ms)

    def getsockopt(self, level: int, name: int, size: int) -> bytes:
        return bytes(self.info[:size])


class TestRequestRoundTrip:
    """Ticks apart: their difference, never above the wall time; one tick: half a tick."""

    def test_ticks_apart(self) -> None:
        assert _websocket._request_round_trip(_Socket(28, 4), 0.035) == pytest.approx(0.024)

    def test_wall_time_bounds_it(self) -> None:
        assert _websocket._request_round_trip(_Socket(28, 4), 0.021) == pytest.approx(0.021)

    def test_same_tick_is_half_a_tick(self) -> None:
        assert _websocket._request_round_trip(_Socket(8, 8), 0.05) == pytest.approx(
            KERNEL_TICK / 2)
        assert _websocket._request_round_trip(_Socket(8, 8), 0.001) == pytest.approx(0.0005)

    def test_received_before_sent_is_unknown(self) -> None:
        assert _websocket._request_round_trip(_Socket(4, 8), 0.05) is None

    def test_no_tcp_info_is_unknown(self) -> None:
        assert _websocket._request_round_trip(None, 0.05) is None
        assert _websocket._request_round_trip(object(), 0.05) is None

    def test_kernel_tick_is_the_coarse_clock(self) -> None:
        assert 0.0005 <= KERNEL_TICK <= 0.011
