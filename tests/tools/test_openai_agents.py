"""OpenAI Agents SDK: runs are tasks, function tools are execute_tool spans (in-process)."""

from __future__ import annotations

import subprocess

import pytest

from agent_latency import semconv

agents = pytest.importorskip("agents")
from agents import Agent, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.models.openai_responses import OpenAIResponsesModel  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from agent_latency.instrumentation.tools.openai_agents import OpenAIAgentsInstrumentor  # noqa: E402
from agent_latency.instrumentation.tools.subprocess import SubprocessInstrumentor  # noqa: E402
from agent_latency.simulator import Simulator, SimulatorConfig  # noqa: E402

SCRIPT = {"models": {"*": [
    {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo hi"}}]},
    {"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 0.1"}}]},
    {"content": "done", "output_tokens": 5},
]}}


@pytest.fixture(scope="module")
def sim():
    set_tracing_disabled(True)
    with Simulator(SimulatorConfig(script=SCRIPT, output_tps=2000, prefill_tps=50000)) as s:
        yield s


@pytest.fixture
def agents_otel(otel):
    instrumentors = [SubprocessInstrumentor(), OpenAIAgentsInstrumentor()]
    for i in instrumentors:
        i.instrument()
    yield otel
    for i in reversed(instrumentors):
        i.uninstrument()


@function_tool
def run_shell(command: str) -> str:
    """Run a shell command."""
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout


def _agent(sim) -> Agent:
    client = AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
    return Agent(name="coder", tools=[run_shell],
                 model=OpenAIResponsesModel(model="gpt-4o", openai_client=client))


def _check(otel) -> None:
    tasks = [s for s in otel.spans() if s.name.startswith("invoke_agent")]
    assert [t.name for t in tasks] == ["invoke_agent coder"]  # one task, not one per layer
    task = tasks[0]
    tools = [s for s in otel.spans() if s.name == "execute_tool run_shell"]
    assert len(tools) == 2
    for t in tools:
        assert t.parent.span_id == task.context.span_id
        assert t.attributes[semconv.GEN_AI_TOOL_TYPE] == "function"
        assert t.attributes[semconv.GEN_AI_TOOL_CALL_ID]
        assert t.attributes[semconv.COMPONENT] == semconv.TOOL_EXECUTION
    procs = [s for s in otel.spans() if s.attributes.get(semconv.TOOL_SOURCE) == "subprocess"
             and s.attributes[semconv.GEN_AI_TOOL_NAME] in {"echo", "sleep"}]
    assert {p.parent.span_id for p in procs} == {t.context.span_id for t in tools}
    a = task.attributes
    # One call per function tool: its process runs inside it (+ the SDK's own `uname -p`,
    # once per process, outside any tool).
    assert len(tools) <= a[semconv.budget_count("tool_calls")] <= len(tools) + 1
    assert a[semconv.budget_share(semconv.TOOL_EXECUTION)] >= 0.1
    assert sum(a[semconv.budget_share(c)] for c in semconv.COMPONENTS) == pytest.approx(
        a[semconv.BUDGET_WALL], abs=1e-9)


def test_run_sync(agents_otel, sim):
    result = Runner.run_sync(_agent(sim), "go")
    assert result.final_output.startswith("done")
    _check(agents_otel)


async def test_run(agents_otel, sim):
    result = await Runner.run(_agent(sim), "go")
    assert result.final_output.startswith("done")
    _check(agents_otel)


async def test_run_streamed_task_ends_with_the_stream(agents_otel, sim):
    result = Runner.run_streamed(_agent(sim), "go")
    assert not [s for s in agents_otel.spans() if s.name.startswith("invoke_agent")]
    async for _ in result.stream_events():
        pass
    await result.run_loop_task if getattr(result, "run_loop_task", None) else None
    assert result.final_output.startswith("done")
    _check(agents_otel)


def test_uninstrument(otel):
    from agents import run as run_mod

    original = run_mod.AgentRunner.run
    i = OpenAIAgentsInstrumentor()
    i.instrument()
    assert run_mod.AgentRunner.run is not original
    i.uninstrument()
    assert run_mod.AgentRunner.run is original
    from agents import tool as tool_mod
    from agents.run_internal import tool_execution

    assert tool_execution._invoke_function_tool_with_metadata is \
        tool_mod._invoke_function_tool_with_metadata
