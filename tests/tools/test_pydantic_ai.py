"""pydantic-ai (in-process, against the simulator): function tools are execute_tool spans,
one LLM call per request the server served, streamed and not, OpenAI and Anthropic."""

from __future__ import annotations

import sys
import time

import pytest
from machine_load import busy_slack
from truth_log import served as served_truth

import agent_latency
from agent_latency import semconv

pydantic_ai = pytest.importorskip("pydantic_ai")
from pydantic_ai import Agent, ModelRetry  # noqa: E402
from pydantic_ai.capabilities.instrumentation import Instrumentation  # noqa: E402
from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from agent_latency.instrumentation.llm.anthropic import AnthropicInstrumentor  # noqa: E402
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor  # noqa: E402
from agent_latency.instrumentation.tools.pydantic_ai import PydanticAIInstrumentor  # noqa: E402
from agent_latency.simulator import Simulator, SimulatorConfig  # noqa: E402

SCRIPT = {"models": {"*": [
    {"tool_calls": [{"name": "lookup", "arguments": {"key": "answer"}}]},
    {"content": "The answer is 42.", "output_tokens": 8},
]}}
TOOL_SECONDS = 0.2


@pytest.fixture(scope="module")
def sim():
    with Simulator(SimulatorConfig(script=SCRIPT, output_tps=2000, prefill_tps=50000)) as s:
        yield s


@pytest.fixture
def pyd_otel(instrumented):
    return instrumented(OpenAIInstrumentor(), AnthropicInstrumentor(), PydanticAIInstrumentor())


RAN: list[float] = []  # each lookup's own run time


def lookup(key: str) -> str:
    """Look a key up."""
    start = time.perf_counter()
    time.sleep(TOOL_SECONDS)
    RAN.append(time.perf_counter() - start)
    return f"{key} = 42"


def _model(sim, provider: str):
    if provider == "anthropic":
        # The model's default max_tokens (64000) is more than the anthropic SDK allows
        # without streaming: pydantic-ai's request is refused, then sent as a stream.
        return AnthropicModel("claude-sonnet-4-5", provider=AnthropicProvider(
            base_url=sim.base_url, api_key="sk-ant-test"))
    return OpenAIChatModel("gpt-4o", provider=OpenAIProvider(
        base_url=sim.base_url + "/v1", api_key="sk-test"))


async def _run(agent: Agent, stream: bool) -> str:
    if stream:
        async with agent.run_stream("What is the answer?") as result:
            return await result.get_output()
    return (await agent.run("What is the answer?")).output


def _llm_calls(otel) -> list:
    return [s for s in otel.spans() if semconv.LLM_CLIENT in (s.attributes or {})]


# pydantic-ai-slim 2.54, the newest on Python 3.10, calls anthropic 2.x's BetaMessageParam,
# which is a Union there: a TypeError in pydantic-ai's own code, before any request.
OLD_ANTHROPIC = pytest.mark.skipif(sys.version_info < (3, 11),
                                   reason="pydantic-ai on Python 3.10 cannot build Anthropic "
                                          "requests with anthropic 2.x")


class TestFunctionTools:
    """A function tool run is one execute_tool span: name, call id, tool time."""

    @pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
    @pytest.mark.parametrize("provider", ["openai", pytest.param("anthropic", marks=OLD_ANTHROPIC)])
    async def test_tool_time_and_one_llm_call_per_request(self, pyd_otel, sim, provider,
                                                           stream):
        served = len(sim.truth)
        RAN.clear()
        with agent_latency.task("t"):
            output = await _run(Agent(_model(sim, provider), tools=[lookup]), stream)
        assert "42" in output
        requests = len(served_truth(sim, served + 2)) - served
        assert requests == 2
        (tool,) = [s for s in pyd_otel.spans() if s.name == "execute_tool lookup"]
        a = tool.attributes
        assert a[semconv.GEN_AI_TOOL_TYPE] == "function"
        assert a[semconv.TOOL_SOURCE] == "pydantic_ai"
        assert a[semconv.GEN_AI_TOOL_CALL_ID]
        task = pyd_otel.span("invoke_agent t").attributes
        assert task[semconv.budget_count("tool_calls")] == 1
        share = task[semconv.budget_share(semconv.TOOL_EXECUTION)]
        assert share == pytest.approx((tool.end_time - tool.start_time) / 1e9, abs=1e-6)
        # The span holds the tool's code and pydantic-ai's work around it (argument
        # validation, a worker thread): 10 ms at most here on a quiet machine
        # (tests/acceptance/test_function_tools.py holds it to that), more under load.
        (ran,) = RAN
        assert ran <= share < ran + 0.05 + busy_slack()
        assert len(_llm_calls(pyd_otel)) == requests
        assert task[semconv.budget_count("llm_calls")] == requests
        assert task[semconv.budget_count("http_round_trips")] == requests

    async def test_a_tool_asking_for_a_retry_is_an_error_span(self, pyd_otel, sim):
        def lookup(key: str) -> str:
            """Look a key up."""
            raise ModelRetry("try again")

        with agent_latency.task("t"):
            await Agent(_model(sim, "openai"), tools=[lookup]).run("What is the answer?")
        (span,) = [s for s in pyd_otel.spans() if s.name == "execute_tool lookup"]
        assert span.status.status_code.name == "ERROR"
        assert span.attributes[semconv.ERROR_TYPE] == "ModelRetry"
        task = pyd_otel.span("invoke_agent t").attributes
        assert task[semconv.budget_count("tool_calls")] == 1

    async def test_with_pydantic_ais_own_instrumentation_counted_once(self, pyd_otel, sim):
        """pydantic-ai's own execute_tool span is around ours: the outermost counts."""
        with agent_latency.task("t"):
            agent = Agent(_model(sim, "openai"), tools=[lookup],
                          capabilities=[Instrumentation()])
            await agent.run("What is the answer?")
        tools = [s for s in pyd_otel.spans()
                 if (s.attributes or {}).get(semconv.GEN_AI_OPERATION_NAME) == "execute_tool"]
        assert len(tools) == 2
        ours = next(s for s in tools if semconv.TOOL_SOURCE in s.attributes)
        theirs = next(s for s in tools if s is not ours)
        assert ours.parent.span_id == theirs.context.span_id
        task = pyd_otel.span("invoke_agent t").attributes
        assert task[semconv.budget_count("tool_calls")] == 1
        assert task[semconv.budget_share(semconv.TOOL_EXECUTION)] == pytest.approx(
            (theirs.end_time - theirs.start_time) / 1e9, abs=1e-6)

    async def test_uninstrumented_makes_no_tool_span(self, otel, sim):
        instrumentor = PydanticAIInstrumentor()
        instrumentor.instrument()
        instrumentor.uninstrument()
        await Agent(_model(sim, "openai"), tools=[lookup]).run("What is the answer?")
        assert not [s for s in otel.spans() if s.name.startswith("execute_tool")]
