"""The stream's first event dated from the wire, beside its first token.

Both come from one block the kernel coalesced while the client was away; dated apart (the
first token from the model's pace, the first event spread over the block's window), the
first chunk could land after the first token it carried (seen under load: Gemini's
``time_to_first_chunk`` 1.2 ms before its ``ttft``, which must be equal)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from loopback import loopback_pair

from agent_latency.instrumentation.llm import _wire
from agent_latency.instrumentation.net import Arrivals

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="kernel receive stamps (SO_TIMESTAMPNS) are Linux's")

OPENING = b'data: {"role": "assistant"}\n\n'


def token(n: int) -> bytes:
    return f'data: {{"text": "t{n}"}}\n\n'.encode()


@pytest.fixture
def coalesced(request: Any) -> Iterator[tuple[Arrivals, Any, float]]:
    """One block of events that waited in the kernel: (its arrivals, the call, the time
    the client took it).  ``request.param``: the events, in order."""
    events: list[bytes] = request.param
    client, server = loopback_pair()
    try:
        arrivals = Arrivals(client)
        arrivals.classify = lambda event: b'"text"' in event
        time.sleep(0.05)  # a window for the even spread to place the first event in
        server.sendall(b"".join(events))
        time.sleep(0.01)
        arrivals.observe()  # one kernel stamp, the block's newest
        data = client.recv(65536)
        taken = time.perf_counter()
        arrivals.read(data, taken)
        # A model whose pace an earlier stream taught: the first token is dated back by it.
        model = f"paced-{id(arrivals)}"
        _wire._paces[("test", model)] = 0.001
        yield arrivals, SimpleNamespace(provider="test", model=model), taken
        _wire._paces.pop(("test", model), None)
    finally:
        client.close()
        server.close()


class TestFirstChunk:
    """The first event's wire date agrees with the first token's."""

    @pytest.mark.parametrize("coalesced", [[token(n) for n in range(4)]], indirect=True)
    def test_a_first_event_that_is_the_first_token_has_its_date(self, coalesced) -> None:
        arrivals, call, taken = coalesced
        first = _wire._first(arrivals, call)
        assert first is not None and first.source == "estimated"
        chunks = SimpleNamespace(t_first_chunk=taken)
        _wire._first_chunk(chunks, arrivals, first)
        assert chunks.t_first_chunk == first.t

    @pytest.mark.parametrize("coalesced", [[OPENING, *(token(n) for n in range(4))]],
                             indirect=True)
    def test_an_opening_event_is_no_later_than_the_first_token(self, coalesced) -> None:
        arrivals, call, taken = coalesced
        first = _wire._first(arrivals, call)
        assert first is not None
        chunks = SimpleNamespace(t_first_chunk=taken)
        _wire._first_chunk(chunks, arrivals, first)
        assert arrivals.t_start <= chunks.t_first_chunk <= first.t

    @pytest.mark.parametrize("coalesced", [[OPENING, OPENING]], indirect=True)
    def test_a_stream_without_tokens_keeps_the_first_event(self, coalesced) -> None:
        arrivals, call, taken = coalesced
        assert _wire._first(arrivals, call) is None
        chunks = SimpleNamespace(t_first_chunk=taken)
        _wire._first_chunk(chunks, arrivals, None)
        assert arrivals.t_start <= chunks.t_first_chunk <= taken
