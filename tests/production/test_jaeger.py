"""Traces end to end on the real servers: an instrumented agent → the Collector built from
the builder manifest (the deployed config.yaml) → Jaeger v2 (the deployed config), all on
loopback.

The Collector runs a copy of config.yaml with shorter timings (:func:`shortened`: the wait
after a task's root span, the slow-task threshold, the batch timeout) and its addresses on
127.0.0.1; nothing else differs.  The agent exports every 0.2 s, so a task's children reach
the Collector seconds before its task span: every task is longer than the wait after the
root, and slow tasks are longer than the slow threshold itself.  Its spans also go to a
local file, the reference for what Jaeger must return.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_latency import semconv
from agent_latency.budget import COMPONENTS
from agent_latency.report._sources import TraceFileError, load_source
from agent_latency.simulator import Simulator, SimulatorConfig

from ._servers import COLLECTOR_CONFIG, Jaeger, loopback, shortened, start_collector
from ._stack import Server, free_port, http_json, wait_for

pytestmark = pytest.mark.slow

SERVICE = "otlp-agent"
# Fast tasks take 1.5 s on a quiet machine; 40 of them at once on two loaded cores took up
# to 5.96 s (median 2.25 s, 26 of 200 over 4 s, a fresh-clone run of 2026-11-30 beside
# callgrind benchmarks): the threshold sits above that, the slow tasks above it.
SLOW_THRESHOLD_S = 6.5
SLOW_TASK_S = 8.0
OTHER_TASK_S = 1.5
COUNTS = {"slow": 6, "failed": 6, "fast": 200}
BASELINE = 0.10
PHASE_NAMES = {"network", "prefill", "output_generation"}
# Jaeger stores microseconds: a start and a duration each rounded.
MICROSECOND_STORES = 2.5e-6


class Run:
    """What the agent did (from its own file) and what Jaeger holds."""

    __slots__ = ("jaeger", "local", "tasks", "tmp")

    def __init__(self, jaeger: Jaeger, tasks: list[dict[str, str]], local: Path,
                 tmp: Path) -> None:
        self.jaeger = jaeger
        self.tasks = tasks
        self.local = local
        self.tmp = tmp

    def local_spans(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Trace id → span id → the span, as the agent exported it to its file."""
        traces: dict[str, dict[str, dict[str, Any]]] = {}
        for line in self.local.read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        traces.setdefault(span["traceId"], {})[span["spanId"]] = span
        return traces

    def stored(self) -> dict[str, dict[str, Any]]:
        """Trace id → Jaeger's trace, every one Jaeger holds for the agent."""
        query = urllib.parse.urlencode({"service": SERVICE, "limit": 5000,
                                        "lookback": "1h"})
        body = http_json(f"{self.jaeger.query}/api/traces?{query}", timeout=30)
        return {t["traceID"].zfill(32): t for t in body["data"]}


def _plan() -> dict[str, Any]:
    tasks = ([{"kind": "slow", "seconds": SLOW_TASK_S}] * COUNTS["slow"]
             + [{"kind": "failed", "seconds": OTHER_TASK_S, "fail": True}] * COUNTS["failed"]
             + [{"kind": "fast", "seconds": OTHER_TASK_S}] * COUNTS["fast"])
    # Interleaved, so slow and failed tasks run among the others, not first.
    tasks.sort(key=lambda t: hash(json.dumps(t)) % 7)
    return {"workers": 40, "tasks": tasks}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("jaeger-stack")
    jaeger = Jaeger(tmp)
    servers: list[Server] = []
    try:
        # Tempo is not run here (AGPL: not built); its exporter gets a port nobody listens
        # on and retries in the background, as with a Tempo that is down.
        config, ports = loopback(shortened(yaml.safe_load(COLLECTOR_CONFIG.read_text()),
                                           SLOW_THRESHOLD_S),
                                 {"jaeger:4317": jaeger.otlp_grpc,
                                  "tempo:4317": f"127.0.0.1:{free_port()}"})
        servers.append(start_collector(tmp, config))
        otlp_http = f"http://127.0.0.1:{ports['receivers.otlp.protocols.http.endpoint']}"
        plan = tmp / "plan.json"
        plan.write_text(json.dumps(_plan()))
        out = tmp / "tasks.jsonl"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
        env.update({"OTEL_SERVICE_NAME": SERVICE, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_http,
                    "OTEL_TRACES_EXPORTER": "otlp,jsonl", "OTEL_METRICS_EXPORTER": "none",
                    "OTEL_BSP_SCHEDULE_DELAY": "200", "AGENT_LATENCY_DIR": str(tmp / "agent"),
                    "AGENT_LATENCY_PROCESS_TASK": "false", "AGENT_LATENCY_SUMMARY": "false",
                    "AGENT_LATENCY_EXIT_TIMEOUT": "30"})
        with Simulator(SimulatorConfig(prefill_tps=50_000.0, output_tps=400.0)) as sim:
            agent = subprocess.run(
                [sys.executable, str(Path(__file__).with_name("otlp_agent.py")),
                 sim.base_url, str(plan), str(out)],
                env=env, capture_output=True, text=True, timeout=300, check=False)
        assert agent.returncode == 0, agent.stderr[-3000:]
        tasks = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(tasks) == sum(COUNTS.values())
        result = Run(jaeger, tasks, tmp / "agent" / "traces.jsonl", tmp)
        _wait_until_decided(result)
        yield result
    finally:
        for server in reversed(servers):
            server.stop()
        jaeger.stop()


