"""The metrics the dashboards and alerts need beyond the first ones (issue 10)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest

import agent_latency
from agent_latency import semconv
from agent_latency.instrumentation.httpx import HttpxInstrumentor
from agent_latency.instrumentation.llm import _rates
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
from agent_latency.simulator import Simulator, SimulatorConfig

MESSAGES = [{"role": "user", "content": "hello " * 400}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig(prefill_tps=5000.0, output_tps=1000.0,
                                   default_output_tokens=8)) as server:
        yield server


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentors = [HttpxInstrumentor(), OpenAIInstrumentor()]
    for i in instrumentors:
        i.instrument()
    yield
    for i in reversed(instrumentors):
        i.uninstrument()
    _rates.clear()


def _stream(sim: Simulator) -> None:
    with openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test") as client:
        list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                            stream_options={"include_usage": True}))


class TestPrefillTokensPerSecond:
    """A measured stream records its prefill speed once, by provider and model."""

    def test_one_point_per_streamed_call(self, otel, sim):
        _stream(sim)
        points = otel.metric_points(semconv.METRIC_LLM_PREFILL_TOKENS_PER_SECOND)
        assert len(points) == 1 and points[0].count == 1
        point = points[0]
        assert point.attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
        assert point.attributes[semconv.GEN_AI_REQUEST_MODEL] == "m"
        assert list(point.explicit_bounds) == list(semconv.PREFILL_TOKENS_PER_SECOND_BUCKETS)
        # ~400 input tokens at 5000 tokens/s: the client sees the server's rate or less
        # (the round trip is taken out, queueing is not).
        assert 500 < point.sum <= 5000 * 1.2

    def test_non_streaming_call_records_none(self, otel, sim):
        with openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test") as client:
            client.chat.completions.create(model="m", messages=MESSAGES)
        assert otel.metric_points(semconv.METRIC_LLM_PREFILL_TOKENS_PER_SECOND) == []


class TestTaskNewConnections:
    """Each finished task records how many connections it opened."""

    def test_a_fresh_client_opens_one(self, otel, sim):
        with agent_latency.task("t"):
            _stream(sim)
        with agent_latency.task("idle"):
            pass
        points = otel.metric_points(semconv.METRIC_TASK_NEW_CONNECTIONS)
        assert len(points) == 1
        assert points[0].count == 2 and points[0].sum == 1
        assert list(points[0].explicit_bounds) == list(semconv.COUNT_BUCKETS)


class TestToolDuration:
    """Each outermost tool call inside a task records its duration by tool name."""

    def test_by_tool_name_nested_tools_once(self, otel):
        with agent_latency.task("t"):
            with agent_latency.tool("pytest"):
                time.sleep(0.02)
                with agent_latency.tool("inner"):
                    pass
            with agent_latency.tool("ruff"):
                pass
        points = {p.attributes[semconv.GEN_AI_TOOL_NAME]: p
                  for p in otel.metric_points(semconv.METRIC_TOOL_DURATION)}
        assert set(points) == {"pytest", "ruff"}
        assert points["pytest"].count == 1
        assert points["pytest"].sum == pytest.approx(0.02, abs=0.05)
        assert points["pytest"].sum >= 0.02

    def test_tools_outside_tasks_are_not_recorded(self, otel):
        with agent_latency.tool("alone"):
            pass
        assert otel.metric_points(semconv.METRIC_TOOL_DURATION) == []
