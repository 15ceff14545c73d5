"""Real Arize Phoenix receives an instrumented agent's spans, and gives them back.

Phoenix runs in a network namespace of its own (the ``phoenix`` fixture, conftest.py); the
agent runs in the same namespace, ``register()`` first, then ``instrument()``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).with_name("phoenix_agent.py")
HTTP = "http://127.0.0.1:6006"


def _run_agent(in_namespace, namespace: str, protocol: str, endpoint: str,
               project: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT",
                                                                      "PHOENIX_"))}
    env["AGENT_LATENCY_PROCESS_TASK"] = "false"
    result = in_namespace(namespace, sys.executable, str(AGENT), protocol, endpoint, project,
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

    def test_task_call_and_phases_read_back(self, phoenix, in_namespace, protocol, endpoint):
        project = "budgets-" + protocol.split("/")[0]
        spans = _run_agent(in_namespace, phoenix, protocol, endpoint, project)
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
