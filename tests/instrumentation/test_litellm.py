"""litellm against the simulator: OpenAI, OpenAI-compatible and Anthropic providers, streaming
and not, sync and async — one span per model request, never two with the openai SDK's."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest
from llm_helpers import assert_phases_add_up, loopback_tolerance, one_llm_span, truth_of

import agent_latency
from agent_latency import semconv

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the internet
litellm = pytest.importorskip("litellm")

from agent_latency.instrumentation.llm.litellm import LiteLLMInstrumentor  # noqa: E402

MESSAGES = [{"role": "user", "content": "hello " * 200}]


@pytest.fixture(scope="module", autouse=True)
def litellm_instrumented(sim) -> Iterator[None]:
    instrumentor = LiteLLMInstrumentor()
    instrumentor.instrument()
    # litellm imports and builds schemas on its first streamed chunk of each provider (tens
    # of milliseconds of client CPU before the first token reaches the program): warm up.
    async def warm_async(provider: str) -> None:
        async for _ in await litellm.acompletion(**_kwargs(sim, provider, stream=True)):
            pass

    for provider in PROVIDERS:
        list(litellm.completion(**_kwargs(sim, provider, stream=True)))
        asyncio.run(warm_async(provider))
    yield
    instrumentor.uninstrument()


# (litellm model, api base for the simulator, provider on the span, model on the span)
PROVIDERS = {
    "openai": ("openai/sim-a", "/v1", "openai", "sim-a"),
    "hosted_vllm": ("hosted_vllm/sim-v", "/v1", "hosted_vllm", "sim-v"),
    "anthropic": ("anthropic/sim-c", "", "anthropic", "sim-c"),
}


def _kwargs(sim, provider: str, **extra):
    model, suffix, _, _ = PROVIDERS[provider]
    return {"model": model, "api_base": sim.base_url + suffix, "api_key": "sk-test",
            "messages": MESSAGES, "max_tokens": 8, **extra}


def _check(span, sim, provider: str, *, streamed: bool) -> None:
    _, _, name, model = PROVIDERS[provider]
    a = span.attributes
    assert span.name == f"chat {model}"
    assert a[semconv.GEN_AI_PROVIDER_NAME] == name
    assert a[semconv.GEN_AI_REQUEST_STREAM] is streamed
    assert a[semconv.SERVER_ADDRESS] == "127.0.0.1"
    assert_phases_add_up(span)
    truth = truth_of(sim, a[semconv.LLM_SERVER_REQUEST_ID])
    assert truth["input_tokens"] == a[semconv.GEN_AI_USAGE_INPUT_TOKENS]
    if streamed:
        assert a[semconv.LLM_TIMING_SOURCE] == "measured"
        assert a[semconv.LLM_TTFT] > 0
        # Loopback: the measured phases are the truth but for scheduling delays on a busy
        # machine (benchmarks/bench_llm_accuracy.py prints the figures on a quiet one).
        assert a[semconv.LLM_PREFILL] == pytest.approx(truth["queue_s"] + truth["prefill_s"],
                                                       abs=loopback_tolerance())
        assert a[semconv.LLM_OUTPUT_GENERATION] == pytest.approx(
            truth["output_generation_s"], abs=loopback_tolerance())


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
class TestCompletion:
    """litellm.completion / acompletion: one span per request, with phases and the truth."""

    def test_stream(self, otel, sim, provider):
        with agent_latency.task("t"):
            chunks = list(litellm.completion(**_kwargs(
                sim, provider, stream=True, stream_options={"include_usage": True})))
        assert chunks
        span = one_llm_span(otel)
        _check(span, sim, provider, streamed=True)
        # (read through litellm's wrapper, an iterator class: the slots hot path)
        assert span.attributes[semconv.LLM_CHUNKS] == len(chunks)
        task = otel.span("invoke_agent t")
        assert task.attributes[semconv.budget_count("llm_calls")] == 1

    def test_non_streaming(self, otel, sim, provider):
        response = litellm.completion(**_kwargs(sim, provider))
        assert response.choices[0].message.content
        span = one_llm_span(otel)
        _check(span, sim, provider, streamed=False)
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8

    def test_async_stream(self, otel, sim, provider):
        async def main():
            stream = await litellm.acompletion(**_kwargs(
                sim, provider, stream=True, stream_options={"include_usage": True}))
            return [chunk async for chunk in stream]

        assert asyncio.run(main())
        _check(one_llm_span(otel), sim, provider, streamed=True)

    def test_async_non_streaming(self, otel, sim, provider):
        response = asyncio.run(litellm.acompletion(**_kwargs(sim, provider)))
        assert response.choices[0].message.content
        _check(one_llm_span(otel), sim, provider, streamed=False)


class TestContext:
    """The request carries the call's traceparent; nothing leaks into the program."""

    def test_traceparent_reaches_the_server(self, otel, sim):
        list(litellm.completion(**_kwargs(sim, "anthropic", stream=True)))
        span = one_llm_span(otel)
        truth = truth_of(sim, span.attributes[semconv.LLM_SERVER_REQUEST_ID])
        trace_id = format(span.context.trace_id, "032x")
        assert truth["traceparent"].split("-")[1] == trace_id

    def test_positional_model_and_messages(self, otel, sim):
        litellm.completion("openai/sim-a", MESSAGES, api_base=sim.base_url + "/v1",
                           api_key="sk-test", max_tokens=8)
        assert one_llm_span(otel).name == "chat sim-a"


class TestOtherEntryPoints:
    """litellm's Router and Responses API are one span per model request too."""

    def test_router_completion(self, otel, sim):
        router = litellm.Router(model_list=[{
            "model_name": "fast", "litellm_params": {
                "model": "openai/sim-a", "api_base": sim.base_url + "/v1",
                "api_key": "sk-test"}}])
        router.completion(model="fast", messages=MESSAGES, max_tokens=8)
        span = one_llm_span(otel)
        assert span.name == "chat sim-a"
        assert_phases_add_up(span)

    def test_router_async_stream(self, otel, sim):
        router = litellm.Router(model_list=[{
            "model_name": "fast", "litellm_params": {
                "model": "openai/sim-a", "api_base": sim.base_url + "/v1",
                "api_key": "sk-test"}}])

        async def main():
            stream = await router.acompletion(model="fast", messages=MESSAGES, max_tokens=8,
                                              stream=True)
            return [chunk async for chunk in stream]

        assert asyncio.run(main())
        span = one_llm_span(otel)
        assert span.attributes[semconv.LLM_TTFT] > 0
        assert_phases_add_up(span)

    def test_responses_stream(self, otel, sim):
        events = list(litellm.responses(model="openai/sim-r", input="hello " * 50,
                                        api_base=sim.base_url + "/v1", api_key="sk-test",
                                        max_output_tokens=8, stream=True))
        assert events
        span = one_llm_span(otel)
        assert span.name == "chat sim-r"
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
        assert span.attributes[semconv.LLM_TTFT] > 0
        assert_phases_add_up(span)

    def test_embedding(self, otel, sim):
        litellm.embedding(model="openai/sim-e", input=["hello"],
                          api_base=sim.base_url + "/v1", api_key="sk-test")
        span = one_llm_span(otel)
        assert span.name == "embeddings sim-e"
        assert_phases_add_up(span)
