"""Real agents from PyPI, unmodified, under ``agent-latency run`` against the simulator.

Each agent gets scripted turns (``scripts/shell_agent.json``) that make it run three shell
commands through its own shell tool and then answer.  The spans are read back from the
local default's JSONL file; the process task's budget must add up to its wall time and
every shell command must be an ``execute_tool`` span inside the task.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import semconv

sys.path.insert(0, str(Path(__file__).parent.parent / "tools"))
from spans_file import read_spans  # noqa: E402

AGENTS = Path(__file__).parent / "agents"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="exec-based runner")]

AGENT_CASES = [
    pytest.param("openai_agents_shell.py", ("agents",), "shell-coder", id="openai-agents"),
    pytest.param("langgraph_shell.py", ("langgraph", "langchain_openai"), None,
                 id="langgraph-react"),
]


def _ancestors(span, by_id):
    while span["parent"] in by_id:
        span = by_id[span["parent"]]
        yield span


def _budget_adds_up(task) -> None:
    a = task["attributes"]
    wall = a[semconv.BUDGET_WALL]
    assert wall == pytest.approx((task["end"] - task["start"]) / 1e9, abs=1e-6)
    assert sum(a[semconv.budget_share(c)] for c in semconv.COMPONENTS) == pytest.approx(
        wall, rel=1e-9, abs=1e-9)
    assert all(a[semconv.budget_share(c)] >= 0 for c in semconv.COMPONENTS)


@pytest.mark.parametrize(("script", "modules", "agent_task"), AGENT_CASES)
def test_agent_runs_shell_commands_inside_its_task(tmp_path, simulator_url, script, modules,
                                                   agent_task):
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LATENCY"))}
    env.update({
        "OPENAI_BASE_URL": simulator_url + "/v1",
        "OPENAI_API_KEY": "sk-simulator",
        "OPENAI_AGENTS_DISABLE_TRACING": "1",  # the SDK's own exporter would call openai.com
        semconv.ENV_OUTPUT_DIR: str(tmp_path / "out"),
        "PYTHONWARNINGS": "ignore",
    })
    proc = subprocess.run(
        [sys.executable, "-m", "agent_latency", "run", "--name", "agent", "--",
         sys.executable, str(AGENTS / script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # The agent really did the work: the file exists and the answer came back.
    assert (tmp_path / "notes.txt").read_text().strip() == "hello"
    assert "printed 42" in proc.stdout
    assert any(ln.startswith("task agent ") for ln in proc.stderr.splitlines()), proc.stderr

    spans = read_spans(tmp_path / "out" / "traces.jsonl")
    by_id = {s["span_id"]: s for s in spans}
    task = next(s for s in spans if s["name"] == "invoke_agent agent")
    assert task["parent"] is None
    _budget_adds_up(task)

    # Every shell command is a process span inside the task, under the agent's tool span.
    commands = {"echo": None, "python3": None, "cat": None}
    for s in spans:
        name = s["attributes"].get(semconv.GEN_AI_TOOL_NAME)
        if name in commands and s["attributes"].get(semconv.TOOL_SOURCE) == "subprocess":
            commands[name] = s
    assert all(commands.values()), sorted(s["name"] for s in spans)
    for name, s in commands.items():
        assert s["attributes"][semconv.TOOL_EXIT_CODE] == 0
        chain = list(_ancestors(s, by_id))
        assert task in chain, name
        assert chain[0]["attributes"][semconv.GEN_AI_TOOL_NAME] == "run_shell"
        assert chain[0]["attributes"][semconv.GEN_AI_TOOL_TYPE] == "function"
    run_shell = [s for s in spans if s["name"] == "execute_tool run_shell"]
    assert len(run_shell) == 3
    # 0.2 s of the first command is a sleep: tool time shows it.
    a = task["attributes"]
    assert a[semconv.budget_share(semconv.TOOL_EXECUTION)] >= 0.2
    # Each command's process runs inside its run_shell call: one tool call, not two (the
    # SDK may run one `uname -p` of its own outside any tool).
    assert len(run_shell) <= a[semconv.budget_count("tool_calls")] <= len(run_shell) + 1
    llm = [s for s in spans if s["name"].startswith("chat ")]
    if llm:  # with the LLM instrumentation present: 4 model turns, inside the task
        assert len(llm) == 4
        assert all(task in list(_ancestors(s, by_id)) for s in llm)
        assert a[semconv.budget_count("llm_calls")] == 4
    if agent_task is not None:  # the framework's run is a task of its own, nested
        run = next(s for s in spans if s["name"] == f"invoke_agent {agent_task}")
        assert run["parent"] == task["span_id"]
        _budget_adds_up(run)
        assert all(run in list(_ancestors(s, by_id)) for s in run_shell)
