"""httpcore's ``trace`` callback on an LLM call's requests: lifted for the exchange where the
connection is tapped, its marks taken from the connection wrapper, the taps and the
connection's ``_response_closed``; kept whole where the program chained its own."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest
from llm_helpers import assert_phases_add_up, calls_in_order

from agent_latency import semconv
from agent_latency.instrumentation.net import _httpcore

MESSAGES = [{"role": "user", "content": "hello " * 200}]
EXCHANGE_EVENTS = [f"http11.{step}.{end}" for step in (
    "send_request_headers", "send_request_body", "receive_response_headers",
    "receive_response_body", "response_closed") for end in ("started", "complete")]


@pytest.fixture
def hook_events(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The events each request's callback of ours received, one list per request."""
    seen: list[list[str]] = []

    def spying(make: Any) -> Any:
        def make_spy(attempt: Any, user: Any) -> Any:
            trace = make(attempt, user)
            names: list[str] = []
            seen.append(names)
            if asyncio.iscoroutinefunction(trace):
                async def async_spy(name: str, info: Any) -> None:
                    names.append(name)
                    await trace(name, info)
                return async_spy

            def spy(name: str, info: Any) -> None:
                names.append(name)
                trace(name, info)
            return spy
        return make_spy

    monkeypatch.setattr(_httpcore, "_sync_trace", spying(_httpcore._sync_trace))
    monkeypatch.setattr(_httpcore, "_async_trace", spying(_httpcore._async_trace))
    return seen


def _check_calls(otel: Any) -> None:
    first, second = calls_in_order(otel)
    for span in (first, second):
        a = span.attributes
        assert_phases_add_up(span)
        assert a[semconv.LLM_BYTES_SENT] > 1000 and a[semconv.LLM_BYTES_RECEIVED] > 100, a
        assert a[semconv.LLM_PREFILL] > 0
        assert a[semconv.LLM_RTT_SOURCE] == "tcp_info"
    assert [s.attributes[semconv.LLM_CONNECTION_REUSED] for s in (first, second)] == [
        False, True]


class TestLifted:
    """On a tapped HTTP/1.1 connection the exchange's ten events never reach the callback
    (only a new connection's connect events do), and the call is measured as before."""

    def test_sync(self, otel: Any, sim: Any, hook_events: list[list[str]]) -> None:
        """The openai SDK's own client: a new connection, then a kept-alive one."""
        with openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0) as c:
            for _ in range(2):
                c.chat.completions.create(model="sim-a", messages=MESSAGES, max_tokens=4)
        assert hook_events == [["connection.connect_tcp.started",
                                "connection.connect_tcp.complete"], []]
        _check_calls(otel)

    def test_async_stream(self, otel: Any, sim: Any, hook_events: list[list[str]]) -> None:
        """An async client's streams (anyio's stream, the callback a coroutine)."""
        async def run() -> None:
            async with openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k",
                                          max_retries=0) as c:
                for _ in range(2):
                    async for _chunk in await c.chat.completions.create(
                            model="sim-a", messages=MESSAGES, max_tokens=4, stream=True,
                            stream_options={"include_usage": True}):
                        pass

        asyncio.run(run())
        assert hook_events == [["connection.connect_tcp.started",
                                "connection.connect_tcp.complete"], []]
        _check_calls(otel)

    def test_a_stream_left_early_is_closed(self, otel: Any, sim: Any,
                                           hook_events: list[list[str]]) -> None:
        """A stream the program closes after its first chunk: the close reaches the
        attempt through ``_response_closed`` (the kernel's byte counts read before the
        connection goes)."""
        with openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0) as c:
            stream = c.chat.completions.create(model="sim-a", messages=MESSAGES,
                                               max_tokens=50, stream=True)
            next(iter(stream))
            stream.close()
        assert hook_events == [["connection.connect_tcp.started",
                                "connection.connect_tcp.complete"]]
        (span,) = calls_in_order(otel)
        assert_phases_add_up(span)
        assert span.attributes[semconv.LLM_BYTES_RECEIVED] > 0


class TracingClient(httpx.Client):
    """A program's client that sets its own ``trace`` callback on every request."""

    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        request.extensions["trace"] = lambda name, info: self.events.append(name)
        return super().send(request, **kwargs)


class TestProgramCallback:
    """A callback the program set itself is chained after ours, which is then never lifted:
    the program sees every event."""

    def test_every_event_reaches_it(self, otel: Any, sim: Any) -> None:
        events: list[str] = []
        with openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0,
                           http_client=TracingClient(events)) as c:
            for _ in range(2):
                c.chat.completions.create(model="sim-a", messages=MESSAGES, max_tokens=4)
        exchanges = [e for e in events if e.startswith("http11.")]
        assert exchanges == EXCHANGE_EVENTS * 2
        assert events.count("connection.connect_tcp.started") == 1
        _check_calls(otel)
