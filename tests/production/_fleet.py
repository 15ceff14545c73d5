"""Fleets of agent processes (fleet_agent.py) sending OTLP to a Collector or a Prometheus,
for the fleet test and the fleet benchmark."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import agent_latency

AGENT = Path(__file__).with_name("fleet_agent.py")
TTFT = "agent_latency_llm_time_to_first_token_seconds"
TASKS = "agent_latency_task_wall_time_seconds_count"
CALLS = "gen_ai_client_operation_duration_seconds_count"
#: Every metric of ours, as a PromQL label matcher.
OURS = '__name__=~"agent_latency_.+|gen_ai_.+"'


class FleetRun:
    """What one fleet of agent processes did, by its own account."""

    __slots__ = ("ended", "lifetimes", "service", "started", "tasks")

    def __init__(self, service: str, lifetimes: list[float], tasks: list[dict[str, Any]],
                 started: float, ended: float) -> None:
        self.service = service
        self.lifetimes = lifetimes
        self.tasks = tasks
        self.started = started
        self.ended = ended

    @property
    def selector(self) -> str:
        """The fleet's series: its service is their ``job``."""
        return f'job="{self.service}"'

    def window(self) -> str:
        """A PromQL range from before the fleet's first process to now."""
        return f"[{math.ceil(time.time() - self.started) + 2}s]"


def run_fleet(tmp: Path, base_url: str, otlp_http: str, service: str, prefill_tps: float,
              processes: int, at_once: int, seconds: float = 0.0,
              env: dict[str, str] | None = None) -> FleetRun:
    """``processes`` agents of ``service`` (also their model's name) against the simulator
    at ``base_url``, at most ``at_once`` alive at a time, each running tasks for ``seconds``
    (0: one task), sending OTLP over HTTP to ``otlp_http`` (``env``: more variables)."""
    out = tmp / f"{service}.jsonl"
    out.unlink(missing_ok=True)  # a second fleet of the same service: its own account
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    environ.update({"OTEL_SERVICE_NAME": service, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_http,
                    "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
                    "OTEL_BSP_SCHEDULE_DELAY": "200",
                    "AGENT_LATENCY_DIR": str(tmp / service),
                    "AGENT_LATENCY_PROCESS_TASK": "false", "AGENT_LATENCY_SUMMARY": "false",
                    **(env or {})})
    # The agents import the agent_latency this process imported, wherever it came from.
    source = str(Path(agent_latency.__file__).resolve().parents[1])
    environ["PYTHONPATH"] = os.pathsep.join(
        [source, *filter(None, [environ.get("PYTHONPATH")])])
    started = time.time()
    agents = subprocess.run(
        [sys.executable, str(AGENT), base_url, str(prefill_tps), service, str(out),
         str(processes), str(at_once), str(seconds)],
        env=environ, capture_output=True, text=True, timeout=600, check=False)
    assert agents.returncode == 0, agents.stderr[-3000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    (summary,) = [line for line in lines if "lifetimes" in line]
    tasks = [line for line in lines if "trace_id" in line]
    return FleetRun(service, summary["lifetimes"], tasks, started, time.time())
