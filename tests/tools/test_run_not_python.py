"""``agent-latency run`` with a program that is not Python: one line says so, the run is
still one task (its wall time), the exit status passes through, and with ``--children`` the
Python processes it starts are tasks nested in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import semconv
from agent_latency._run import not_python

sys.path.insert(0, str(Path(__file__).parent))
from spans_file import read_spans

PY = sys.executable
pytestmark = pytest.mark.skipif(os.name != "posix" or shutil.which("ls") is None,
                                reason="POSIX programs")


def run(tmp_path: Path, *cmd: str, run_args: tuple[str, ...] = ()):
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "AGENT_LATENCY_", "TRACEPARENT"))}
    environ[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    proc = subprocess.run([PY, "-m", "agent_latency", "run", *run_args, "--", *cmd],
                          env=environ, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    return proc, read_spans(tmp_path / "out" / "traces.jsonl")


class TestWhatIsPython:
    """Which programs load the bootstrap (Python, launchers, shell scripts) and which not."""

    def test_kinds(self, tmp_path):
        assert not_python(PY) is None
        assert not_python("python3") is None
        assert not_python("sh") is None and not_python("env") is None  # launchers
        assert not_python("ls") == "a native executable"
        for shebang, expected in (("#!/usr/bin/env python3", None), ("#!/bin/sh", None),
                                  ("#!/usr/bin/env -S node --flag", "a node script"),
                                  ("#!/bin/cat", "a cat script")):
            script = tmp_path / "prog"
            script.write_text(shebang + "\nprint(1)\n")
            script.chmod(0o755)
            assert not_python(str(script)) == expected, shebang
        assert not_python(str(tmp_path / "missing")) is None  # the exec reports it


class TestNotPython:
    """A native program and a script of another interpreter: one line, one task."""

    def test_native_program_is_said_and_recorded(self, tmp_path):
        (tmp_path / "listed-file").write_text("")
        proc, spans = run(tmp_path, "ls", str(tmp_path), run_args=("--name", "lister"))
        assert proc.returncode == 0, proc.stderr
        assert "listed-file" in proc.stdout  # the program ran, its output untouched
        lines = proc.stderr.splitlines()
        assert lines[0].startswith("agent-latency run: ls is not a Python program "
                                   "(a native executable)"), proc.stderr
        assert next(ln for ln in lines if ln.startswith("task ")).startswith("task lister ")
        (task,) = [s for s in spans if s["name"] == "invoke_agent lister"]
        assert task["attributes"][semconv.RUN_TASK] is True
        wall = task["attributes"][semconv.BUDGET_WALL]
        assert wall > 0
        assert task["attributes"][semconv.budget_share("other")] == pytest.approx(wall)
        # The program is the task, not a tool of it.
        assert not [s for s in spans if s["name"].startswith("execute_tool")]

    def test_exit_status_passes_through(self, tmp_path):
        script = tmp_path / "fails"
        script.write_text("#!/bin/cat\nthis script's interpreter is cat\n")
        script.chmod(0o755)
        plain = subprocess.run(["ls", str(tmp_path / "missing")], capture_output=True)
        proc, spans = run(tmp_path, "ls", str(tmp_path / "missing"))
        assert plain.returncode != 0 and proc.returncode == plain.returncode
        assert [s for s in spans if s["name"] == "invoke_agent ls"]
        proc, _ = run(tmp_path, str(script))
        assert proc.returncode == 0
        assert "this script's interpreter is cat" in proc.stdout
        assert "(a cat script)" in proc.stderr.splitlines()[0]

    def test_children_are_tasks_nested_in_it(self, tmp_path):
        """--children: Python processes the program starts (here through find -exec) are
        instrumented, each a task nested in the program's task."""
        find = shutil.which("find")
        if find is None or not_python(find) is None:
            pytest.skip("needs a native find")
        proc, spans = run(tmp_path, "find", str(tmp_path), "-maxdepth", "0", "-exec", PY,
                          "-c", "pass", ";", run_args=("--name", "finder", "--children"))
        assert proc.returncode == 0, proc.stderr
        (outer,) = [s for s in spans if s["name"] == "invoke_agent finder"]
        inner = [s for s in spans if s["name"].startswith("invoke_agent")
                 and s is not outer]
        assert inner and all(s["trace_id"] == outer["trace_id"] for s in inner)
        assert [ln for ln in proc.stderr.splitlines() if ln.startswith("task ")] == [
            ln for ln in proc.stderr.splitlines() if ln.startswith("task finder ")]
