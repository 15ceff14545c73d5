"""``agent-latency run -- CMD``: the whole process is one task; exit status passes through."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_latency import semconv
from agent_latency._run import default_name, parse

sys.path.insert(0, str(Path(__file__).parent))
from spans_file import read_spans

PY = sys.executable
pytestmark = pytest.mark.skipif(os.name != "posix", reason="exec-based runner")


def run(tmp_path: Path, source: str, *args: str, run_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None, timeout: float = 60):
    prog = tmp_path / "prog.py"
    prog.write_text(textwrap.dedent(source))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "AGENT_LATENCY_"))}
    environ[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    environ.update(env or {})
    proc = subprocess.run([PY, "-m", "agent_latency", "run", *run_args, "--", PY, str(prog),
                           *args], env=environ, capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path)
    return proc, read_spans(tmp_path / "out" / "traces.jsonl")


def budget_of(span):
    a = span["attributes"]
    parts = [a[semconv.budget_share(c)] for c in semconv.COMPONENTS]
    return a[semconv.BUDGET_WALL], parts


def test_parse_and_names():
    assert parse(["--name", "x", "--", "python", "a.py"]) == ("x", False, ["python", "a.py"])
    assert parse(["--children", "pytest", "-q"]) == (None, True, ["pytest", "-q"])
    with pytest.raises(ValueError):
        parse(["--name"])
    with pytest.raises(ValueError):
        parse([])
    assert default_name(["python3", "-u", "agents/fix.py"]) == "fix"
    assert default_name(["python", "-m", "pkg.main"]) == "pkg.main"
    assert default_name(["/usr/bin/my-agent", "x"]) == "my-agent"


def test_whole_process_is_one_task_with_every_process_inside(tmp_path):
    proc, spans = run(tmp_path, """
        import os, subprocess, sys, json
        subprocess.run(["sleep", "0.2"])
        subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('TRACEPARENT'))"])
        print(json.dumps({"pp": os.environ.get("PYTHONPATH"),
                          "run": os.environ.get("AGENT_LATENCY_RUN"),
                          "boot": [p for p in sys.path if "_bootstrap" in p]}))
        sys.exit(3)
        """, run_args=("--name", "whole"))
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == '{"pp": null, "run": null, "boot": []}'
    # Exactly one budget line: the child Python process was not instrumented.
    summary = [ln for ln in proc.stderr.splitlines() if ln.startswith("task ")]
    assert len(summary) == 1 and summary[0].startswith("task whole "), proc.stderr
    task = next(s for s in spans if s["name"] == "invoke_agent whole")
    assert task["parent"] is None
    tools = [s for s in spans if s["name"].startswith("execute_tool")]
    assert [s["attributes"][semconv.GEN_AI_TOOL_NAME] for s in tools] == ["sleep", "python"]
    assert all(s["parent"] == task["span_id"] for s in tools)
    # The child saw TRACEPARENT naming its own tool span.
    assert lines[0].split("-")[2] == tools[1]["span_id"]
    wall, parts = budget_of(task)
    assert sum(parts) == pytest.approx(wall, rel=1e-9, abs=1e-9)
    assert wall == pytest.approx((task["end"] - task["start"]) / 1e9, abs=1e-6)
    tool_share = task["attributes"][semconv.budget_share(semconv.TOOL_EXECUTION)]
    assert tool_share >= 0.2
    assert task["attributes"][semconv.budget_count("tool_calls")] == 2


def test_uncaught_exception_passes_exit_code_and_marks_task(tmp_path):
    proc, spans = run(tmp_path, "raise RuntimeError('boom')")
    assert proc.returncode == 1
    assert "RuntimeError: boom" in proc.stderr
    task = next(s for s in spans if s["name"] == "invoke_agent prog")
    assert task["status"] == "ERROR"
    assert task["attributes"][semconv.ERROR_TYPE] == "RuntimeError"


def test_sigterm_ends_task_and_dies_of_the_signal(tmp_path):
    proc, spans = run(tmp_path, """
        import os, signal, subprocess, time
        # Its output elsewhere: a child holding the test's pipe open keeps run() reading it
        # until the child exits (30 s), long after the program died.
        p = subprocess.Popen(["sleep", "30"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        """)
    assert proc.returncode == -signal.SIGTERM
    task = next(s for s in spans if s["name"] == "invoke_agent prog")
    assert task["attributes"][semconv.ERROR_TYPE] == "SIGTERM"
    sleep = next(s for s in spans if s["name"] == "execute_tool sleep")
    assert sleep["attributes"][semconv.TOOL_RUNNING_AT_EXIT] is True
    assert sleep["parent"] == task["span_id"]
    assert any(ln.startswith("task prog ") for ln in proc.stderr.splitlines())


def test_program_tasks_nest_inside_the_process_task(tmp_path):
    proc, spans = run(tmp_path, """
        import subprocess, agent_latency
        agent_latency.instrument()          # harmless a second time
        with agent_latency.task("inner"):
            subprocess.run(["true"])
        """)
    assert proc.returncode == 0, proc.stderr
    outer = next(s for s in spans if s["name"] == "invoke_agent prog")
    inner = next(s for s in spans if s["name"] == "invoke_agent inner")
    assert inner["parent"] == outer["span_id"]
    assert outer["attributes"][semconv.budget_count("subtasks")] == 1
    assert outer["attributes"][semconv.budget_count("tool_calls")] == 1
    assert [ln.split()[1] for ln in proc.stderr.splitlines() if ln.startswith("task ")] == [
        "inner", "prog"]


def test_children_option_makes_child_tasks_in_the_same_trace(tmp_path):
    proc, spans = run(tmp_path, """
        import subprocess, sys
        subprocess.run([sys.executable, "-c", "import subprocess; subprocess.run(['true'])"])
        """, run_args=("--children",))
    assert proc.returncode == 0, proc.stderr
    assert len([ln for ln in proc.stderr.splitlines() if ln.startswith("task ")]) == 1
    outer = next(s for s in spans if s["name"] == "invoke_agent prog")
    tool = next(s for s in spans if s["name"] == "execute_tool python")
    child = next(s for s in spans if s["name"] == "invoke_agent python -c")
    assert child["parent"] == tool["span_id"] and child["trace_id"] == outer["trace_id"]
    grandchild = next(s for s in spans if s["name"] == "execute_tool true")
    assert grandchild["parent"] == child["span_id"]


def test_child_calling_instrument_joins_the_parent_trace(tmp_path):
    child = tmp_path / "child.py"
    child.write_text("import agent_latency\nagent_latency.instrument(summary=False)\n"
                     "with agent_latency.task('work'):\n    pass\n")
    proc, spans = run(tmp_path, f"""
        import subprocess, sys
        subprocess.run([sys.executable, {str(child)!r}])
        """)
    assert proc.returncode == 0, proc.stderr
    tool = next(s for s in spans if s["name"] == "execute_tool python")
    # The child's own process task (instrument() alone) hangs under the tool span that
    # started it, and the child's task nests in that.
    process = next(s for s in spans if s["name"] == "invoke_agent child")
    task = next(s for s in spans if s["name"] == "invoke_agent work")
    assert process["parent"] == tool["span_id"]
    assert task["parent"] == process["span_id"]
    assert task["trace_id"] == process["trace_id"] == tool["trace_id"]


def test_other_sitecustomize_still_runs(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import builtins\nbuiltins.MARK = 'user-site'\n")
    proc, spans = run(tmp_path, "print(MARK)", env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "user-site"
    assert any(s["name"] == "invoke_agent prog" for s in spans)


def test_command_not_found():
    proc = subprocess.run([PY, "-m", "agent_latency", "run", "--", "no-such-cmd-xyz"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 127
    assert "command not found" in proc.stderr


def test_opentelemetry_instrument_loads_our_instrumentors(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import subprocess\nsubprocess.run(['true'])\n")
    bindir = Path(PY).parent
    tool = bindir / "opentelemetry-instrument"
    if not tool.exists():
        pytest.skip("opentelemetry-instrument not installed")
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "AGENT_LATENCY_"))}
    environ.update(OTEL_TRACES_EXPORTER="console", OTEL_METRICS_EXPORTER="none",
                   OTEL_LOGS_EXPORTER="none")
    proc = subprocess.run([str(tool), PY, str(prog)], env=environ, capture_output=True,
                          text=True, timeout=90, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert '"name": "execute_tool true"' in proc.stdout + proc.stderr
    # Each integration is an entry point of its own: one can be left out by name.
    environ["OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"] = "agent_latency_subprocess"
    proc = subprocess.run([str(tool), PY, str(prog)], env=environ, capture_output=True,
                          text=True, timeout=90, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "execute_tool true" not in proc.stdout + proc.stderr
