"""openai Responses and embeddings against the simulator."""

from __future__ import annotations

import openai
import pytest
from llm_helpers import assert_phases_add_up, one_llm_span

from agent_latency import semconv

INPUT = "write something " * 100


@pytest.fixture
def client(sim):
    c = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
    yield c
    c.close()


@pytest.fixture
def aclient(sim):
    return openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")


def _check_stream(span):
    a = span.attributes
    assert span.name == "chat sim-r"
    assert a[semconv.LLM_STREAMING] is True
    assert a[semconv.LLM_TIMING_SOURCE] == "measured"
    # response.created / in_progress / output_item.added come before the first token: the
    # first chunk is never dated after it (one date when they land in one segment).
    assert a[semconv.LLM_TTFT] >= a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] > 50
    assert a[semconv.GEN_AI_RESPONSE_MODEL]
    assert a[semconv.LLM_OUTPUT_GENERATION] > 0
    assert_phases_add_up(span)


class TestResponses:
    def test_create_stream(self, otel, client):
        events = list(client.responses.create(model="sim-r", input=INPUT, stream=True,
                                              max_output_tokens=8))
        assert events[-1].type == "response.completed"
        _check_stream(one_llm_span(otel))

    def test_create(self, otel, client):
        result = client.responses.create(model="sim-r", input=INPUT, max_output_tokens=8)
        assert result.output_text
        span = one_llm_span(otel)
        assert span.attributes[semconv.LLM_STREAMING] is False
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
        assert span.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS]
        assert_phases_add_up(span)

    def test_stream_helper(self, otel, client):
        with client.responses.stream(model="sim-r", input=INPUT,
                                     max_output_tokens=8) as stream:
            for _ in stream:
                pass
            final = stream.get_final_response()
        assert final.output_text
        _check_stream(one_llm_span(otel))

    def test_parse(self, otel, client):
        try:
            client.responses.parse(model="sim-r", input=INPUT, max_output_tokens=8)
        except Exception:  # noqa: BLE001 - parse needs text_format only to validate
            pass
        assert_phases_add_up(one_llm_span(otel))

    def test_with_raw_response(self, otel, client):
        raw = client.responses.with_raw_response.create(model="sim-r", input=INPUT,
                                                        max_output_tokens=8)
        assert raw.parse().output_text
        assert one_llm_span(otel).attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8

    def test_with_streaming_response(self, otel, client):
        with client.responses.with_streaming_response.create(
                model="sim-r", input=INPUT, stream=True, max_output_tokens=8) as response:
            for _ in response.parse():
                pass
        _check_stream(one_llm_span(otel))

    async def test_async_stream(self, otel, aclient):
        stream = await aclient.responses.create(model="sim-r", input=INPUT, stream=True,
                                                max_output_tokens=8)
        async for _ in stream:
            pass
        _check_stream(one_llm_span(otel))

    async def test_async_stream_helper(self, otel, aclient):
        async with aclient.responses.stream(model="sim-r", input=INPUT,
                                            max_output_tokens=8) as stream:
            async for _ in stream:
                pass
        _check_stream(one_llm_span(otel))

    async def test_async_create(self, otel, aclient):
        await aclient.responses.create(model="sim-r", input=INPUT, max_output_tokens=8)
        assert_phases_add_up(one_llm_span(otel))


class TestEmbeddings:
    def test_create(self, otel, client):
        result = client.embeddings.create(model="sim-e", input=["a b c"] * 10)
        assert result.data
        span = one_llm_span(otel)
        assert span.name == "embeddings sim-e"
        assert span.attributes[semconv.GEN_AI_OPERATION_NAME] == "embeddings"
        assert span.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] > 0
        assert_phases_add_up(span)

    async def test_async_create(self, otel, aclient):
        await aclient.embeddings.create(model="sim-e", input="hello")
        assert_phases_add_up(one_llm_span(otel))


class TestContentCapture:
    """Responses content goes on the span only when the user opts in."""

    @pytest.mark.parametrize("stream", [False, True])
    def test_opt_in(self, otel, client, setenv, stream):
        import json

        setenv(semconv.ENV_CAPTURE_MESSAGE_CONTENT, "true")
        if stream:
            events = client.responses.create(model="sim-r", input=INPUT, stream=True)
            text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        else:
            text = client.responses.create(model="sim-r", input=INPUT).output_text
        attrs = one_llm_span(otel).attributes
        assert INPUT.strip()[:20] in attrs[semconv.GEN_AI_INPUT_MESSAGES]
        output = json.loads(attrs[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert output[0]["parts"][0]["content"] == text

    def test_off_by_default(self, otel, client, setenv):
        setenv(semconv.ENV_CAPTURE_MESSAGE_CONTENT, None)
        client.responses.create(model="sim-r", input=INPUT)
        attrs = one_llm_span(otel).attributes
        assert semconv.GEN_AI_INPUT_MESSAGES not in attrs
