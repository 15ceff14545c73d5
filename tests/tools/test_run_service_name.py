"""``service.name`` under ``agent-latency run``: ``OTEL_SERVICE_NAME`` first, then
``OTEL_RESOURCE_ATTRIBUTES``, then ``--name``, then the program's name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import semconv
from agent_latency.report import read_spans

PY = sys.executable
pytestmark = pytest.mark.skipif(os.name != "posix", reason="exec-based runner")


def services(tmp_path: Path, run_args: tuple[str, ...], env: dict[str, str],
             program: str = "import subprocess, sys\n"
                            "subprocess.run([sys.executable, '-c', 'pass'])\n") -> set[str]:
    """The service names of every span a run of ``agent.py`` (which starts one child
    Python process) wrote."""
    prog = tmp_path / "agent.py"
    prog.write_text(program)
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "AGENT_LATENCY_"))}
    out = tmp_path / "out"
    environ.update({semconv.ENV_OUTPUT_DIR: str(out), **env})
    proc = subprocess.run([PY, "-m", "agent_latency", "run", *run_args, "--", PY, str(prog)],
                          env=environ, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    spans = read_spans(out / "traces.jsonl").spans
    assert spans
    return {s.service for s in spans}


class TestServiceNameUnderRun:
    """Each source of ``service.name`` wins over the ones after it."""

    def test_program_name(self, tmp_path):
        assert services(tmp_path, (), {}) == {"agent"}

    def test_name_option(self, tmp_path):
        assert services(tmp_path, ("--name", "fixer"), {}) == {"fixer"}

    def test_resource_attributes_before_name(self, tmp_path):
        env = {"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=dev,service.name=from-attrs"}
        assert services(tmp_path, ("--name", "fixer"), env) == {"from-attrs"}

    def test_service_name_variable_first(self, tmp_path):
        env = {"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attrs",
               "OTEL_SERVICE_NAME": "from-env"}
        assert services(tmp_path, ("--name", "fixer"), env) == {"from-env"}

    def test_children_share_the_run_s_service(self, tmp_path):
        # --children: the child's task is recorded under the same service, so a report
        # never compares one host's processes for clock skew.
        assert services(tmp_path, ("--children", "--name", "fixer"), {}) == {"fixer"}

    def test_the_environment_is_not_changed(self, tmp_path):
        program = ("import os, sys\n"
                   "sys.exit(1 if 'OTEL_SERVICE_NAME' in os.environ else 0)\n")
        assert services(tmp_path, ("--name", "fixer"), {}, program) == {"fixer"}
