"""End to end on real servers, the docker-compose path: an instrumented agent against the
simulator sends its metrics over OTLP to the Collector built from the builder manifest
(deploy/otel-collector/config.yaml, addresses on loopback); Prometheus 3 scrapes the
Collector's `prometheus` exporter with the deployed prometheus.yml and our rules and alerts
through Alertmanager to a webhook receiver.  Every server is the release docker-compose.yml
pins, built by `make servers`.

The rules are the deployed ones made fast (_stack.fast_rules: 10 s windows, 2 s ``for``,
1 s evaluation) with the first-token threshold overridden to 1 s the way a deployment
overrides it (a thresholds file of its own).  The simulator's prefill speed is switched per
request through the control file the agent reads before each call.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent_latency.simulator import Simulator, SimulatorConfig

from ._servers import COLLECTOR_CONFIG, loopback, server_binary, start_collector
from ._stack import (
    DEPLOY,
    RULES,
    THRESHOLDS,
    Server,
    Webhook,
    fast_rule_files,
    free_port,
    query,
    start_alertmanager,
    start_prometheus,
    wait_for,
)

pytestmark = pytest.mark.slow

FAST_PREFILL_TPS = 50_000.0   # ~500 input tokens: ~10 ms to the first token
SLOW_PREFILL_TPS = 250.0      # ~2 s to the first token
TTFT_THRESHOLD_S = 1.0
ALERT = "AgentLatencyFirstTokenSlow"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "agent-latency-overview.json"
# What Grafana would put in for its variables when a query runs.
GRAFANA_VARIABLES = {"$__rate_interval": "20s", "$__range": "1m", "$service": ".*",
                     "$provider": ".*", "$model": ".*"}
SERVICE = "prom-agent"
# The scrape job of the agent's own Prometheus endpoint (the path without a Collector).
SDK_JOB = "agent-sdk"


class Stack:
    """The running servers and the agent's control file."""

    __slots__ = ("agent", "alertmanager", "control", "prometheus", "webhook")

    def __init__(self, prometheus: Server, alertmanager: Server, webhook: Webhook,
                 agent: subprocess.Popen[bytes], control: Path) -> None:
        self.prometheus = prometheus
        self.alertmanager = alertmanager
        self.webhook = webhook
        self.agent = agent
        self.control = control

    def set_prefill(self, tokens_per_second: float) -> None:
        self.control.write_text(f"{tokens_per_second}\n")

    def query(self, expr: str) -> list[dict[str, Any]]:
        assert self.agent.poll() is None, "the agent exited"
        return query(self.prometheus, expr)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    binaries = {name: server_binary(name) for name in ("prometheus", "alertmanager")}
    tmp = tmp_path_factory.mktemp("prometheus-stack")
    rule_files = fast_rule_files(tmp, TTFT_THRESHOLD_S)
    control = tmp / "control"
    control.write_text(f"{FAST_PREFILL_TPS}\n")
    webhook = Webhook()
    servers: list[Server] = []
    agent = None
    sim = Simulator(SimulatorConfig(prefill_tps=FAST_PREFILL_TPS, output_tps=400.0))
    try:
        sim.__enter__()
        # Traces are not this test's: the agent sends none, the exporters' peers are unused.
        config, ports = loopback(yaml.safe_load(COLLECTOR_CONFIG.read_text()),
                                 {"jaeger:4317": f"127.0.0.1:{free_port()}",
                                  "tempo:4317": f"127.0.0.1:{free_port()}"})
        collector = start_collector(tmp, config)
        servers.append(collector)
        alertmanager = start_alertmanager(binaries["alertmanager"], tmp, webhook.url)
        servers.append(alertmanager)
        exporter = f"127.0.0.1:{ports['exporters.prometheus.endpoint']}"
        agent_endpoint = free_port()
        prometheus = start_prometheus(binaries["prometheus"], tmp,
                                      {"otel-collector:8889": exporter},
                                      rule_files, f"127.0.0.1:{alertmanager.port}",
                                      {SDK_JOB: f"127.0.0.1:{agent_endpoint}"})
        servers.append(prometheus)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
        env.update({
            "AGENT_LATENCY_DIR": str(tmp / "agent"), "AGENT_LATENCY_SUMMARY": "false",
            "AGENT_LATENCY_PROCESS_TASK": "false", "AGENT_LATENCY_METRIC_TASK_NAMES": "true",
            "OTEL_SERVICE_NAME": SERVICE, "OTEL_TRACES_EXPORTER": "none",
            # Both paths at once: OTLP to the Collector, and the agent's own endpoint.
            "OTEL_METRICS_EXPORTER": "otlp,prometheus", "OTEL_METRIC_EXPORT_INTERVAL": "1000",
            "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
            "OTEL_EXPORTER_PROMETHEUS_PORT": str(agent_endpoint),
            "OTEL_EXPORTER_OTLP_ENDPOINT":
                f"http://127.0.0.1:{ports['receivers.otlp.protocols.http.endpoint']}"})
        with open(tmp / "agent.log", "wb") as log:
            agent = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("prom_agent.py")),
                 sim.base_url, str(control)],
                stdout=log, stderr=subprocess.STDOUT, env=env)
        yield Stack(prometheus, alertmanager, webhook, agent, control)
    finally:
        if agent is not None:
            control.write_text("stop\n")
            try:
                agent.wait(15)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait(5)
        for server in reversed(servers):
            server.stop()
        webhook.close()
        sim.__exit__(None, None, None)


