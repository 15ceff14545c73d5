"""One process tree, one trace: child Python processes of a program run under
``opentelemetry-instrument`` are not instrumented unless asked for; when asked for, each
nests in the tool span that started it, without double counting and without clock-skew
notes on one host."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_latency import semconv
from agent_latency._child_context import child_env, child_env_list

sys.path.insert(0, str(Path(__file__).parent))
from spans_file import read_spans

PY = sys.executable
TOOL = Path(PY).parent / "opentelemetry-instrument"
pytestmark = [
    pytest.mark.skipif(os.name != "posix", reason="opentelemetry-instrument execs"),
    pytest.mark.skipif(not TOOL.exists(), reason="opentelemetry-instrument not installed"),
]

# Three 0.2 s Python tools, each started with its own service name: were they instrumented,
# their spans would be another service's, so a report checks them for clock skew.
AGENT = """
    import os, subprocess, sys
    for _ in range({n}):
        subprocess.run([sys.executable, "-c", "import time; time.sleep({sleep})"],
                       env={{**os.environ, "OTEL_SERVICE_NAME": "tool"}}, check=True)
    """


def run_agent(tmp_path: Path, n: int, sleep: float, env: dict[str, str] | None = None
              ) -> tuple[subprocess.CompletedProcess[str], list[dict], Path]:
    prog = tmp_path / "agent.py"
    prog.write_text(textwrap.dedent(AGENT.format(n=n, sleep=sleep)))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "AGENT_LATENCY_"))}
    traces = tmp_path / "out" / "traces.jsonl"
    environ.update(OTEL_TRACES_EXPORTER="jsonl", OTEL_METRICS_EXPORTER="none",
                   OTEL_LOGS_EXPORTER="none", OTEL_SERVICE_NAME="agent",
                   **{semconv.ENV_OUTPUT_DIR: str(traces.parent)}, **(env or {}))
    proc = subprocess.run([str(TOOL), PY, str(prog)], env=environ, capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc, read_spans(traces), traces


def report_notes(traces: Path) -> str:
    proc = subprocess.run([PY, "-m", "agent_latency", "report", str(traces)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


class TestChildrenNotInstrumented:
    """By default a child Python process is not instrumented: no spans of its own, its
    tool's time is its own run time, and the report has no clock-skew notes."""

    def test_three_python_tools(self, tmp_path):
        _, spans, traces = run_agent(tmp_path, 3, 0.2)
        tasks = [s for s in spans if s["name"].startswith("invoke_agent")]
        assert [t["name"] for t in tasks] == ["invoke_agent agent"]
        tools = [s for s in spans if s["name"].startswith("execute_tool")]
        assert len(tools) == 3
        assert all(t["parent"] == tasks[0]["span_id"] for t in tools)
        tool_time = tasks[0]["attributes"][semconv.budget_share("tool_execution")]
        # 0.6 s of sleeping plus three bare interpreter start-ups (an instrumented one
        # costs 0.2-2 s more each, here).
        assert 0.6 <= tool_time < 1.2, tool_time
        assert "clock skew" not in report_notes(traces)

    def test_env_of_child_loses_only_the_start_up_directory(self):
        auto = "/x/opentelemetry/instrumentation/auto_instrumentation"
        env = {"PYTHONPATH": f"{auto}{os.pathsep}/work", "A": "1"}
        assert child_env(env, {"TRACEPARENT": "t"}, auto) == {
            "PYTHONPATH": "/work", "A": "1", "TRACEPARENT": "t"}
        assert child_env({"PYTHONPATH": auto}, {}, auto) == {}
        assert child_env(env, {}, None) == env
        listed = [b"A=1", f"PYTHONPATH={auto}{os.pathsep}/work".encode()]
        assert child_env_list(listed, {"TRACEPARENT": "t"}, auto) == [
            b"A=1", b"PYTHONPATH=/work", b"TRACEPARENT=t"]
        assert child_env_list([f"PYTHONPATH={auto}".encode()], {}, auto) == []


class TestChildrenInstrumentedOnRequest:
    """With ``AGENT_LATENCY_RUN_CHILDREN=true`` each child's task nests in its tool span, the
    parent's tool time is counted once, and a child of another service is not taken for
    clock skew on one host."""

    def test_children_nest_in_their_tool_spans(self, tmp_path):
        _, spans, traces = run_agent(tmp_path, 2, 0.05,
                                     env={semconv.ENV_RUN_CHILDREN: "true"})
        by_id = {s["span_id"]: s for s in spans}
        parent = next(s for s in spans if s["name"] == "invoke_agent agent")
        tools = [s for s in spans if s["name"].startswith("execute_tool")]
        children = [s for s in spans if s["name"] == "invoke_agent python -c"]
        assert len(tools) == 2 and len(children) == 2
        for child in children:
            tool = by_id[child["parent"]]
            assert tool in tools
            assert tool["start"] <= child["start"] and child["end"] <= tool["end"]
        tool_time = parent["attributes"][semconv.budget_share("tool_execution")]
        assert tool_time == pytest.approx(sum(t["end"] - t["start"] for t in tools) / 1e9,
                                          abs=1e-6)
        assert "clock skew" not in report_notes(traces)