def _wait_until_decided(run: Run) -> None:
    """Until every failed and slow task is in Jaeger and nothing new arrived for a few
    seconds (each trace is decided 1 s after its root span, then batched)."""
    must = {t["trace_id"] for t in run.tasks if t["kind"] != "fast"}
    state = {"count": -1, "since": time.monotonic()}

    def settled() -> bool:
        stored = run.stored()
        spans = sum(len(t["spans"]) for t in stored.values())
        if spans != state["count"]:
            state["count"], state["since"] = spans, time.monotonic()
            return False
        return must <= set(stored) and time.monotonic() - state["since"] > 5

    wait_for(settled, 120, "Jaeger to hold every kept trace", every=1.0)


def _duration_s(spans: dict[str, dict[str, Any]]) -> float:
    starts = [int(s["startTimeUnixNano"]) for s in spans.values()]
    ends = [int(s["endTimeUnixNano"]) for s in spans.values()]
    return (max(ends) - min(starts)) / 1e9


def _tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span.get("tags") or ()}


class TestTailSampling:
    """Slow and failed tasks are kept whole; the rest down to the configured rate."""

    def test_every_failed_and_slow_task_is_kept_whole(self, run: Run):
        local, stored = run.local_spans(), run.stored()
        kept = [t for t in run.tasks if t["kind"] in ("slow", "failed")]
        assert len(kept) == COUNTS["slow"] + COUNTS["failed"]
        for task in kept:
            trace_id = task["trace_id"]
            assert trace_id in stored, task
            assert {s["spanID"].zfill(16) for s in stored[trace_id]["spans"]} == set(
                local[trace_id]), task
        # The slow ones really were slower than the threshold, and longer than the wait
        # after the root: their children arrived long before their task span.
        for task in kept:
            seconds = _duration_s(local[task["trace_id"]])
            assert seconds > 1.0
            if task["kind"] == "slow":
                assert seconds >= SLOW_THRESHOLD_S

    def test_the_rest_is_sampled_at_the_baseline_rate_and_whole(self, run: Run):
        local, stored = run.local_spans(), run.stored()
        # A task the loaded machine made slower than the threshold is rightly kept:
        # only the ones under it are the baseline's.
        fast = [t for t in run.tasks if t["kind"] == "fast"
                and _duration_s(local[t["trace_id"]]) < SLOW_THRESHOLD_S]
        n, p = len(fast), BASELINE
        # Binomial: more than 4 standard deviations out happens about once in 30,000 runs.
        spread = 4 * math.sqrt(n * p * (1 - p))
        # Enough of them that a baseline keeping none would fail (n·p > 4 sd: n > 144).
        assert n * p - spread > 0, f"only {n} fast tasks were under the threshold"
        kept = [t for t in fast if t["trace_id"] in stored]
        assert n * p - spread <= len(kept) <= n * p + spread, (len(kept), n)
        for task in kept:
            trace_id = task["trace_id"]
            assert {s["spanID"].zfill(16) for s in stored[trace_id]["spans"]} == set(
                local[trace_id])
        print(f"\nbaseline kept {len(kept)} of {n} fast tasks ({len(kept) / n:.1%}); "
              f"configured {p:.0%}")

    def test_nothing_else_reaches_jaeger(self, run: Run):
        assert set(run.stored()) <= {t["trace_id"] for t in run.tasks}


