"""Fleet metrics on the real servers, for agents that live one process per task.

Every agent here is its own process (fleet_agent.py): short ones run one task (a streamed
call on the simulator, a tool) and exit, which is their only export; long-lived ones export
every second.  They send OTLP, as deployed (delta temporality, agent-latency's default), to
the Collector built from the builder manifest with the deployed config.yaml; Prometheus 3
scrapes it with the deployed prometheus.yml and the deployed rules, made fast as the other
Prometheus tests make them (_stack.fast_rules: 30 s windows, 2 s ``for``), and alerts through
the real Alertmanager to a webhook.  The first-token threshold is overridden to 0.5 s the way
a deployment overrides it.  Each fleet is its own service (the ``job`` label) and model, so
the fleets share the servers and are still told apart.

What must hold: every process is counted once (the Collector's totals equal what the agents
did, and ``increase()`` sees them within 10 %); the first-token p95 is within one bucket of
the agents' own; the first-token alert fires for a slow fleet and not for a fast one; the
series per metric do not grow with the number of processes; an exemplar's trace id is a trace
Jaeger holds.
"""

from __future__ import annotations

import bisect
import math
import statistics
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from machine_load import busy_slack

from agent_latency import semconv
from agent_latency.simulator import Simulator, SimulatorConfig

from ._fleet import CALLS, OURS, TASKS, TTFT, FleetRun, run_fleet
from ._servers import (
    COLLECTOR_CONFIG,
    Jaeger,
    loopback,
    server_binary,
    shortened,
    start_collector,
)
from ._stack import (
    Server,
    Webhook,
    fast_rule_files,
    free_port,
    http_json,
    query,
    start_alertmanager,
    start_prometheus,
    wait_for,
)

pytestmark = pytest.mark.slow

WINDOW_S = 30
TTFT_THRESHOLD_S = 0.5
FAST_PREFILL_TPS = 50_000.0   # ~500 input tokens: ~10 ms to the first token
SLOW_PREFILL_TPS = 800.0      # ~0.6 s to the first token, more when calls queue
PROCESSES = 20
AT_ONCE = 3
LIFETIME_S = 2.0
# The SDK's default OTEL_METRIC_EXPORT_INTERVAL: a process living less exports only at exit.
EXPORT_INTERVAL_S = 60.0
ALERT = "AgentLatencyFirstTokenSlow"


class Fleet:
    """The servers, and agent processes run against them."""

    __slots__ = ("jaeger", "otlp_http", "prometheus", "sim", "tmp", "webhook")

    def __init__(self, tmp: Path, sim: Simulator, otlp_http: str, prometheus: Server,
                 webhook: Webhook, jaeger: Jaeger) -> None:
        self.tmp = tmp
        self.sim = sim
        self.otlp_http = otlp_http
        self.prometheus = prometheus
        self.webhook = webhook
        self.jaeger = jaeger

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        return query(self.prometheus, expr, at)

    def value(self, expr: str, at: float | None = None) -> float:
        result = self.query(expr, at)
        return float(result[0]["value"][1]) if result else math.nan

    def run(self, service: str, prefill_tps: float, processes: int, at_once: int,
            seconds: float = 0.0) -> FleetRun:
        """``processes`` agents of ``service`` (also their model's name), at most
        ``at_once`` alive at a time, each running tasks for ``seconds`` (one task: 0).  A
        long-lived one exports every second; a one-task one only at exit (the export
        interval, 60 s by default, is far longer than it lives)."""
        env = {"OTEL_METRIC_EXPORT_INTERVAL": "1000"} if seconds else {}
        return run_fleet(self.tmp, self.sim.base_url, self.otlp_http, service, prefill_tps,
                         processes, at_once, seconds, env)

    def settled(self, run: FleetRun) -> None:
        """Until Prometheus has scraped every task of ``run`` from the Collector."""
        expr = f"sum({TASKS}{{{run.selector}}})"
        wait_for(lambda: self.value(expr) == len(run.tasks), 30,
                 f"{expr} == {len(run.tasks)} (last {self.value(expr)})")
        time.sleep(2)  # a scrape more, so increase() has the last value twice


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    binaries = {name: server_binary(name) for name in ("prometheus", "alertmanager")}
    tmp = tmp_path_factory.mktemp("fleet")
    rule_files = fast_rule_files(tmp, TTFT_THRESHOLD_S, f"{WINDOW_S}s")
    webhook = Webhook()
    servers: list[Server] = []
    jaeger = None
    sim = Simulator(SimulatorConfig(prefill_tps=FAST_PREFILL_TPS, output_tps=400.0))
    try:
        sim.__enter__()
        jaeger = Jaeger(tmp)
        # Traces as deployed, decided quickly; first tokens over the test's alert threshold
        # kept (5 s deployed, below its 10 s threshold): what an exemplar of a slow first
        # token points at is kept.
        config, ports = loopback(
            shortened(yaml.safe_load(COLLECTOR_CONFIG.read_text()),
                      slow_first_token_s=TTFT_THRESHOLD_S),
            {"jaeger:4317": jaeger.otlp_grpc, "tempo:4317": f"127.0.0.1:{free_port()}"})
        servers.append(start_collector(tmp, config))
        alertmanager = start_alertmanager(binaries["alertmanager"], tmp, webhook.url)
        servers.append(alertmanager)
        prometheus = start_prometheus(
            binaries["prometheus"], tmp,
            {"otel-collector:8889": f"127.0.0.1:{ports['exporters.prometheus.endpoint']}"},
            rule_files, f"127.0.0.1:{alertmanager.port}")
        servers.append(prometheus)
        yield Fleet(tmp, sim, f"http://127.0.0.1:{ports['receivers.otlp.protocols.http.endpoint']}",
                    prometheus, webhook, jaeger)
    finally:
        for server in reversed(servers):
            server.stop()
        if jaeger is not None:
            jaeger.stop()
        webhook.close()
        sim.__exit__(None, None, None)


