"""instrument() alone: the whole process is one task (run as real processes, spans read back)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_latency import semconv

sys.path.insert(0, str(Path(__file__).parent))
from spans_file import read_spans

PY = sys.executable
TOOL = "import subprocess\nsubprocess.run(['true'])\n"


def run_program(tmp_path: Path, source: str, *argv: str, env: dict[str, str] | None = None,
                prefix: tuple[str, ...] = ()):
    """Run ``prog.py`` (``python prog.py``, or ``prefix + argv`` when given) with a clean
    environment; the process, and the spans of the local default's file."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(source))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "AGENT_LATENCY_"))}
    environ.update(env or {})
    proc = subprocess.run([*prefix, *(argv or (PY, "prog.py"))], env=environ, cwd=tmp_path,
                          capture_output=True, text=True, timeout=90)
    return proc, read_spans(tmp_path / ".agent-latency" / "traces.jsonl")


def tasks_of(spans):
    return [s for s in spans if s["name"].startswith("invoke_agent")]


def summary_names(stderr: str) -> list[str]:
    return [line.split()[1] for line in stderr.splitlines() if line.startswith("task ")]


def assert_budget_adds_up(task) -> None:
    a = task["attributes"]
    assert sum(a[semconv.budget_share(c)] for c in semconv.COMPONENTS) == pytest.approx(
        a[semconv.BUDGET_WALL], abs=1e-9)
    assert a[semconv.BUDGET_WALL] == pytest.approx((task["end"] - task["start"]) / 1e9,
                                                   abs=1e-6)


class TestImplicitProcessTask:
    """With instrument() alone the process is one task, from its start to its exit."""

    def test_the_process_is_one_task(self, tmp_path):
        proc, spans = run_program(tmp_path, """
            import time
            before_import = time.time_ns()
            import subprocess, agent_latency
            agent_latency.instrument()
            subprocess.run(["sleep", "0.1"])
            print(before_import)
            """)
        assert proc.returncode == 0, proc.stderr
        [task] = tasks_of(spans)
        assert task["name"] == "invoke_agent prog" and task["parent"] is None
        assert task["attributes"][semconv.PROCESS_TASK] is True
        assert task["attributes"][semconv.TOOL_PID] > 0
        if sys.platform.startswith("linux"):  # the kernel's start time: start-up counts
            assert task["start"] <= int(proc.stdout.split()[-1])
        sleep = next(s for s in spans if s["name"] == "execute_tool sleep")
        assert sleep["parent"] == task["span_id"]
        assert task["attributes"][semconv.budget_share(semconv.TOOL_EXECUTION)] >= 0.1
        assert_budget_adds_up(task)
        assert summary_names(proc.stderr) == ["prog"]
        report = subprocess.run([PY, "-m", "agent_latency", "report", "--json"], cwd=tmp_path,
                                capture_output=True, text=True, timeout=60)
        assert report.returncode == 0, report.stderr
        rows = json.loads(report.stdout)["tasks"]
        assert [row["task"] for row in rows] == ["prog"]

    def test_program_tasks_nest_inside_it(self, tmp_path):
        proc, spans = run_program(tmp_path, """
            import subprocess, agent_latency
            agent_latency.instrument()
            with agent_latency.task("inner"):
                subprocess.run(["true"])
            """)
        assert proc.returncode == 0, proc.stderr
        outer = next(s for s in spans if s["name"] == "invoke_agent prog")
        inner = next(s for s in spans if s["name"] == "invoke_agent inner")
        assert inner["parent"] == outer["span_id"]
        assert outer["attributes"][semconv.budget_count("subtasks")] == 1
        assert outer["attributes"][semconv.budget_count("tool_calls")] == 1
        # Explicit tasks win: all the work was the program's own task's, one line.
        assert summary_names(proc.stderr) == ["inner"]

    def test_work_outside_the_program_tasks_gets_the_process_line(self, tmp_path):
        proc, _ = run_program(tmp_path, """
            import subprocess, agent_latency
            agent_latency.instrument()
            with agent_latency.task("inner"):
                subprocess.run(["true"])
            subprocess.run(["true"])
            """)
        assert proc.returncode == 0, proc.stderr
        assert summary_names(proc.stderr) == ["inner", "prog"]

    def test_no_llm_call_and_no_tool_prints_no_line(self, tmp_path):
        proc, spans = run_program(tmp_path, "import agent_latency\nagent_latency.instrument()\n")
        assert proc.returncode == 0, proc.stderr
        assert summary_names(proc.stderr) == []
        [task] = tasks_of(spans)  # still exported, with its budget: all "other"
        assert task["attributes"][semconv.budget_share(semconv.OTHER)] == pytest.approx(
            task["attributes"][semconv.BUDGET_WALL])

    def test_uncaught_exception_marks_it(self, tmp_path):
        proc, spans = run_program(tmp_path, "import agent_latency\nagent_latency.instrument()\n"
                                  + TOOL + "raise RuntimeError('boom')\n")
        assert proc.returncode == 1 and "RuntimeError: boom" in proc.stderr
        [task] = tasks_of(spans)
        assert task["status"] == "ERROR"
        assert task["attributes"][semconv.ERROR_TYPE] == "RuntimeError"

    def test_uninstrument_ends_it_with_its_budget(self, tmp_path):
        proc, spans = run_program(tmp_path, "import agent_latency\nagent_latency.instrument()\n"
                                  + TOOL + "agent_latency.uninstrument()\nprint('after')\n")
        assert proc.returncode == 0 and proc.stdout == "after\n", proc.stderr
        [task] = tasks_of(spans)
        assert task["attributes"][semconv.budget_count("tool_calls")] == 1
        assert_budget_adds_up(task)

    def test_named_after_the_module(self, tmp_path):
        proc, spans = run_program(tmp_path, "import agent_latency\nagent_latency.instrument()\n"
                                  + TOOL, PY, "-m", "prog")
        assert proc.returncode == 0, proc.stderr
        assert [t["name"] for t in tasks_of(spans)] == ["invoke_agent prog"]


    def test_agent_latency_run_keeps_its_own(self, tmp_path):
        proc, spans = run_program(
            tmp_path, "import agent_latency\nagent_latency.instrument()\n" + TOOL,
            PY, "-m", "agent_latency", "run", "--name", "whole", "--", PY, "prog.py",
            env={semconv.ENV_PROCESS_TASK: "true"})
        assert proc.returncode == 0, proc.stderr
        [task] = tasks_of(spans)
        assert task["name"] == "invoke_agent whole"
        assert task["attributes"][semconv.RUN_TASK] is True
        assert semconv.PROCESS_TASK not in task["attributes"]


