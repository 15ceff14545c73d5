"""Fixtures for the LLM instrumentation tests: instrumented SDKs and a simulator."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from llm_helpers import FAST

from agent_latency.instrumentation.httpx import HttpxInstrumentor
from agent_latency.instrumentation.llm import _rates
from agent_latency.instrumentation.llm.anthropic import AnthropicInstrumentor
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
from agent_latency.simulator import SimulatorProcess


def _instrumentors() -> list[Any]:
    return [HttpxInstrumentor(), OpenAIInstrumentor(), AnthropicInstrumentor()]


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentors = _instrumentors()
    for i in instrumentors:
        i.instrument()
    yield
    for i in reversed(instrumentors):
        i.uninstrument()


def _reinstrument() -> None:
    instrumentors = _instrumentors()  # BaseInstrumentor is a singleton per class
    for i in reversed(instrumentors):
        i.uninstrument()
    for i in instrumentors:
        i.instrument()


@pytest.fixture
def setenv(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, str | None], None]]:
    """Set (or, with None, delete) an environment variable and instrument again: settings
    are read at instrument time.  Undone, and instrumented again, after the test."""

    def set_and_reinstrument(name: str, value: str | None) -> None:
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
        _reinstrument()

    yield set_and_reinstrument
    monkeypatch.undo()
    _reinstrument()


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorProcess]:
    # A server in its own process: one in this process would share the client's GIL, and a
    # client busy parsing would make it write its tokens in bursts (which the wire, dated
    # from the kernel, then rightly shows).
    with SimulatorProcess(FAST) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_rates() -> Iterator[None]:
    _rates.clear()
    yield
    # A stream the test dropped ends (its finalizer runs) before the next test starts.  What
    # survives is frozen: every later collection walks only what was made after it, not the
    # SDKs' import-time heap again (~570,000 objects: 0.3 s a collection on an idle
    # machine, 0.8 s beside the suite's other worker, once per test).
    gc.collect()
    gc.freeze()
