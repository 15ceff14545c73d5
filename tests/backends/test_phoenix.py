"""Real Arize Phoenix receives an instrumented agent's spans, and gives them back.

Phoenix runs from its own virtual environment (``make test`` builds ``.venv-phoenix``) in a
network namespace of this test's own: its gRPC port binds every interface, whatever its host
setting says, and nothing outside the test may reach it.  The agent runs in the same
namespace, ``register()`` first, then ``instrument()``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = Path(os.environ.get("AGENT_LATENCY_PHOENIX", ROOT / ".venv-phoenix" / "bin" / "phoenix"))
AGENT = Path(__file__).with_name("phoenix_agent.py")
HTTP = "http://127.0.0.1:6006"


def _in_namespace(namespace: str, *command: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", namespace, *command], **kwargs)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 for a network namespace of its own")
    if not PHOENIX.exists():
        pytest.skip(f"no Phoenix at {PHOENIX} (make test installs it in .venv-phoenix)")
    namespace = f"al-phoenix-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    server = None
    try:
        _in_namespace(namespace, "ip", "link", "set", "lo", "up", check=True)
        work = tmp_path_factory.mktemp("phoenix")
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
               "PHOENIX_PORT": "6006", "PHOENIX_GRPC_PORT": "4317",
               "PHOENIX_TELEMETRY_ENABLED": "false"}
        log = (work / "phoenix.log").open("w")
        server = subprocess.Popen(["ip", "netns", "exec", namespace, str(PHOENIX), "serve"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        probe = (f"import urllib.request; urllib.request.urlopen('{HTTP}/healthz', timeout=2)")
        deadline = time.monotonic() + 120
        while True:
            if _in_namespace(namespace, sys.executable, "-c", probe,
                             capture_output=True).returncode == 0:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("Phoenix did not start: " + (work / "phoenix.log").read_text()[-2000:])
            time.sleep(1)
        yield namespace
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        subprocess.run(["ip", "netns", "del", namespace], check=False)


def _run_agent(namespace: str, protocol: str, endpoint: str, project: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT",
                                                                      "PHOENIX_"))}
    env["AGENT_LATENCY_PROCESS_TASK"] = "false"
    result = _in_namespace(namespace, sys.executable, str(AGENT), protocol, endpoint, project,
                           HTTP, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    # Nothing of ours in the program's stderr: no export warnings, no traceback.
    assert "agent-latency:" not in result.stderr, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("protocol", "endpoint"), [
    ("http/protobuf", f"{HTTP}/v1/traces"),
    ("grpc", "http://127.0.0.1:4317"),
])
class TestPhoenix:
    """register() then instrument(): every span reaches Phoenix, budgets included."""

    def test_task_call_and_phases_read_back(self, phoenix, protocol, endpoint):
        project = "budgets-" + protocol.split("/")[0]
        spans = _run_agent(phoenix, protocol, endpoint, project)
        by_name = {s["name"]: s for s in spans}
        task = by_name.get("invoke_agent phoenix-task")
        assert task is not None, sorted(by_name)
        attributes = task["attributes"]
        wall = attributes["agent_latency.budget.wall"]
        parts = [attributes[f"agent_latency.budget.{c}"] for c in
                 ("output_generation", "prefill", "tool_execution", "network_overhead", "other")]
        assert sum(parts) == pytest.approx(wall, abs=1e-6)
        assert attributes["agent_latency.budget.tool_execution"] >= 0.05
        assert attributes["agent_latency.budget.prefill"] > 0
        assert "chat sim-model" in by_name and "execute_tool pytest" in by_name
        # Phase children carry a kind Phoenix understands, not UNKNOWN.
        phases = [s for s in spans if s["name"] in ("prefill", "output_generation")]
        assert phases, sorted(by_name)
        assert {s["span_kind"] for s in phases} == {"CHAIN"}
        assert by_name["chat sim-model"]["span_kind"] == "LLM"
        assert task["span_kind"] == "AGENT"
