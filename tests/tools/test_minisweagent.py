"""mini-swe-agent: DefaultAgent.run is a task with its commands inside (in-process, simulator)."""

from __future__ import annotations

import os

import pytest
from opentelemetry.trace import StatusCode

from agent_latency import semconv

# litellm fetches its model cost map from the internet at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("minisweagent")
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel

from agent_latency.instrumentation.tools.minisweagent import MiniSweAgentInstrumentor
from agent_latency.instrumentation.tools.subprocess import SubprocessInstrumentor
from agent_latency.simulator import Simulator, SimulatorConfig

SCRIPT = {"models": {"*": [
    {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 0.1"}}]},
    {"tool_calls": [{"name": "bash", "arguments": {
        "command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}]},
]}}


@pytest.fixture(scope="module")
def sim():
    with Simulator(SimulatorConfig(script=SCRIPT, output_tps=5000, prefill_tps=50000)) as s:
        yield s


@pytest.fixture
def mini_otel(otel):
    instrumentors = [SubprocessInstrumentor(), MiniSweAgentInstrumentor()]
    for i in instrumentors:
        i.instrument()
    yield otel
    for i in reversed(instrumentors):
        i.uninstrument()


class _ModelDown(LitellmModel):
    """A model whose every query fails."""

    def query(self, messages, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("model down")


def _agent(sim, model_class: type = LitellmModel) -> DefaultAgent:
    model = model_class(model_name="openai/gpt-4o", cost_tracking="ignore_errors",
                        model_kwargs={"api_base": sim.base_url + "/v1", "api_key": "sk-x"})
    return DefaultAgent(model, LocalEnvironment(), system_template="You run commands.",
                        instance_template="{{task}}")


class TestRuns:
    """DefaultAgent.run is one task named after the agent class; its commands are tools in it."""

    def test_run(self, mini_otel, sim):
        result = _agent(sim).run("go")
        assert result["exit_status"] == "Submitted"
        tasks = [s for s in mini_otel.spans() if s.name.startswith("invoke_agent")]
        assert [t.name for t in tasks] == ["invoke_agent DefaultAgent"]
        task = tasks[0]
        procs = [s for s in mini_otel.spans()
                 if s.attributes.get(semconv.TOOL_SOURCE) == "subprocess"
                 and s.attributes[semconv.GEN_AI_TOOL_NAME] in {"sleep", "echo"}]
        assert len(procs) == 2
        assert all(p.parent.span_id == task.context.span_id for p in procs)
        a = task.attributes
        assert a[semconv.budget_count("tool_calls")] >= 2
        assert a[semconv.budget_share(semconv.TOOL_EXECUTION)] >= 0.1
        assert sum(a[semconv.budget_share(c)] for c in semconv.COMPONENTS) == pytest.approx(
            a[semconv.BUDGET_WALL], abs=1e-9)

    def test_failed_run_is_an_error_task(self, mini_otel, sim):
        with pytest.raises(RuntimeError, match="model down"):
            _agent(sim, _ModelDown).run("go")
        task = mini_otel.span("invoke_agent DefaultAgent")
        assert task.status.status_code is StatusCode.ERROR
        assert task.attributes[semconv.ERROR_TYPE] == "RuntimeError"
        assert semconv.BUDGET_WALL in task.attributes


def test_uninstrument_restores(otel):
    run = DefaultAgent.run
    instrumentor = MiniSweAgentInstrumentor()
    instrumentor.instrument()
    assert DefaultAgent.run is not run
    instrumentor.uninstrument()
    assert DefaultAgent.run is run
