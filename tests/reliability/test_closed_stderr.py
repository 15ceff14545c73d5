"""A closed stderr (``2>&-``): our output never moves onto stdout, ``agent-latency run``
still runs the command, and the trace file never takes descriptor 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import semconv

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX descriptors")

PROGRAM = """\
import json, os, sys
import agent_latency
agent_latency.instrument()
with agent_latency.task("closed-stderr"):
    with agent_latency.tool("x"):
        pass
print(json.dumps({"stderr_is_none": sys.stderr is None}))
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    return env


def _run_without_stderr(cmd: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``cmd 2>&-``: descriptor 2 closed in the child before it starts."""
    return subprocess.run(["/bin/sh", "-c", 'exec "$@" 2>&-', "sh", *cmd], check=False,
                          env=_env(tmp_path), cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)


def _trace_lines(tmp_path: Path) -> list[str]:
    return (tmp_path / "out" / "traces.jsonl").read_text().splitlines()


class TestClosedStderr:
    """With stderr closed, stdout carries only the program's output, and spans are kept."""

    def test_summary_lines_never_go_to_stdout(self, tmp_path: Path) -> None:
        script = tmp_path / "prog.py"
        script.write_text(PROGRAM)
        proc = _run_without_stderr([sys.executable, str(script)], tmp_path)
        assert proc.returncode == 0
        # Nothing but the program's JSON: no "task closed-stderr …" line ahead of it.
        assert [json.loads(line) for line in proc.stdout.splitlines()] == [
            {"stderr_is_none": True}]
        assert any("closed-stderr" in line for line in _trace_lines(tmp_path))

    def test_run_runs_the_command(self, tmp_path: Path) -> None:
        script = tmp_path / "prog.py"
        script.write_text(PROGRAM.replace("agent_latency.instrument()\n", ""))
        proc = _run_without_stderr(
            [sys.executable, "-m", "agent_latency", "run", "--", sys.executable, str(script)],
            tmp_path)
        assert proc.returncode == 0
        assert [json.loads(line) for line in proc.stdout.splitlines()] == [
            {"stderr_is_none": True}]
        assert any("closed-stderr" in line for line in _trace_lines(tmp_path))

    def test_run_reports_a_missing_command_nowhere_but_its_status(self,
                                                                  tmp_path: Path) -> None:
        proc = _run_without_stderr(
            [sys.executable, "-m", "agent_latency", "run", "--", "no-such-command-here"],
            tmp_path)
        assert proc.returncode == 127
        assert proc.stdout == ""

    def test_the_trace_file_never_takes_descriptor_2(self, tmp_path: Path) -> None:
        """Writes to descriptor 2 (a C library, faulthandler) must not land in the file."""
        script = tmp_path / "prog.py"
        script.write_text(PROGRAM + (
            "from opentelemetry import trace\n"
            "trace.get_tracer_provider().force_flush()\n"
            "try:\n"
            "    os.write(2, b'NOT-A-SPAN\\n')\n"
            "except OSError:\n"
            "    pass\n"))
        proc = _run_without_stderr([sys.executable, str(script)], tmp_path)
        assert proc.returncode == 0
        lines = _trace_lines(tmp_path)
        assert lines and all(line.startswith("{") for line in lines), lines