def _series_per_metric(fleet: Fleet, run: FleetRun) -> dict[str, int]:
    return {s["metric"]["__name__"]: int(s["value"][1]) for s in fleet.query(
        f"count by (__name__) ({{{run.selector}, {OURS}}})")}


def _bucket(seconds: float) -> int:
    """The index of the first-token bucket that holds ``seconds``."""
    return bisect.bisect_left(semconv.TIME_TO_FIRST_TOKEN_BUCKETS, seconds)


def _about(notification: dict[str, Any], status: str, model: str) -> bool:
    return notification["status"] == status and any(
        a["labels"].get("alertname") == ALERT
        and a["labels"].get("gen_ai_request_model") == model
        for a in notification["alerts"])


def _assert_short(run: FleetRun) -> None:
    """The processes lived under 2 s (a loaded machine stretches every one of them: then
    their median), far less than the export interval: each exported once, at exit."""
    assert len(run.lifetimes) == PROCESSES
    assert max(run.lifetimes) < EXPORT_INTERVAL_S / 4, run.lifetimes
    bound = LIFETIME_S + 20 * busy_slack()
    assert (max(run.lifetimes) if bound == LIFETIME_S else statistics.median(
        run.lifetimes)) < bound, run.lifetimes


def _check_counts(fleet: Fleet, run: FleetRun) -> dict[str, float]:
    """Nothing lost, nothing counted twice, and ``increase()`` sees the fleet."""
    fleet.settled(run)
    window = run.window()
    want = len(run.tasks)
    found = {}
    for name, metric in (("tasks", TASKS), ("calls", CALLS), ("first tokens", f"{TTFT}_count")):
        assert fleet.value(f"sum({metric}{{{run.selector}}})") == want, name
        # At the last scrape: increase() extrapolates from its last sample to the end of
        # the range, by up to a scrape interval of the fleet's slope.
        last = fleet.value(f"max(timestamp({metric}{{{run.selector}}}))")
        found[name] = fleet.value(f"sum(increase({metric}{{{run.selector}}}{window}))", last)
        assert found[name] == pytest.approx(want, rel=0.10), (name, found[name], want)
    return found


@pytest.fixture(scope="module")
def fast(fleet: Fleet) -> FleetRun:
    return fleet.run("fleet-fast", FAST_PREFILL_TPS, PROCESSES, AT_ONCE)


@pytest.fixture(scope="module")
def slow(fleet: Fleet, fast: FleetRun) -> FleetRun:
    # Two at a time: the simulator prefills one call after another, as a server does, so
    # more at once would queue them past the 2 s the processes are to live.
    return fleet.run("fleet-slow", SLOW_PREFILL_TPS, PROCESSES, 2)


@pytest.fixture(scope="module")
def long_lived(fleet: Fleet, slow: FleetRun) -> FleetRun:
    return fleet.run("fleet-long-lived", FAST_PREFILL_TPS, 3, 3, seconds=6.0)


class TestShortProcesses:
    """20 agent processes, each living under 2 s and exporting once, at exit."""

    def test_each_process_is_counted_once(self, fleet: Fleet, fast: FleetRun):
        assert len(fast.lifetimes) == len(fast.tasks) == PROCESSES
        _assert_short(fast)
        found = _check_counts(fleet, fast)
        print(f"\n{PROCESSES} processes (lifetimes {min(fast.lifetimes):.2f}-"
              f"{max(fast.lifetimes):.2f} s, median {statistics.median(fast.lifetimes):.2f} s):"
              f" increase() saw {found}")


