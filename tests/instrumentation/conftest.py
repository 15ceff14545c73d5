"""Fixtures for the LLM instrumentation tests: instrumented SDKs and a simulator."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from llm_helpers import FAST

from agent_latency.instrumentation.llm import _rates
from agent_latency.instrumentation.llm.anthropic import AnthropicInstrumentor
from agent_latency.instrumentation.httpx import HttpxInstrumentor
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
from agent_latency.simulator import Simulator


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentors = [HttpxInstrumentor(), OpenAIInstrumentor(), AnthropicInstrumentor()]
    for i in instrumentors:
        i.instrument()
    yield
    for i in reversed(instrumentors):
        i.uninstrument()


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(FAST) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_rates() -> Iterator[None]:
    _rates.clear()
    yield
    gc.collect()
