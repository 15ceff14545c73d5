"""LLM calls sent over aiohttp (litellm's ``acompletion`` transport, google-genai's async
client): aiohttp's TraceConfig gives the attempt the httpx path's marks."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agent_latency import semconv
from agent_latency.instrumentation.llm import Settings
from agent_latency.instrumentation.llm._invoke import call_wrapper
from agent_latency.instrumentation.llm.openai import CHAT, OpenAIInstrumentor
from agent_latency.instrumentation.net import _methods, _taps
from agent_latency.instrumentation.protocols import view
from agent_latency.simulator import Simulator, SimulatorConfig

aiohttp = pytest.importorskip("aiohttp")

BODY = {"model": "sim-a", "messages": [{"role": "user", "content": "hello " * 50}],
        "max_tokens": 8}


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig(prefill_tps=20000.0, output_tps=1000.0,
                                   default_output_tokens=8)) as server:
        yield server


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentor = OpenAIInstrumentor()  # every LLM instrumentor brings the aiohttp patch
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


def _calls(otel):
    return sorted((s for s in otel.spans() if semconv.LLM_CLIENT in s.attributes),
                  key=lambda s: s.start_time)


async def _post(session, url: str, **body):
    async with session.post(url, json=body) as response:
        return view(await response.json())


class TestAiohttpAttempts:
    """A call whose request goes through aiohttp gets connect, upload, RTT and traceparent."""

    def test_two_calls_on_one_session(self, otel, sim) -> None:
        url = sim.base_url.replace("127.0.0.1", "localhost") + "/v1/chat/completions"
        wrapper = call_wrapper(CHAT, Settings())

        async def run() -> None:
            async with aiohttp.ClientSession() as session:
                for _ in range(2):
                    result = await wrapper(_post, None, (session, url), dict(BODY))
                    assert result.usage.completion_tokens == 8

        asyncio.run(run())
        calls = _calls(otel)
        assert len(calls) == 2
        first, second = (c.attributes for c in calls)
        assert first[semconv.LLM_ATTEMPTS] == 1
        assert first[semconv.LLM_CONNECTION_REUSED] is False
        assert first[semconv.LLM_DNS] > 0 and first[semconv.LLM_CONNECT] > 0
        assert first[semconv.LLM_UPLOAD] >= 0
        assert first[semconv.LLM_RTT_SOURCE] == semconv.RTT_SOURCE_TCP_INFO
        assert first[semconv.LLM_SERVER_REQUEST_ID]
        assert second[semconv.LLM_CONNECTION_REUSED] is True
        assert second[semconv.LLM_CONNECT] == 0.0
        truth = sim.wait_truth(2)
        ids = {format(c.context.trace_id, "032x") for c in calls}
        assert {t["traceparent"].split("-")[1] for t in truth[-2:]} == ids

    def test_requests_outside_calls_are_untouched(self, otel, sim) -> None:
        async def run() -> int:
            async with aiohttp.ClientSession() as session:
                async with session.get(sim.base_url + "/v1/models") as response:
                    return response.status

        assert asyncio.run(run()) == 200
        assert _calls(otel) == []

    def test_the_protocol_is_back_in_its_transport(self, otel, sim, monkeypatch) -> None:
        """The tap's stand-in for aiohttp's protocol goes, and the protocol is the
        transport's again, after each call on a kept-alive connection."""
        made = []

        def counting(transport, methods):
            undo = _methods.stand_in_protocol(transport, methods)
            made.append((transport, undo))
            return undo

        monkeypatch.setattr(_taps, "stand_in_protocol", counting)
        url = sim.base_url + "/v1/chat/completions"
        wrapper = call_wrapper(CHAT, Settings())

        async def run() -> list:
            async with aiohttp.ClientSession() as session:
                for _ in range(2):
                    await wrapper(_post, None, (session, url), dict(BODY))
                return [transport.get_protocol() for transport, _ in made]

        protocols = asyncio.run(run())
        assert len(made) == 2 and all(undo is not None for _, undo in made)
        assert made[0][0] is made[1][0]  # the kept-alive connection, tapped twice
        assert all(type(p).__name__ == "ResponseHandler" for p in protocols)
        assert not any(_methods.is_stand_in(p) for p in protocols)
