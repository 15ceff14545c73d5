"""What real agents do below ``create()``: the SDK's low-level ``client.post``, a raw response
dropped while its stream is read (aider), Responses function calls, and the client's own work
after the last byte."""

from __future__ import annotations

import asyncio
import gc
import time

import openai
import pytest
from llm_helpers import (
    assert_phases_add_up,
    busy_slack,
    loopback_tolerance,
    one_llm_span,
    truth_of,
)

import agent_latency
from agent_latency import semconv
from agent_latency.simulator import Simulator, SimulatorConfig

MESSAGES = [{"role": "user", "content": "hello " * 200}]
TOOL_SCRIPT = {"turns": [{"tool_calls": [
    {"name": "run_shell", "arguments": {"command": "ls -la " + "x" * 80}}]}]}


@pytest.fixture
def client(sim):
    c = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
    yield c
    c.close()


class TestLowLevelPost:
    """``client.post("/chat/completions")`` (litellm's way) is one call, streamed or not."""

    def test_post_stream(self, otel, client):
        from openai import Stream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        with agent_latency.task("t"):
            stream = client.post("/chat/completions", cast_to=ChatCompletion,
                                 body={"model": "sim-a", "messages": MESSAGES, "stream": True,
                                       "max_tokens": 8},
                                 stream=True, stream_cls=Stream[ChatCompletionChunk])
            chunks = list(stream)
        assert chunks
        span = one_llm_span(otel)
        assert span.name == "chat sim-a"
        assert span.attributes[semconv.GEN_AI_REQUEST_STREAM] is True
        assert span.attributes[semconv.LLM_TTFT] > 0
        assert_phases_add_up(span)
        task = otel.span("invoke_agent t")
        assert task.attributes[semconv.budget_count("llm_calls")] == 1

    def test_post_non_streaming(self, otel, client):
        from openai.types.chat import ChatCompletion

        done = client.post("/chat/completions", cast_to=ChatCompletion,
                           body={"model": "sim-a", "messages": MESSAGES, "max_tokens": 8})
        assert done.choices
        span = one_llm_span(otel)
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
        assert_phases_add_up(span)

    def test_other_paths_are_not_calls(self, otel, client):
        client.models.list()
        assert [s for s in otel.spans() if semconv.LLM_CLIENT in s.attributes] == []


class TestRawResponseDropped:
    """aider: ``with_raw_response.create(stream=True)``, ``parse()``, raw response dropped."""

    def _read(self, client):
        raw = client.chat.completions.with_raw_response.create(
            model="sim-a", messages=MESSAGES, stream=True, max_tokens=8)
        stream = raw.parse()
        del raw
        gc.collect()
        time.sleep(0.01)
        return [c for c in stream]

    def test_stream_outlives_its_raw_response(self, otel, client):
        chunks = self._read(client)
        assert len(chunks) >= 8
        span = one_llm_span(otel)
        a = span.attributes
        assert a[semconv.LLM_CHUNKS] == len(chunks)
        assert a[semconv.LLM_TTFT] > 0
        assert a[semconv.LLM_OUTPUT_GENERATION] > 0
        assert_phases_add_up(span)

    def test_async(self, otel, sim):
        async def main():
            aclient = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
            raw = await aclient.chat.completions.with_raw_response.create(
                model="sim-a", messages=MESSAGES, stream=True, max_tokens=8)
            stream = raw.parse()
            del raw
            gc.collect()
            return [c async for c in stream]

        chunks = asyncio.run(main())
        a = one_llm_span(otel).attributes
        assert a[semconv.LLM_CHUNKS] == len(chunks)
        assert a[semconv.LLM_TTFT] > 0


class TestResponsesFunctionCall:
    """A function call's first output is the item that names it, not its first argument."""

    def test_the_item_naming_a_function_is_output(self):
        from types import SimpleNamespace as Event

        from agent_latency.instrumentation.llm.openai import RESPONSES

        state = Event(content=None, meta_chunk=None, usage_chunk=None)
        added = "response.output_item.added"
        assert RESPONSES.observe(state, Event(type=added, item=Event(type="function_call")))
        assert not RESPONSES.observe(state, Event(type=added, item=Event(type="message")))

    def test_first_token_is_the_function_call_item(self, otel):
        config = SimulatorConfig(prefill_tps=20000.0, output_tps=20.0, script=TOOL_SCRIPT)
        with Simulator(config) as sim:
            client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
            # The SDK builds each event type's model on first sight (tens of ms): warm up.
            list(client.responses.create(model="sim-r", input="warm up", stream=True))
            otel.exporter.clear()
            events = list(client.responses.create(
                model="sim-r", input="x " * 100, stream=True,
                tools=[{"type": "function", "name": "run_shell", "parameters": {
                    "type": "object", "properties": {"command": {"type": "string"}}}}]))
            client.close()
            span = one_llm_span(otel)
            truth = truth_of(sim, span.attributes[semconv.LLM_SERVER_REQUEST_ID])
        kinds = [e.type for e in events]
        assert "response.function_call_arguments.delta" in kinds
        a = span.attributes
        # 20 tokens/s: a gap is 50 ms; prefill must not swallow one.
        assert a[semconv.LLM_PREFILL] == pytest.approx(truth["queue_s"] + truth["prefill_s"],
                                                       abs=loopback_tolerance())
        assert a[semconv.LLM_OUTPUT_GENERATION] == pytest.approx(
            truth["output_generation_s"], abs=loopback_tolerance())


class TestClientTail:
    """Time the program spends after the last byte arrived is its own, not the network's."""

    def test_pause_after_the_last_token_is_client_tail(self, otel, client):
        stream = client.chat.completions.create(
            model="sim-a", messages=MESSAGES, stream=True, max_tokens=8,
            stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.choices and chunk.choices[0].finish_reason:
                time.sleep(0.3)  # the usage chunk and [DONE] arrive meanwhile
        a = one_llm_span(otel).attributes
        assert a[semconv.LLM_CLIENT_TAIL] >= 0.25
        assert a[semconv.LLM_TAIL] < 0.05 + busy_slack()
        assert_phases_add_up(one_llm_span(otel))


class TestUninstrumented:
    """A client made while instrumented makes no spans after uninstrument() (its resources
    keep the bound low-level method they were made with)."""

    def test_no_span_after_uninstrument(self, otel, client):
        from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor

        client.chat.completions.create(model="sim-a", messages=MESSAGES, max_tokens=8)
        instrumentor = OpenAIInstrumentor()
        instrumentor.uninstrument()
        try:
            otel.exporter.clear()
            client.chat.completions.create(model="sim-a", messages=MESSAGES, max_tokens=8)
            assert [s for s in otel.spans() if semconv.LLM_CLIENT in s.attributes] == []
        finally:
            instrumentor.instrument()
