"""The sync stream proxy reads an SDK stream (a generator inside) as that generator reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from llm_helpers import FAST, assert_phases_add_up, one_llm_span

from agent_latency import semconv
from agent_latency.simulator import SimulatorProcess

MESSAGES = [{"role": "user", "content": "hello " * 200}]


@pytest.fixture(scope="module")
def slow_first_token() -> Iterator[Any]:
    """A server whose first token comes seconds after the request: a window in which a
    thread is inside the stream's fetch."""
    with SimulatorProcess(FAST.replace(prefill_tps=60.0)) as server:
        yield server


@pytest.fixture
def client(slow_first_token: Any) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(base_url=slow_first_token.base_url + "/v1", api_key="x", max_retries=0)
    yield c
    c.close()


class TestASecondThread:
    """A thread reading a stream another thread is inside gets the generator's ValueError, and
    the call goes on to its end."""

    def test_the_call_is_not_ended_by_it(self, otel: Any, client: openai.OpenAI) -> None:
        stream = client.chat.completions.create(model="sim-a", messages=MESSAGES,
                                                stream=True, max_tokens=8)
        chunks: list[Any] = []
        it = iter(stream)
        reader = threading.Thread(target=lambda: chunks.extend(it))
        reader.start()
        sdk_generator = stream._iterator  # the SDK's own, seen through the proxy
        deadline = time.monotonic() + 60
        while (not sdk_generator.gi_running and reader.is_alive()
               and time.monotonic() < deadline):
            time.sleep(0.001)
        assert sdk_generator.gi_running, "the reader never waited for the first token"
        with pytest.raises(ValueError, match="already executing"):
            next(it)
        reader.join(60)
        assert chunks
        span = one_llm_span(otel)
        assert semconv.ERROR_TYPE not in span.attributes
        assert span.status.status_code.name != "ERROR"
        assert span.attributes[semconv.LLM_TTFT] > 1.0
        assert_phases_add_up(span)


class TestAnErrorMidStream:
    """After the SDK raised mid-stream, the stream is over, as the SDK's generator is."""

    def test_next_then_stops(self, otel: Any) -> None:
        from agent_latency.simulator import Simulator

        with Simulator(FAST.replace(faults=("cut:after=3",))) as cut:
            c = openai.OpenAI(base_url=cut.base_url + "/v1", api_key="x", max_retries=0)
            it = iter(c.chat.completions.create(model="sim-a", messages=MESSAGES, stream=True,
                                                max_tokens=8))
            with pytest.raises(Exception):  # noqa: B017 - the cut's own, per transport
                for _ in it:
                    pass
            with pytest.raises(StopIteration):
                next(it)
            c.close()
        span = one_llm_span(otel)
        assert span.status.status_code.name == "ERROR"
        assert_phases_add_up(span)