def _has_data(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(sample["value"][1])) for sample in result)


@pytest.fixture(scope="module")
def scraped(stack: Stack) -> Stack:
    """The stack once Prometheus holds enough of the agent's metrics for every query: tasks,
    errors, prefill speeds, tools, over more than one scrape."""
    for expr in ("sum(rate(agent_latency_task_duration_seconds_count[20s])) > 0",
                 "sum(rate(gen_ai_client_operation_duration_seconds_count"
                 '{error_type!=""}[20s])) > 0',
                 "sum(rate(agent_latency_llm_prefill_tokens_per_second_count[20s])) > 0",
                 "sum(rate(agent_latency_tool_duration_seconds_count[20s])) > 0",
                 "count(agent_latency:llm_error_ratio:rate5m) > 0",
                 # Both models' first tokens (the agent alternates them, and its calls 0 and
                 # 10 are server errors): a fast run had scraped only one when asked.
                 "count(count by (gen_ai_request_model) "
                 "(agent_latency_llm_time_to_first_token_seconds_count)) > 1",
                 # The agent's own endpoint, with every family the Collector's job has: a
                 # Python server in a busy process, whose scrape (1 s timeout) can fail for
                 # a while on a loaded machine (a run beside two busy loops found the job
                 # missing when asked).
                 f"count(count by (__name__) ({_families(SDK_JOB)})) >= "
                 f"count(count by (__name__) ({_families(SERVICE)}))"):
        wait_for(lambda expr=expr: _has_data(stack.query(expr)), 60, expr)
    return stack


def _families(job: str) -> str:
    """The selector of ``job``'s agent-latency and GenAI series."""
    return f'{{job="{job}", __name__=~"agent_latency_.+|gen_ai_.+"}}'


def _eventually(check: Any, what: str, timeout: float = 30.0) -> None:
    """Wait up to ``timeout`` for ``check()`` to hold, then let the caller's assertion say
    what was seen: a scrape of the agent's own endpoint that times out marks its series
    stale until the next one succeeds."""
    try:
        wait_for(check, timeout, what)
    except AssertionError:
        pass


def _panel_targets(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    for panel in panels:
        yield from _panel_targets(panel.get("panels", []))
        for target in panel.get("targets", []):
            if target.get("expr"):
                yield panel["title"], target["expr"]


def _grafana(expr: str) -> str:
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
    return expr


def _rules(path: Path) -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(path.read_text())["groups"]
            for rule in group["rules"]]


class TestDashboardQueries:
    """Every PromQL query of every dashboard panel returns data from a real agent run."""

    def test_every_panel_query_returns_data(self, scraped: Stack):
        board = json.loads(DASHBOARD.read_text())
        targets = list(_panel_targets(board["panels"]))
        assert len(targets) >= 15
        empty = [(title, expr) for title, expr in targets
                 if not _has_data(scraped.query(_grafana(expr)))]
        assert empty == []

    def test_every_variable_has_values(self, scraped: Stack):
        board = json.loads(DASHBOARD.read_text())
        for variable in board["templating"]["list"]:
            metric, label = variable["query"].removeprefix("label_values(").rstrip(")").split(
                ", ")
            values = {s["metric"][label] for s in scraped.query(metric)}
            assert values, variable["name"]
        models = {s["metric"]["gen_ai_request_model"]
                  for s in scraped.query("agent_latency_llm_time_to_first_token_seconds_count")}
        assert models == {"sim-large", "sim-small"}
        # The Collector turns the agent's service.name into `job` (honor_labels); the agent's
        # own endpoint is scraped as its own job.
        def services() -> set[str]:
            return {s["metric"]["job"]
                    for s in scraped.query("gen_ai_client_operation_duration_seconds_count")}

        _eventually(lambda: services() == {SERVICE, SDK_JOB}, "both jobs' series")
        assert services() == {SERVICE, SDK_JOB}


