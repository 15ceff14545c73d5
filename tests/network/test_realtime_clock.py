"""The kernel dates segments on CLOCK_REALTIME, the budget is measured on ``perf_counter``:
the offset between them is read from a pair nothing interrupted, and read again where the
realtime clock stepped.  The truth is the sender's own clock around its ``send``."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from time import perf_counter
from typing import Any

import pytest
from loopback import KERNEL_STAMPS, timed_send, within

from agent_latency import _realtime
from agent_latency._realtime import realtime_offset
from agent_latency.instrumentation.net import Arrivals
from agent_latency.instrumentation.net._kernel import (
    CLOCK,
    RECHECK_S,
    Clock,
    enable_timestamps,
    peek_queued,
)

pytestmark = KERNEL_STAMPS

# A realtime step as CI saw one (146 ms), and an interruption as long.
STEP = 0.15


class LateRealtime:
    """``time`` for :mod:`agent_latency._realtime`, whose first ``time_ns`` is followed by
    ``STEP`` seconds away from the CPU (another thread took the GIL, the OS the core)."""

    def __init__(self) -> None:
        self.late = True

    def time_ns(self) -> int:
        now = time.time_ns()
        if self.late:
            self.late = False
            time.sleep(STEP)
        return now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def clock() -> Iterator[Clock]:
    """The process's converter, read afresh after the test (which leaves it stepped)."""
    yield CLOCK
    CLOCK.refresh(perf_counter())


def peeked(pair: tuple[socket.socket, socket.socket]) -> tuple[float, tuple[float, float]]:
    """A segment sent and peeked at 20 ms later: its stamp on ``perf_counter``, and the send's
    window."""
    client, server = pair
    assert enable_timestamps(client)
    sent = timed_send(server, b"x" * 100)
    time.sleep(0.02)  # read well after it landed: a stamp dated at its read is wrong
    deadline = perf_counter() + 2.0
    while (peeked := peek_queued(client.fileno(), socket.AF_INET)) is None:
        assert perf_counter() < deadline, "the segment never arrived"
        time.sleep(0.001)
    size, arrived = peeked
    assert size == 100 and arrived is not None
    return arrived, sent


class TestOffsetRead:
    """The offset comes from the tightest of a few bracketed pairs, not from the first."""

    def test_an_interrupted_pair_is_not_taken(self, monkeypatch) -> None:
        """A pair read across an interruption would be off by its length."""
        truth = realtime_offset()
        monkeypatch.setattr(_realtime, "time", LateRealtime())
        assert realtime_offset() == pytest.approx(truth, abs=0.001)

    def test_stamps_after_an_interrupted_read_are_on_time(self, pair, clock,
                                                          monkeypatch) -> None:
        """CI read the offset once across 146 ms away from the CPU: every stamp of the next
        minute came 146 ms after its send."""
        clock.checked = -1e18  # the next stamp reads the offset
        monkeypatch.setattr(_realtime, "time", LateRealtime())
        arrived, sent = peeked(pair)
        assert within(arrived, sent), (arrived, sent)


class TestClockSteps:
    """A step of the realtime clock moves the offset; stamps converted after it use the new
    one."""

    def test_a_step_forward_is_seen_in_the_first_stamp(self, pair, clock) -> None:
        """Stamps ahead of the clock's own reading cannot be: the offset is read again."""
        clock.refresh(perf_counter())
        clock.offset -= STEP  # realtime went STEP ahead since the offset was read
        arrived, sent = peeked(pair)
        assert within(arrived, sent), (arrived, sent)
        assert clock.offset == pytest.approx(realtime_offset(), abs=0.001)

    def test_a_step_back_is_taken_within_a_second(self, pair, clock) -> None:
        """Stamps converted early look plausible: the offset is read again every
        ``RECHECK_S``, so a step back misdates for a second at most."""
        assert RECHECK_S <= 1.0
        clock.refresh(perf_counter() - 1.01)
        clock.offset += STEP
        arrived, sent = peeked(pair)
        assert within(arrived, sent), (arrived, sent)

    def test_a_transmit_stamp_after_a_step_forward(self, pair, clock) -> None:
        """The request's last byte is dated by a transmit stamp, converted the same way."""
        client, _server = pair
        arrivals = Arrivals(client)
        clock.refresh(perf_counter())
        clock.offset -= STEP
        arrivals.sending()
        sent = timed_send(client, b"x" * 1000)
        arrivals.done_sending()
        assert arrivals.t_sent is not None
        assert within(arrivals.t_sent, (sent[0], perf_counter())), (arrivals.t_sent, sent)

    def test_never_later_than_the_read(self, clock) -> None:
        """A stamp is taken before it is read: a converted one is never later than that."""
        now = perf_counter()
        assert clock.perf_checked(time.time_ns() / 1e9 + 10.0, now) == now
