"""DSPy (in-process): tools are execute_tool spans, direct and in a ReAct program run
against the simulator."""

from __future__ import annotations

import os
import time

import pytest
from truth_log import served as served_truth

import agent_latency
from agent_latency import semconv

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the internet
dspy = pytest.importorskip("dspy")

from agent_latency.instrumentation.llm.litellm import LiteLLMInstrumentor  # noqa: E402
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor  # noqa: E402
from agent_latency.instrumentation.tools.dspy import DSPyInstrumentor  # noqa: E402
from agent_latency.simulator import Simulator, SimulatorConfig  # noqa: E402

TOOL_SECONDS = 0.2
# ReAct sends its trajectory in one user message, so every request is the simulator's
# first turn: one answer holds the sections of both of ReAct's signatures (the step's and
# the closing extraction's); each reads its own and ignores the rest.
ANSWER = ("[[ ## next_thought ## ]]\nLook it up.\n\n[[ ## next_tool_name ## ]]\nlookup\n\n"
          '[[ ## next_tool_args ## ]]\n{"key": "answer"}\n\n[[ ## reasoning ## ]]\n'
          "The lookup said 42.\n\n[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]")


@pytest.fixture(scope="module")
def sim():
    script = {"models": {"*": [{"content": ANSWER}]}}
    with Simulator(SimulatorConfig(script=script, output_tps=5000, prefill_tps=100000)) as s:
        yield s


@pytest.fixture
def dspy_otel(instrumented):
    return instrumented(OpenAIInstrumentor(), LiteLLMInstrumentor(), DSPyInstrumentor())


def lookup(key: str) -> str:
    """Look a key up."""
    time.sleep(TOOL_SECONDS)
    return f"{key} = 42"


def _tool_spans(otel, name: str = "lookup") -> list:
    return [s for s in otel.spans() if s.name == f"execute_tool {name}"]


class TestTools:
    """dspy.Tool calls, sync and async, are tool time; a failing tool's span is ERROR."""

    def test_call(self, dspy_otel):
        with agent_latency.task("t"):
            assert dspy.Tool(lookup)(key="answer") == "answer = 42"
        (span,) = _tool_spans(dspy_otel)
        assert span.attributes[semconv.GEN_AI_TOOL_TYPE] == "function"
        assert span.attributes[semconv.TOOL_SOURCE] == "dspy"
        task = dspy_otel.span("invoke_agent t").attributes
        assert task[semconv.budget_count("tool_calls")] == 1
        # The tool's span, however long a loaded machine made its sleep.
        seconds = (span.end_time - span.start_time) / 1e9
        assert task[semconv.budget_share(semconv.TOOL_EXECUTION)] == pytest.approx(
            seconds, abs=1e-6)
        assert seconds >= TOOL_SECONDS

    async def test_acall(self, dspy_otel):
        async def alookup(key: str) -> str:
            """Look a key up."""
            return key

        with agent_latency.task("t"):
            assert await dspy.Tool(alookup).acall(key="x") == "x"
        assert len(_tool_spans(dspy_otel, "alookup")) == 1

    def test_a_failing_tool(self, dspy_otel):
        def broken(key: str) -> str:
            """Fails."""
            raise KeyError(key)

        with pytest.raises(KeyError):
            dspy.Tool(broken)(key="x")
        (span,) = _tool_spans(dspy_otel, "broken")
        assert span.status.status_code.name == "ERROR"
        assert span.attributes[semconv.ERROR_TYPE] == "KeyError"


class TestReAct:
    """A ReAct program against the simulator: its tool step is one tool call of tool time,
    and each request the server served is one LLM call."""

    def test_react(self, dspy_otel, sim):
        lm = dspy.LM("openai/gpt-4o", api_base=sim.base_url + "/v1", api_key="sk-test",
                     cache=False, engine="litellm")
        served = len(sim.truth)
        with dspy.context(lm=lm), agent_latency.task("t"):
            result = dspy.ReAct("question -> answer", tools=[lookup], max_iters=1)(
                question="What is the answer?")
        assert result.answer == "42"
        (span,) = _tool_spans(dspy_otel)
        task = dspy_otel.span("invoke_agent t").attributes
        assert task[semconv.budget_count("tool_calls")] == 1
        assert task[semconv.budget_share(semconv.TOOL_EXECUTION)] == pytest.approx(
            (span.end_time - span.start_time) / 1e9, abs=1e-6)
        # DSPy validates the arguments against the tool's JSON schema inside the run.
        assert TOOL_SECONDS <= task[semconv.budget_share(semconv.TOOL_EXECUTION)] < 0.3
        # Waited for: the server logs a request just after its response, and on 3.12 on the
        # program was back first in about one run in five (seen as one request, not two).
        calls = len(served_truth(sim, served + 2)) - served
        assert task[semconv.budget_count("llm_calls")] == calls == 2