class TestBothPaths:
    """The Collector's exporter and the agent's own endpoint give the same metric names and
    labels, so one set of rules and dashboards serves both."""

    def test_same_names_and_labels(self, scraped: Stack):
        def families(job: str) -> dict[str, set[str]]:
            series = scraped.query(_families(job))
            found: dict[str, set[str]] = {}
            for sample in series:
                labels = set(sample["metric"]) - {"__name__", "job", "instance"}
                found.setdefault(sample["metric"]["__name__"], set()).update(labels)
            return found

        _eventually(lambda: families(SERVICE) == families(SDK_JOB), "the same families")
        collector, sdk = families(SERVICE), families(SDK_JOB)
        assert len(collector) >= 20
        assert sorted(collector) == sorted(sdk)
        assert collector == sdk


class TestTaskWallTime:
    """The wall-time histogram arrives by task name (the agent turned names on), with
    buckets past an hour."""

    def test_by_task_name_with_hour_buckets(self, scraped: Stack):
        series = scraped.query('agent_latency_task_wall_time_seconds_bucket{le="+Inf"}')
        assert {s["metric"]["agent_latency_task_name"] for s in series} == {"fix-tests"}
        bounds = {float(s["metric"]["le"]) for s in scraped.query(
            "agent_latency_task_wall_time_seconds_bucket")}
        assert max(b for b in bounds if math.isfinite(b)) > 3600


class TestRuleExpressions:
    """Every recording and alert rule as deployed (5 m windows) evaluates to data."""

    def test_recording_rules_return_data(self, scraped: Stack):
        rules = [r for r in _rules(RULES) + _rules(THRESHOLDS) if "record" in r]
        assert len(rules) == 10
        empty = [r["record"] for r in rules if not _has_data(scraped.query(r["expr"]))]
        assert empty == []

    def test_alert_conditions_return_data(self, scraped: Stack):
        # Compared with ``bool`` the condition yields 0 or 1 per series instead of filtering:
        # data whenever both sides have data, firing or not.
        alerts = [r for r in _rules(RULES) if "alert" in r]
        assert len(alerts) == 4
        empty = []
        for rule in alerts:
            expr = rule["expr"].replace("> on()", "> bool on()").replace("< on()",
                                                                          "< bool on()")
            assert " bool " in expr, rule["alert"]
            if not _has_data(scraped.query(expr)):
                empty.append(rule["alert"])
        assert empty == []


class TestFirstTokenAlert:
    """Slow prefill fires the first-token alert through Alertmanager; fast prefill resolves it."""

    def test_fires_then_resolves_at_the_webhook(self, scraped: Stack):
        def about(notification: dict[str, Any], status: str) -> bool:
            return notification["status"] == status and any(
                a["labels"].get("alertname") == ALERT for a in notification["alerts"])

        assert not [n for n in scraped.webhook.notifications if about(n, "firing")]
        started = time.monotonic()
        scraped.set_prefill(SLOW_PREFILL_TPS)
        firing = scraped.webhook.wait(lambda n: about(n, "firing"), timeout=60)
        fired_after = time.monotonic() - started
        alert = next(a for a in firing["alerts"] if a["labels"]["alertname"] == ALERT)
        assert alert["labels"]["gen_ai_provider_name"] == "openai"
        assert alert["labels"]["gen_ai_request_model"] in {"sim-large", "sim-small"}
        assert alert["labels"]["severity"] == "warning"
        assert "First-token time p95" in alert["annotations"]["summary"]

        scraped.set_prefill(FAST_PREFILL_TPS)
        resolved = scraped.webhook.wait(lambda n: about(n, "resolved"), timeout=60)
        assert all(a["status"] == "resolved" for a in resolved["alerts"])
        print(f"\nfired {fired_after:.1f} s after prefill slowed; resolved "
              f"{time.monotonic() - started - fired_after:.1f} s after it was fast again")