class TestSwitchedOff:
    """instrument(process_task=False) or AGENT_LATENCY_PROCESS_TASK=false: no process task."""

    @pytest.mark.parametrize(("call", "env"), [
        ("agent_latency.instrument(process_task=False)", {}),
        ("agent_latency.instrument()", {semconv.ENV_PROCESS_TASK: "false"}),
    ])
    def test_off(self, tmp_path, call, env):
        proc, spans = run_program(tmp_path, f"import agent_latency\n{call}\n{TOOL}", env=env)
        assert proc.returncode == 0, proc.stderr
        assert tasks_of(spans) == []
        assert [s["name"] for s in spans] == ["execute_tool true"]
        assert summary_names(proc.stderr) == []


def _console_spans(output: str) -> list[dict]:
    """The spans ConsoleSpanExporter printed (one JSON object each, back to back)."""
    decoder, spans, i = json.JSONDecoder(), [], 0
    while (i := output.find("{", i)) >= 0:
        try:
            obj, i = decoder.raw_decode(output, i)
        except ValueError:
            i += 1
            continue
        if isinstance(obj, dict) and "context" in obj:
            spans.append(obj)
    return spans


def test_opentelemetry_instrument_makes_the_process_a_task(tmp_path):
    tool = Path(PY).parent / "opentelemetry-instrument"
    if not tool.exists():
        pytest.skip("opentelemetry-instrument not installed")
    proc, _ = run_program(tmp_path, TOOL, env={
        "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none"}, prefix=(str(tool),))
    assert proc.returncode == 0, proc.stderr
    spans = {s["name"]: s for s in _console_spans(proc.stdout)}
    task, true = spans["invoke_agent prog"], spans["execute_tool true"]
    assert true["parent_id"] == task["context"]["span_id"]
    assert task["attributes"][semconv.budget_count("tool_calls")] == 1
    assert semconv.BUDGET_WALL in task["attributes"]
