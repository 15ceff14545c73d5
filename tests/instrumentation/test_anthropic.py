"""anthropic messages (and beta messages) against the simulator."""

from __future__ import annotations

import gc

import anthropic
import pytest
from llm_helpers import assert_phases_add_up, llm_spans, one_llm_span, truth_of

import agent_latency
from agent_latency import semconv

MESSAGES = [{"role": "user", "content": "explain " * 200}]


@pytest.fixture
def client(sim):
    c = anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test")
    yield c
    c.close()


@pytest.fixture
def aclient(sim):
    return anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="sk-ant-test")


def _check_stream(span, sim=None):
    a = span.attributes
    assert span.name == "chat sim-c"
    assert a[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert a[semconv.LLM_STREAMING] is True
    assert a[semconv.LLM_TIMING_SOURCE] == "measured"
    # message_start and content_block_start come before the first token: the first chunk
    # is never dated after it (one date when they land in one segment, both from the wire).
    assert a[semconv.LLM_TTFT] >= a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK]
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] > 100
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS]
    assert a[semconv.LLM_PREFILL] > 0
    assert_phases_add_up(span)
    if sim is not None:
        truth = truth_of(sim, a[semconv.LLM_SERVER_REQUEST_ID])
        assert truth["input_tokens"] == a[semconv.GEN_AI_USAGE_INPUT_TOKENS]


class TestMessages:
    def test_create_stream(self, otel, client, sim):
        with agent_latency.task("t"):
            for _ in client.messages.create(model="sim-c", max_tokens=8, messages=MESSAGES,
                                            stream=True):
                pass
        _check_stream(one_llm_span(otel), sim)
        task = otel.span("invoke_agent t")
        assert task.attributes[semconv.budget_count("llm_calls")] == 1

    def test_create(self, otel, client):
        message = client.messages.create(model="sim-c", max_tokens=8, messages=MESSAGES)
        assert message.content
        span = one_llm_span(otel)
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
        assert span.attributes[semconv.LLM_STREAMING] is False
        assert_phases_add_up(span)

    def test_stream_helper(self, otel, client):
        with client.messages.stream(model="sim-c", max_tokens=8, messages=MESSAGES) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert text and final.usage.output_tokens == 8
        _check_stream(one_llm_span(otel))

    def test_stream_helper_closed_early(self, otel, client):
        with client.messages.stream(model="sim-c", max_tokens=8, messages=MESSAGES) as stream:
            next(iter(stream))
        assert_phases_add_up(one_llm_span(otel))

    def test_stream_break_then_gc(self, otel, client):
        stream = client.messages.create(model="sim-c", max_tokens=8, messages=MESSAGES,
                                        stream=True)
        for _ in stream:
            break
        assert llm_spans(otel) == []
        del stream
        gc.collect()
        assert_phases_add_up(one_llm_span(otel))

    def test_beta_create_stream(self, otel, client):
        for _ in client.beta.messages.create(model="sim-c", max_tokens=8, messages=MESSAGES,
                                             stream=True):
            pass
        _check_stream(one_llm_span(otel))

    def test_beta_stream_helper(self, otel, client):
        with client.beta.messages.stream(model="sim-c", max_tokens=8,
                                         messages=MESSAGES) as stream:
            for _ in stream:
                pass
        _check_stream(one_llm_span(otel))

    def test_with_raw_response(self, otel, client):
        raw = client.messages.with_raw_response.create(model="sim-c", max_tokens=8,
                                                       messages=MESSAGES)
        assert raw.parse().content
        assert one_llm_span(otel).attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8

    # quiet: message_start and the first token in separate reads; a client late by a busy
    # machine reads them in one (make test runs it alone).
    @pytest.mark.quiet
    async def test_async_create_stream(self, otel, aclient):
        stream = await aclient.messages.create(model="sim-c", max_tokens=8, messages=MESSAGES,
                                               stream=True)
        async for _ in stream:
            pass
        _check_stream(one_llm_span(otel))

    @pytest.mark.quiet  # as test_async_create_stream
    async def test_async_stream_helper(self, otel, aclient):
        async with aclient.messages.stream(model="sim-c", max_tokens=8,
                                           messages=MESSAGES) as stream:
            async for _ in stream:
                pass
        _check_stream(one_llm_span(otel))

    async def test_async_create(self, otel, aclient):
        await aclient.messages.create(model="sim-c", max_tokens=8, messages=MESSAGES)
        assert_phases_add_up(one_llm_span(otel))

    def test_own_sdk_spans_not_counted_twice(self, otel, client):
        with agent_latency.task("t"):
            client.messages.create(model="sim-c", max_tokens=8, messages=MESSAGES)
        task = otel.span("invoke_agent t")
        assert task.attributes[semconv.budget_count("llm_calls")] == 1


