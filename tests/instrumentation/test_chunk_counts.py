"""A stream's chunk count is every chunk the program took (the role delta, the outputs, the
finish and usage chunks), on every hot path, whatever the endpoint's observer made of it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from llm_helpers import FAST, assert_phases_add_up, one_llm_span

from agent_latency import _log, semconv
from agent_latency.simulator import SimulatorProcess

MESSAGES = [{"role": "user", "content": "hi"}]
OUTPUT_TOKENS = 300  # past 256: the counts are no longer CPython's cached small integers


def _kwargs() -> dict[str, Any]:
    return {"model": "sim-a", "messages": MESSAGES, "stream": True,
            "max_tokens": OUTPUT_TOKENS, "stream_options": {"include_usage": True}}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorProcess]:
    """A server that writes ``OUTPUT_TOKENS`` tokens a stream."""
    with SimulatorProcess(FAST.replace(default_output_tokens=OUTPUT_TOKENS)) as server:
        yield server


def _outputs(chunks: list[Any]) -> int:
    return sum(1 for c in chunks if c.choices and c.choices[0].delta.content)


@pytest.fixture
def observer_fails() -> Iterator[None]:
    """Every chunk's observer raises (an odd chunk): the chunk is still handed over and
    counted, as output of nothing."""
    _log.FAULTS.add("llm.observe")
    yield
    _log.FAULTS.discard("llm.observe")


class TestSync:
    """A sync stream read to its end (the generator hot path)."""

    def test_counts(self, otel: Any, sim: Any) -> None:
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="x", max_retries=0)
        chunks = list(client.chat.completions.create(**_kwargs()))
        client.close()
        span = one_llm_span(otel)
        assert span.attributes[semconv.LLM_CHUNKS] == len(chunks)
        outputs = _outputs(chunks)
        assert outputs == OUTPUT_TOKENS and len(chunks) > outputs  # and the role, finish, usage
        per_chunk = span.attributes[semconv.LLM_TIME_PER_OUTPUT_CHUNK]
        assert per_chunk == pytest.approx(
            span.attributes[semconv.LLM_OUTPUT_GENERATION] / (outputs - 1))
        assert_phases_add_up(span)

    @pytest.mark.internal_errors
    def test_counts_when_the_observer_fails(self, otel: Any, sim: Any,
                                            observer_fails: None) -> None:
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="x", max_retries=0)
        chunks = list(client.chat.completions.create(**_kwargs()))
        client.close()
        assert _outputs(chunks) == OUTPUT_TOKENS
        assert one_llm_span(otel).attributes[semconv.LLM_CHUNKS] == len(chunks)


class TestAsync:
    """An async stream read to its end (the async hot path)."""

    def test_counts(self, otel: Any, sim: Any) -> None:
        async def main() -> list[Any]:
            client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="x",
                                        max_retries=0)
            chunks = [c async for c in await client.chat.completions.create(**_kwargs())]
            await client.close()
            return chunks

        chunks = asyncio.run(main())
        span = one_llm_span(otel)
        assert span.attributes[semconv.LLM_CHUNKS] == len(chunks)
        outputs = _outputs(chunks)
        assert span.attributes[semconv.LLM_TIME_PER_OUTPUT_CHUNK] == pytest.approx(
            span.attributes[semconv.LLM_OUTPUT_GENERATION] / (outputs - 1))


class TestLeftEarly:
    """A stream the program stops reading is counted up to the last chunk it took."""

    def test_break_past_256(self, otel: Any, sim: Any) -> None:
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="x", max_retries=0)
        taken = 0
        with client.chat.completions.create(**_kwargs()) as stream:
            for _ in stream:
                taken += 1
                if taken == 280:
                    break
        client.close()
        assert one_llm_span(otel).attributes[semconv.LLM_CHUNKS] == 280
