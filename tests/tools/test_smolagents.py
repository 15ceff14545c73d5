"""smolagents: runs are tasks, tools are execute_tool spans (in-process, against the simulator)."""

from __future__ import annotations

import subprocess

import pytest
from opentelemetry.trace import StatusCode

import agent_latency
from agent_latency import semconv

smolagents = pytest.importorskip("smolagents")
from smolagents import CodeAgent, OpenAIServerModel, ToolCallingAgent, tool  # noqa: E402

from agent_latency._scope import in_task  # noqa: E402
from agent_latency.instrumentation.tools.smolagents import SmolagentsInstrumentor  # noqa: E402
from agent_latency.instrumentation.tools.subprocess import SubprocessInstrumentor  # noqa: E402
from agent_latency.simulator import Simulator, SimulatorConfig  # noqa: E402

TOOL_CALLING = [
    {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo hi"}}]},
    {"tool_calls": [{"name": "run_shell", "arguments": {"command": "sleep 0.1"}}]},
    {"tool_calls": [{"name": "final_answer", "arguments": {"answer": "done"}}]},
]
CODE = [{"content": "Thought: run it.\n<code>\nout = run_shell(command='echo hi')\n"
                    "final_answer(out)\n</code>"}]


@pytest.fixture(scope="module")
def sim():
    script = {"models": {"tool-calling": TOOL_CALLING, "code": CODE}}
    with Simulator(SimulatorConfig(script=script, output_tps=5000, prefill_tps=50000)) as s:
        yield s


@pytest.fixture
def smol_otel(otel):
    instrumentors = [SubprocessInstrumentor(), SmolagentsInstrumentor()]
    for i in instrumentors:
        i.instrument()
    yield otel
    for i in reversed(instrumentors):
        i.uninstrument()


@tool
def run_shell(command: str) -> str:
    """Run a shell command.

    Args:
        command: the command line
    """
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout


def _model(sim, model_id: str) -> OpenAIServerModel:
    return OpenAIServerModel(model_id=model_id, api_base=sim.base_url + "/v1", api_key="sk-x")


def _coder(sim) -> ToolCallingAgent:
    return ToolCallingAgent(tools=[run_shell], model=_model(sim, "tool-calling"), name="coder",
                            verbosity_level=0)


def _task(otel):
    tasks = [s for s in otel.spans() if s.name.startswith("invoke_agent")]
    assert len(tasks) == 1, [t.name for t in tasks]
    return tasks[0]


def _check_tool_calling_run(otel) -> None:
    task = _task(otel)
    assert task.name == "invoke_agent coder"
    tools = [s for s in otel.spans() if s.attributes.get(semconv.TOOL_SOURCE) == "smolagents"]
    assert [s.name for s in tools] == ["execute_tool run_shell", "execute_tool run_shell",
                                       "execute_tool final_answer"]
    for span in tools:
        assert span.parent.span_id == task.context.span_id
        assert span.attributes[semconv.GEN_AI_TOOL_TYPE] == "function"
        assert span.attributes[semconv.COMPONENT] == semconv.TOOL_EXECUTION
    procs = [s for s in otel.spans() if s.attributes.get(semconv.GEN_AI_TOOL_NAME) in {
        "echo", "sleep"}]
    assert [p.parent.span_id for p in procs] == [t.context.span_id for t in tools[:2]]
    a = task.attributes
    # One call per tool, the processes inside them (+ the openai SDK's own `uname -p`, once
    # per process, outside any tool).
    assert len(tools) <= a[semconv.budget_count("tool_calls")] <= len(tools) + 1
    assert a[semconv.budget_share(semconv.TOOL_EXECUTION)] >= 0.1
    assert sum(a[semconv.budget_share(c)] for c in semconv.COMPONENTS) == pytest.approx(
        a[semconv.BUDGET_WALL], abs=1e-9)


class TestRuns:
    """MultiStepAgent.run is one task named after the agent, with its tools inside."""

    def test_run(self, smol_otel, sim):
        assert _coder(sim).run("go") == "done"
        _check_tool_calling_run(smol_otel)

    def test_code_agent_tools_called_from_its_code(self, smol_otel, sim):
        agent = CodeAgent(tools=[run_shell], model=_model(sim, "code"), verbosity_level=0)
        assert agent.run("go").strip() == "hi"
        task = _task(smol_otel)
        assert task.name == "invoke_agent CodeAgent"  # no name: the class
        tools = [s for s in smol_otel.spans() if s.name.startswith("execute_tool")
                 and s.attributes.get(semconv.TOOL_SOURCE) == "smolagents"]
        assert [s.name for s in tools] == ["execute_tool run_shell", "execute_tool final_answer"]
        assert all(s.parent.span_id == task.context.span_id for s in tools)

    def test_run_inside_a_task_is_a_nested_task(self, smol_otel, sim):
        with agent_latency.task("outer"):
            _coder(sim).run("go")
        outer = smol_otel.span("invoke_agent outer")
        inner = smol_otel.span("invoke_agent coder")
        assert inner.parent.span_id == outer.context.span_id
        assert outer.attributes[semconv.budget_count("subtasks")] == 1

    def test_failing_tool_marks_its_span(self, smol_otel):
        @tool
        def broken(x: str) -> str:
            """Always fails.

            Args:
                x: anything
            """
            raise KeyError(x)

        with agent_latency.task("t"), pytest.raises(KeyError):
            broken(x="a")
        span = smol_otel.span("execute_tool broken")
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes[semconv.ERROR_TYPE] == "KeyError"


class TestStreamedRuns:
    """run(stream=True): the task lasts as long as its generator and is current only inside it."""

    def test_task_ends_with_the_generator(self, smol_otel, sim):
        steps = _coder(sim).run("go", stream=True)
        assert not [s for s in smol_otel.spans() if s.name.startswith("invoke_agent")]
        seen_outside = []
        for _step in steps:
            seen_outside.append(in_task())
        assert seen_outside and not any(seen_outside)  # the caller's context is its own
        _check_tool_calling_run(smol_otel)

    def test_closing_the_generator_early_ends_the_task(self, smol_otel, sim):
        steps = _coder(sim).run("go", stream=True)
        next(steps)
        try:
            steps.close()
        except RuntimeError:
            pass  # smolagents yields in a `finally`: closing it mid-step raises, with or without us
        task = _task(smol_otel)
        assert task.status.status_code is StatusCode.UNSET
        assert semconv.BUDGET_WALL in task.attributes


def test_uninstrument_restores(otel):
    from smolagents.agents import MultiStepAgent
    from smolagents.tools import Tool

    run, call = MultiStepAgent.run, Tool.__call__
    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument()
    assert MultiStepAgent.run is not run and Tool.__call__ is not call
    instrumentor.uninstrument()
    assert MultiStepAgent.run is run and Tool.__call__ is call