class TestRefusedBeforeSending:
    """A request the SDK refuses before any HTTP attempt (anthropic's "Streaming is required"
    — "… strongly recommended" before 1.0 — for a non-streamed max_tokens over ~21,000) is no
    LLM call: an error span with no attempts and no phases, counted nowhere, its time the
    client's."""

    def test_no_llm_call_no_round_trip(self, otel, client, sim):
        served = len(sim.truth)
        with agent_latency.task("t"):
            with pytest.raises(ValueError, match="Streaming is"):
                client.messages.create(model="sim-c", max_tokens=64000, messages=MESSAGES)
        assert llm_spans(otel) == []
        (span,) = [s for s in otel.spans() if s.name == "chat sim-c"]
        a = span.attributes
        assert a[semconv.LLM_ATTEMPTS] == 0
        assert a[semconv.ERROR_TYPE] == "ValueError"
        assert span.status.status_code.name == "ERROR"
        assert not any(attr in a for attr, _, _ in semconv.LLM_PHASES)
        task = otel.span("invoke_agent t").attributes
        for count in ("llm_calls", "http_round_trips", "round_trips"):
            assert task[semconv.budget_count(count)] == 0, count
        assert task[semconv.budget_share(semconv.PREFILL)] == 0
        assert task[semconv.budget_share(semconv.OTHER)] == task[semconv.BUDGET_WALL]
        assert len(sim.truth) == served  # the server saw nothing

    async def test_async_then_streamed_is_one_call(self, otel, aclient, sim):
        """What pydantic-ai does: the refused request, then the same one streamed."""
        with agent_latency.task("t"):
            with pytest.raises(ValueError, match="Streaming is"):
                await aclient.messages.create(model="sim-c", max_tokens=64000,
                                              messages=MESSAGES)
            async for _ in await aclient.messages.create(
                    model="sim-c", max_tokens=64000, messages=MESSAGES, stream=True):
                pass
        assert len(llm_spans(otel)) == 1
        task = otel.span("invoke_agent t").attributes
        assert task[semconv.budget_count("llm_calls")] == 1
        assert task[semconv.budget_count("http_round_trips")] == 1


class TestMoreWays:
    """Anthropic paths beyond create/stream: parse, streaming responses, content capture."""

    def test_with_streaming_response(self, otel, client):
        with client.messages.with_streaming_response.create(
                model="sim-c", max_tokens=8, messages=MESSAGES, stream=True) as response:
            lines = list(response.iter_lines())
        assert any("message_stop" in line for line in lines)
        span = one_llm_span(otel)
        assert_phases_add_up(span)
        assert span.attributes[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"

    def test_parse_if_the_sdk_has_it(self, otel, client):
        parse = getattr(client.messages, "parse", None)
        if parse is None:
            pytest.skip("this anthropic release has no messages.parse()")
        parse(model="sim-c", max_tokens=8, messages=MESSAGES)
        assert_phases_add_up(one_llm_span(otel))

    @pytest.mark.parametrize("stream", [False, True])
    def test_content_capture_opt_in(self, otel, client, setenv, stream):
        import json

        setenv(semconv.ENV_CAPTURE_MESSAGE_CONTENT, "SPAN_ONLY")
        if stream:
            with client.messages.stream(model="sim-c", max_tokens=8,
                                        messages=MESSAGES) as s:
                text = "".join(s.text_stream)
        else:
            text = client.messages.create(model="sim-c", max_tokens=8,
                                          messages=MESSAGES).content[0].text
        attrs = one_llm_span(otel).attributes
        assert json.loads(attrs[semconv.GEN_AI_INPUT_MESSAGES])[0]["role"] == "user"
        output = json.loads(attrs[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert output[0]["parts"][0]["content"] == text

    def test_no_content_by_default(self, otel, client, setenv):
        setenv(semconv.ENV_CAPTURE_MESSAGE_CONTENT, None)
        client.messages.create(model="sim-c", max_tokens=8, messages=MESSAGES)
        attrs = one_llm_span(otel).attributes
        assert semconv.GEN_AI_INPUT_MESSAGES not in attrs
        assert semconv.GEN_AI_OUTPUT_MESSAGES not in attrs