class TestJaegerApi:
    """Jaeger's own API returns each task's spans with the budget on the task span."""

    def test_task_llm_call_phases_and_tool_with_budget(self, run: Run):
        task = next(t for t in run.tasks if t["kind"] == "slow")
        body = http_json(f"{run.jaeger.query}/api/traces/{task['trace_id']}")
        (trace,) = body["data"]
        spans = {s["spanID"].zfill(16): s for s in trace["spans"]}
        root = spans[task["span_id"]]
        tags = _tags(root)
        assert root["operationName"] == "invoke_agent slow"
        assert tags[semconv.TASK_NAME] == "slow"
        for component in COMPONENTS:
            assert f"agent_latency.budget.{component}" in tags, component
        assert sum(tags[f"agent_latency.budget.{c}"] for c in COMPONENTS) == pytest.approx(
            root["duration"] / 1e6, abs=1e-3)
        parent_of = {sid: next((r["spanID"].zfill(16) for r in s.get("references") or ()
                                if r["refType"] == "CHILD_OF"), None)
                     for sid, s in spans.items()}
        (llm,) = [sid for sid, s in spans.items() if s["operationName"] == "chat sim-large"]
        assert parent_of[llm] == task["span_id"]
        phases = {spans[sid]["operationName"] for sid, parent in parent_of.items()
                  if parent == llm}
        # A 10 ms prefill (212 tasks on 40 threads: a longer one queues them past the slow
        # threshold) may be taken whole by the network's estimate on a loaded machine
        # (within the max(10 ms, 5 %) the timing is held to): drawn when it is recorded.
        assert "output_generation" in phases and phases <= PHASE_NAMES, phases
        assert ("prefill" in phases) == (_tags(spans[llm])["agent_latency.llm.prefill"] > 0)
        assert _tags(spans[llm])["agent_latency.llm.ttft"] > 0
        (tool,) = [sid for sid, s in spans.items()
                   if s["operationName"] == "execute_tool run_tests"]
        assert parent_of[tool] == task["span_id"]
        process = trace["processes"][root["processID"]]
        assert process["serviceName"] == SERVICE

    def test_failed_task_span_is_an_error(self, run: Run):
        task = next(t for t in run.tasks if t["kind"] == "failed")
        (trace,) = http_json(f"{run.jaeger.query}/api/traces/{task['trace_id']}")["data"]
        root = next(s for s in trace["spans"] if s["spanID"].zfill(16) == task["span_id"])
        tags = _tags(root)
        assert tags.get("otel.status_code") == "ERROR" or tags.get("error") is True


def _report(*sources: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "agent_latency", "report", "--json", *sources],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _assert_close(got: Any, want: Any, path: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), path
        for key in want:
            _assert_close(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            _assert_close(a, b, f"{path}[{i}]")
    elif isinstance(want, float) and "tokens_per_second" in path:
        # tokens / a phase of a few milliseconds: the microseconds show relatively.
        assert got == pytest.approx(want, rel=1e-3), path
    elif isinstance(want, float):
        assert got == pytest.approx(want, abs=MICROSECOND_STORES, rel=0), path
    else:
        assert got == want, path


class TestReportFromJaeger:
    """`agent-latency report jaeger+http://…` on the real Jaeger equals the local file's
    report on the same tasks, within Jaeger's microsecond rounding."""

    def test_same_percentiles_as_the_local_file(self, run: Run):
        stored = run.stored()
        kept = run.tmp / "kept.jsonl"
        with open(kept, "w") as out:
            for line in run.local.read_text().splitlines():
                doc = json.loads(line)
                for rs in doc["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        ss["spans"] = [s for s in ss["spans"] if s["traceId"] in stored]
                out.write(json.dumps(doc) + "\n")
        host = run.jaeger.query.removeprefix("http://")
        from_jaeger = _report(f"jaeger+http://{host}?service={SERVICE}&limit=5000&lookback=1h")
        from_file = _report(str(kept))
        assert from_jaeger["summary"]["all"]["count"] == len(stored)
        assert from_jaeger["problems"] == from_file["problems"] == []
        for part in ("all", "by_name", "by_model"):
            _assert_close(from_jaeger["summary"][part], from_file["summary"][part], part)

    def test_one_trace_by_id(self, run: Run):
        task = next(t for t in run.tasks if t["kind"] == "slow")
        report = _report(f"jaeger+{run.jaeger.query}?trace={task['trace_id']}")
        assert report["summary"]["all"]["count"] == 1

    def test_errors_are_one_line(self, run: Run):
        url = run.jaeger.query
        with pytest.raises(TraceFileError, match="needs \\?service=NAME"):
            load_source(f"jaeger+{url}")
        with pytest.raises(TraceFileError, match="HTTP 404"):
            load_source(f"jaeger+{url}?trace=00000000000000000000000000000001")
        tasks, problems = load_source(f"jaeger+{url}?service=nobody")
        assert (tasks, problems) == ([], [])
