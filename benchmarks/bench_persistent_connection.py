"""The seeds' lever, measured: the same scripted agent task over HTTP with a new connection per
call, over HTTP keep-alive, and over the Responses API's persistent WebSocket, with a round
trip injected in the kernel; and the what-if's persistent-connection projection from the
new-connection run beside the measured WebSocket run.

Not a test: prints a table.  Run as root (the kernel delay needs NFQUEUE and the
``netfilterqueue`` package): ``python benchmarks/bench_persistent_connection.py [--rtt-ms 20]
[--calls 6] [--repeat 3]``.  Without root it falls back to no delay and says so.

Each task: ``--calls`` Responses calls (streamed), each followed by a 50 ms tool, the
simulator in its own process (``SimulatorProcess``) so its work never shares our GIL.  The
openai SDK builds its event models on first use (~0.4 s): one warm-up call per transport,
outside the task.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import openai
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agent_latency
from agent_latency import BudgetSpanProcessor, semconv
from agent_latency.budget import Scenario, project
from agent_latency.codec import span_intervals
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
from agent_latency.simulator import SimulatorConfig, SimulatorProcess, kernel_delay_unavailable

INPUT = "the repository layout and the failing test output " * 40
TOOL_S = 0.05


def _http_call(client: Any) -> None:
    for _ in client.responses.create(model="sim", input=INPUT, stream=True):
        pass


def _ws_call(conn: Any) -> None:
    conn.response.create(model="sim", input=INPUT)
    for event in conn:
        if event.type in ("response.completed", "response.incomplete", "error"):
            return


def run_task(name: str, transport: str, base_url: str, calls: int) -> None:
    """One agent task: ``calls`` model calls, a tool after each."""
    import httpx2

    if transport == "websocket":
        client = openai.OpenAI(base_url=base_url, api_key="sim", max_retries=0)
        with client.responses.connect() as conn:  # warm-up, outside the task
            _ws_call(conn)
        with agent_latency.task(name):
            with client.responses.connect() as conn:
                for _ in range(calls):
                    _ws_call(conn)
                    with agent_latency.tool("run_shell"):
                        time.sleep(TOOL_S)
        client.close()
        return
    keep_alive = transport == "http keep-alive"
    limits = httpx2.Limits(max_keepalive_connections=None if keep_alive else 0)
    client = openai.OpenAI(base_url=base_url, api_key="sim", max_retries=0,
                           http_client=httpx2.Client(limits=limits))
    _http_call(client)  # warm-up (and, with keep-alive, a pooled connection: dropped below)
    client.close()
    client = openai.OpenAI(base_url=base_url, api_key="sim", max_retries=0,
                           http_client=httpx2.Client(limits=limits))
    with agent_latency.task(name):
        for _ in range(calls):
            _http_call(client)
            with agent_latency.tool("run_shell"):
                time.sleep(TOOL_S)
    client.close()


def task_figures(spans: list[Any], name: str) -> dict[str, Any]:
    """Budget, counts, per-call figures and the task's intervals, from its finished spans."""
    task = next(s for s in spans if s.name == f"invoke_agent {name}")
    tid, sid = task.context.trace_id, task.context.span_id
    mine = [s for s in spans if s.context.trace_id == tid and s.context.span_id != sid]
    intervals = []
    calls = [s for s in mine if semconv.LLM_CLIENT in s.attributes]
    for s in mine:
        ivs, kind = span_intervals(s.attributes, s.start_time, s.end_time, s.context.span_id)
        if kind is not None:
            intervals.extend(ivs)
    a = task.attributes
    return {
        "wall": a[semconv.BUDGET_WALL],
        "network": a[semconv.budget_share(semconv.NETWORK_OVERHEAD)],
        "round_trips": a.get(semconv.budget_count("round_trips"), 0),
        "new_connections": a[semconv.budget_count("new_connections")],
        "reuse": a.get(semconv.BUDGET_CONNECTION_REUSE_RATIO),
        "saving": a.get(semconv.BUDGET_CONNECTION_SETUP_SAVING, 0.0),
        "ttft": statistics.mean(c.attributes[semconv.LLM_TTFT] for c in calls),
        "call_network": statistics.mean(c.attributes[semconv.LLM_NETWORK] for c in calls),
        "intervals": intervals, "start": task.start_time, "end": task.end_time,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    unavailable = kernel_delay_unavailable()
    rtt = args.rtt_ms if unavailable is None else 0.0
    if unavailable is not None:
        print(f"kernel delay unavailable ({unavailable}): running with no injected delay")

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BudgetSpanProcessor(MeterProvider()))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument()

    config = SimulatorConfig(port=0, prefill_tps=8000.0, output_tps=400.0,
                             default_output_tokens=40, rtt_ms=rtt, kernel_delay=rtt > 0)
    transports = ("http new connection", "http keep-alive", "websocket")
    results: dict[str, list[dict[str, Any]]] = {t: [] for t in transports}
    with SimulatorProcess(config) as sim:
        base_url = sim.base_url + "/v1"
        for rep in range(args.repeat):
            for transport in transports:
                name = f"{transport} #{rep}"
                exporter.clear()
                run_task(name, transport, base_url, args.calls)
                results[transport].append(task_figures(list(exporter.get_finished_spans()),
                                                       name))

    print(f"\n{args.calls} Responses calls + {args.calls} tools of {TOOL_S * 1e3:.0f} ms per "
          f"task, RTT {rtt:.0f} ms in the kernel, median of {args.repeat} runs")
    print(f"{'transport':<22}{'wall s':>8}{'network s':>11}{'round trips':>13}"
          f"{'new conns':>11}{'reuse':>7}{'TTFT ms':>9}{'net/call ms':>13}{'saving ms':>11}")
    med = {t: _median(rows) for t, rows in results.items()}
    for transport in transports:
        m = med[transport]
        print(f"{transport:<22}{m['wall']:>8.3f}{m['network']:>11.3f}{m['round_trips']:>13.0f}"
              f"{m['new_connections']:>11.0f}{(m['reuse'] or 0):>7.0%}{m['ttft'] * 1e3:>9.1f}"
              f"{m['call_network'] * 1e3:>13.1f}{m['saving'] * 1e3:>11.1f}")

    print("\nwhat-if: persistent connection, projected from each HTTP new-connection run")
    ws_walls = [r["wall"] for r in results["websocket"]]
    ws = statistics.median(ws_walls)
    for i, row in enumerate(results["http new connection"]):
        projected = project(row["intervals"], row["start"], row["end"],
                            Scenario(persistent_connection=True)).projected_wall
        print(f"  run {i}: recorded {row['wall']:.3f} s -> projected {projected:.3f} s; "
              f"measured WebSocket (median) {ws:.3f} s: {100 * (projected - ws) / ws:+.1f} %")
    return 0


def _median(rows: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("wall", "network", "round_trips", "new_connections", "reuse", "saving", "ttft",
            "call_network")
    return {k: statistics.median(float(r[k] or 0.0) for r in rows) for k in keys}


if __name__ == "__main__":
    raise SystemExit(main())
