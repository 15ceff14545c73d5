"""Fleet metrics: what Prometheus counts for a fleet of short-lived agent processes, and how
many series they leave, through each path the production docs weigh.

Each agent process (tests/production/fleet_agent.py) runs one task with one streamed call on
the simulator and exits, exporting its metrics once, at exit.  A first batch of FIRST
processes, then the rest up to PROCESSES (default 10 and 100); after each, the totals, what
``increase()`` sees, and the series per metric.  Paths, each on fresh servers built by
`make servers` (AGENT_LATENCY_SERVERS):

- ``collector, cumulative``: the Collector as it was (no transform/fleet, no
  delta_to_cumulative) and agents sending cumulative series: one series per process.
- ``collector, delta`` (deployed): agents send deltas, the Collector adds the fleet up,
  Prometheus with docker-compose.yml's features (a new series starts from zero).
- ``collector, delta, no zero``: the same without Prometheus' created-timestamp zero.
- ``prometheus otlp, cumulative`` and ``prometheus otlp, delta``: no Collector, the agents
  send to Prometheus 3's own OTLP receiver (deltas with its otlp-deltatocumulative).

    AGENT_LATENCY_SERVERS=.servers/bin python benchmarks/bench_fleet_metrics.py [PROCESSES [PATH]]

(PATH: only the paths whose name contains it.)

Prints a table; never fails (the tests hold the bounds).
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))

from tests.production._fleet import OURS, TASKS, FleetRun, run_fleet  # noqa: E402
from tests.production._servers import (  # noqa: E402
    COLLECTOR_CONFIG,
    loopback,
    server_binary,
    start_collector,
)
from tests.production._stack import (  # noqa: E402
    Server,
    compose_prometheus_features,
    query,
    start_prometheus,
)

from agent_latency.simulator import Simulator, SimulatorConfig  # noqa: E402

FIRST = 10
AT_ONCE = 8
FLEET_PROCESSORS = ("transform/fleet", "delta_to_cumulative")


def _value(prometheus: Server, expr: str) -> float:
    result = query(prometheus, expr)
    return float(result[0]["value"][1]) if result else math.nan


def _series(prometheus: Server, job: str) -> tuple[int, int]:
    """The most series any one metric of ours has for ``job``, and all of them."""
    counts = [int(s["value"][1]) for s in query(
        prometheus, f'count by (__name__) ({{job="{job}", {OURS}}})')]
    return (max(counts) if counts else 0), sum(counts)


def _collector(tmp: Path, fleet: bool) -> tuple[Server, str, str]:
    config = yaml.safe_load(COLLECTOR_CONFIG.read_text())
    if not fleet:
        pipeline = config["service"]["pipelines"]["metrics"]
        pipeline["processors"] = [p for p in pipeline["processors"]
                                  if p not in FLEET_PROCESSORS]
        for name in FLEET_PROCESSORS:
            del config["processors"][name]
    config["service"]["pipelines"].pop("traces")
    config, ports = loopback(config)
    server = start_collector(tmp, config)
    return (server, f"http://127.0.0.1:{ports['receivers.otlp.protocols.http.endpoint']}",
            f"127.0.0.1:{ports['exporters.prometheus.endpoint']}")


def _path(name: str, tmp: Path, sim: Simulator, processes: int,
          start: Callable[[Path], tuple[list[Server], Server, str]],
          env: dict[str, str]) -> dict[str, Any]:
    servers, prometheus, otlp = start(tmp)
    service = name.replace(" ", "-").replace(",", "")
    row: dict[str, Any] = {"path": name}
    try:
        done: list[FleetRun] = []
        for batch, count in (("first", FIRST), ("all", processes - FIRST)):
            done.append(run_fleet(tmp, sim.base_url, otlp, service, 50_000.0, count,
                                  AT_ONCE, env=env))
            time.sleep(5)  # the Collector's batch, two scrapes
            tasks = sum(len(run.tasks) for run in done)
            window = done[0].window()
            row[f"{batch} tasks"] = tasks
            row[f"{batch} total"] = _value(prometheus, f'sum({TASKS}{{job="{service}"}})')
            row[f"{batch} increase"] = _value(
                prometheus, f'sum(increase({TASKS}{{job="{service}"}}{window}))')
            row[f"{batch} series"] = _series(prometheus, service)
        row["lifetime max"] = max(max(run.lifetimes) for run in done)
    finally:
        for server in reversed(servers):
            server.stop()
    return row


def main() -> int:
    processes = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    prometheus_binary = server_binary("prometheus")
    features = compose_prometheus_features()
    no_zero = [f for f in features if "created-timestamp" not in f]

    def through_collector(fleet: bool, flags: list[str]) -> Callable[
            [Path], tuple[list[Server], Server, str]]:
        def start(tmp: Path) -> tuple[list[Server], Server, str]:
            collector, otlp, exporter = _collector(tmp, fleet)
            prometheus = start_prometheus(prometheus_binary, tmp,
                                          {"otel-collector:8889": exporter}, [], None,
                                          flags=flags)
            return [collector, prometheus], prometheus, otlp
        return start

    def straight(flags: list[str]) -> Callable[[Path], tuple[list[Server], Server, str]]:
        def start(tmp: Path) -> tuple[list[Server], Server, str]:
            prometheus = start_prometheus(prometheus_binary, tmp, {}, [], None,
                                          flags=["--web.enable-otlp-receiver", *flags])
            return [prometheus], prometheus, f"{prometheus.url}/api/v1/otlp"
        return start

    cumulative = {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "cumulative"}
    paths = [
        ("collector, cumulative", through_collector(False, features), cumulative),
        ("collector, delta", through_collector(True, features), {}),
        ("collector, delta, no zero", through_collector(True, no_zero), {}),
        ("prometheus otlp, cumulative", straight(features), cumulative),
        ("prometheus otlp, delta",
         straight([*features, "--enable-feature=otlp-deltatocumulative"]), {}),
    ]
    print(f"{processes} one-task agent processes per path ({FIRST} first), {AT_ONCE} at once")
    print(f"{'path':30} {'tasks':>6} {'total':>6} {'increase()':>10} "
          f"{'series: most per metric / all':>31}")
    with Simulator(SimulatorConfig(prefill_tps=50_000.0, output_tps=400.0)) as sim:
        for name, start, env in paths:
            if only not in name:
                continue
            tmp = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
            try:
                row = _path(name, tmp, sim, processes, start, env)
            except Exception as exc:  # noqa: BLE001 - a path that fails is a row, not a stop
                print(f"{name:30} failed: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            for batch in ("first", "all"):
                most, every = row[f"{batch} series"]
                print(f"{name if batch == 'first' else '':30} {row[f'{batch} tasks']:>6} "
                      f"{row[f'{batch} total']:>6.0f} {row[f'{batch} increase']:>10.1f} "
                      f"{most:>14} / {every:<14}")
            print(f"{'':30} (longest process lifetime {row['lifetime max']:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