class TestFirstTokenAlert:
    """The first-token alert fires through Alertmanager for a slow fleet of short processes,
    and stays quiet for a fast one although the fleet is busy enough for it to count."""

    def test_quiet_when_fast(self, fleet: Fleet, fast: FleetRun):
        fleet.settled(fast)
        model = f'gen_ai_request_model="{fast.service}"'
        # The alert's minimum-rate condition holds for the fleet: only the p95 keeps it quiet.
        expr = f"agent_latency:llm_time_to_first_token_seconds:calls_rate5m{{{model}}}"
        rate = wait_for(lambda: (lambda v: v if v > 0 else None)(fleet.value(expr)), 30, expr)
        assert rate > fleet.value("agent_latency:threshold:ttft_min_calls_per_second")
        p95 = fleet.value(f"agent_latency:llm_time_to_first_token_seconds:p95_rate5m{{{model}}}")
        assert p95 < TTFT_THRESHOLD_S
        time.sleep(4)  # the alert's 2 s hold, twice
        assert fleet.query(f'ALERTS{{alertname="{ALERT}", {model}}}') == []
        assert not [n for n in fleet.webhook.notifications
                    if _about(n, "firing", fast.service)]

    def test_fires_when_slow(self, fleet: Fleet, slow: FleetRun):
        assert len(slow.tasks) == PROCESSES
        _assert_short(slow)
        firing = fleet.webhook.wait(lambda n: _about(n, "firing", slow.service), timeout=60)
        alert = next(a for a in firing["alerts"] if a["labels"]["alertname"] == ALERT)
        assert alert["labels"]["gen_ai_provider_name"] == "openai"
        found = _check_counts(fleet, slow)
        print(f"\nslow fleet (lifetimes {min(slow.lifetimes):.2f}-{max(slow.lifetimes):.2f} s):"
              f" fired; increase() saw {found}")


class TestFirstTokenP95:
    """The fleet's first-token p95 from Prometheus is within one bucket of the agents' own."""

    def test_first_token_p95_within_a_bucket(self, fleet: Fleet, fast: FleetRun,
                                             slow: FleetRun):
        for run in (fast, slow):
            fleet.settled(run)
            truth = statistics.quantiles([t["first_token_s"] for t in run.tasks], n=20)[-1]
            p95 = fleet.value(f"histogram_quantile(0.95, sum by (le) "
                              f"(increase({TTFT}_bucket{{{run.selector}}}{run.window()})))")
            assert math.isfinite(p95), run.service
            assert abs(_bucket(p95) - _bucket(truth)) <= 1, (run.service, p95, truth)
            print(f"\n{run.service}: first-token p95 {p95:.3f} s from Prometheus, "
                  f"{truth:.3f} s measured by the agents")


class TestLongLivedProcesses:
    """Three agents that live for several export intervals: every task counted once."""

    def test_nothing_counted_twice(self, fleet: Fleet, long_lived: FleetRun):
        assert len(long_lived.lifetimes) == 3
        assert len(long_lived.tasks) > 3 * 3  # several tasks, several exports each
        found = _check_counts(fleet, long_lived)
        print(f"\n3 long-lived processes, {len(long_lived.tasks)} tasks: increase() saw {found}")


class TestSeries:
    """One series per label set, however many processes sent it."""

    def test_series_do_not_grow_with_processes(self, fleet: Fleet, fast: FleetRun,
                                               slow: FleetRun, long_lived: FleetRun):
        for run in (fast, slow, long_lived):
            fleet.settled(run)
        # 20 processes and 3 processes: the same series, metric by metric.
        few, many = _series_per_metric(fleet, long_lived), _series_per_metric(fleet, fast)
        assert len(many) >= 10
        assert many == few
        # No per-process label reaches Prometheus.
        labels = {k for s in fleet.query(f"{{{fast.selector}, {OURS}}}") for k in s["metric"]}
        assert not labels & {"service_instance_id", "process_pid", "host_name"}
        # One instance: the Collector's, as scraped, whichever process sent the data.
        assert len({s["metric"]["instance"] for s in fleet.query(
            f"{{{fast.selector}, {OURS}}}")}) == 1


class TestExemplars:
    """An exemplar on the first-token histogram is the id of a trace Jaeger holds."""

    def test_exemplar_trace_is_in_jaeger(self, fleet: Fleet, slow: FleetRun):
        fleet.settled(slow)
        params = urllib.parse.urlencode({
            "query": f"{TTFT}_bucket{{{slow.selector}}}",
            "start": slow.started - 5, "end": time.time()})
        body = http_json(f"{fleet.prometheus.url}/api/v1/query_exemplars?{params}")
        trace_ids = {e["labels"]["trace_id"] for series in body["data"]
                     for e in series["exemplars"]}
        assert trace_ids, body
        ours = {t["trace_id"] for t in slow.tasks}
        assert trace_ids <= ours
        for trace_id in trace_ids:
            trace = wait_for(lambda trace_id=trace_id: _jaeger_trace(fleet, trace_id), 30,
                             f"trace {trace_id} in Jaeger")
            names = {s["operationName"] for s in trace["spans"]}
            assert f"chat {slow.service}" in names


def _jaeger_trace(fleet: Fleet, trace_id: str) -> dict[str, Any] | None:
    try:
        (trace,) = http_json(f"{fleet.jaeger.query}/api/traces/{trace_id}")["data"]
    except urllib.error.HTTPError:
        return None
    return trace  # type: ignore[no-any-return]
