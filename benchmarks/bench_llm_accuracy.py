"""How close agent-latency's LLM phases are to the simulator's ground truth.

Runs the real ``openai`` and ``anthropic`` SDKs, and litellm (its OpenAI and Anthropic
providers), against the simulator in a child process
(its own GIL, so the server's timing does not steal the client's), with the truth file on,
and compares per call:

* prefill (ours: ``agent_latency.llm.prefill``; truth: the server's own time from the request
  body received to the first output token written, ``first_token_at - started_at``, which is
  ``queue_s + prefill_s`` plus the server's request handling) and output generation
  (``agent_latency.llm.output_generation`` vs ``output_generation_s``) of streaming calls —
  goal: within max(1 ms, 2 %).  One warm-up call per path is left out (first-call imports);
* with ``--rtt-ms`` delay, the call's network overhead (``agent_latency.llm.network``) vs
  the injected delay (one RTT, plus one more for a new connection's handshake) — goal: within
  max(2 ms, 10 %).  Printed raw and less the median network figure of the same calls without
  injected delay (loopback upload and the stream's tail, ~1 ms, are there either way); the
  verdict uses the corrected figure.  The kernel delay (NFQUEUE, root) is used when available: an
  application-level proxy is invisible to the kernel's RTT estimate.

    python benchmarks/bench_llm_accuracy.py [--calls 16] [--rtt-ms 20]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from typing import Any

import anthropic
import openai

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the internet
import litellm
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_latency import semconv
from agent_latency.instrumentation.llm.anthropic import AnthropicInstrumentor
from agent_latency.instrumentation.llm.litellm import LiteLLMInstrumentor
from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
from agent_latency.simulator import SimulatorConfig, SimulatorProcess, kernel_delay_unavailable

PREFILL_TPS = 5000.0
OUTPUT_TPS = 100.0


PATHS = 4  # openai SDK, anthropic SDK, litellm openai/, litellm anthropic/
LITELLM_MODEL = "sim-litellm"  # tells litellm's calls apart in the table


def _setup() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument()
    AnthropicInstrumentor().instrument()
    LiteLLMInstrumentor().instrument()
    return exporter


def _run_calls(base_url: str, calls: int) -> None:
    oa = openai.OpenAI(base_url=base_url + "/v1", api_key="sk-bench", max_retries=0)
    an = anthropic.Anthropic(base_url=base_url, api_key="sk-bench", max_retries=0)
    for i in range(-PATHS, calls):  # the first round is warm-up, one call per path
        words = 450 + 500 * (i % 4)  # ~600 to ~2600 input tokens: 0.12 s to 0.5 s of prefill
        output = 10 + 10 * (i % 3)
        messages = [{"role": "user", "content": "measure " * words}]
        path = i % PATHS
        if path == 0:
            for _ in oa.chat.completions.create(
                    model="sim", messages=messages, stream=True, max_tokens=output,
                    stream_options={"include_usage": True}):
                pass
        elif path == 1:
            with an.messages.stream(model="sim", max_tokens=output, messages=messages) as s:
                for _ in s:
                    pass
        else:
            provider, base = (("openai", base_url + "/v1") if path == 2
                              else ("anthropic", base_url))
            for _ in litellm.completion(model=f"{provider}/{LITELLM_MODEL}", api_base=base,
                                        api_key="sk-bench", messages=messages, stream=True,
                                        max_tokens=output,
                                        stream_options={"include_usage": True}):
                pass
        time.sleep(0.02)
    oa.close()
    an.close()


def _truth_by_id(sim: SimulatorProcess, count: int) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + 5
    records = sim.truth
    while len(records) < count and time.monotonic() < deadline:
        time.sleep(0.05)
        records = sim.truth
    return {r["request_id"]: r for r in records}


def _within(err: float, truth: float, abs_tol: float, rel_tol: float) -> bool:
    return abs(err) <= max(abs_tol, rel_tol * abs(truth))


# A shared 2-core machine stalls a process now and then (a few ms): the verdict asks for
# this share of calls within tolerance, and prints every call.
REQUIRED_SHARE = 0.9


def _verdict(rows: list[dict[str, Any]], key: str, truth: str, abs_tol: float,
             rel_tol: float) -> bool:
    inside = sum(_within(r[key] - r[truth], r[truth], abs_tol, rel_tol) for r in rows)
    return bool(rows) and inside >= REQUIRED_SHARE * len(rows)


def _table(title: str, rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))


def measure(exporter: InMemorySpanExporter, config: SimulatorConfig, calls: int,
            rtt_s: float) -> list[dict[str, Any]]:
    exporter.clear()
    with SimulatorProcess(config) as sim:
        _run_calls(sim.base_url, calls)
        truth = _truth_by_id(sim, calls)
    out = []
    for span in exporter.get_finished_spans()[PATHS:]:
        a = span.attributes or {}
        if semconv.LLM_CLIENT not in a:
            continue
        t = truth.get(str(a.get(semconv.LLM_SERVER_REQUEST_ID)))
        if t is None:
            continue
        new_conn = a.get(semconv.LLM_CONNECTION_REUSED) is False
        via = " via litellm" if a.get(semconv.GEN_AI_REQUEST_MODEL) == LITELLM_MODEL else ""
        out.append({
            "provider": a[semconv.GEN_AI_PROVIDER_NAME] + via,
            "prefill": a[semconv.LLM_PREFILL],
            "prefill_truth": t["first_token_at_mono"] - t["started_at_mono"],
            "prefill_sleep": (t["queue_s"] or 0.0) + t["prefill_s"],
            "gen": a[semconv.LLM_OUTPUT_GENERATION],
            "gen_truth": t["output_generation_s"],
            "network": a[semconv.LLM_NETWORK],
            "network_truth": rtt_s * (2 if new_conn else 1),
            "server_tail": (t.get("finished_at_mono") or t["last_token_at_mono"])
            - t["last_token_at_mono"],
            "rtt": a[semconv.LLM_RTT], "rtt_source": a[semconv.LLM_RTT_SOURCE],
            "parts": " ".join(f"{a[attr] * 1e3:.2f}" for attr in (
                semconv.LLM_CONNECT, semconv.LLM_UPLOAD, semconv.LLM_RTT, semconv.LLM_TAIL)),
            "new": new_conn,
        })
    return out


def report_phases(rows: list[dict[str, Any]], title: str) -> bool:
    table = []
    for i, r in enumerate(rows):
        ep = r["prefill"] - r["prefill_truth"]
        eg = r["gen"] - r["gen_truth"]
        good = (_within(ep, r["prefill_truth"], 1e-3, 0.02)
                and _within(eg, r["gen_truth"], 1e-3, 0.02))
        table.append([str(i), r["provider"], f"{r['prefill_sleep'] * 1e3:.2f}",
                      f"{r['prefill_truth'] * 1e3:.2f}",
                      f"{r['prefill'] * 1e3:.2f}", f"{ep * 1e3:+.2f}",
                      f"{r['gen_truth'] * 1e3:.2f}", f"{r['gen'] * 1e3:.2f}",
                      f"{eg * 1e3:+.2f}", "ok" if good else "MISS"])
    ok = (_verdict(rows, "prefill", "prefill_truth", 1e-3, 0.02)
          and _verdict(rows, "gen", "gen_truth", 1e-3, 0.02))
    _table(title, table, ["call", "provider", "queue+prefill ms", "server ttft ms", "ours ms",
                          "err ms", "output truth ms", "ours ms", "err ms", "max(1ms,2%)"])
    _summary(rows, "prefill", "prefill_truth", 1e-3, 0.02)
    _summary(rows, "gen", "gen_truth", 1e-3, 0.02)
    return ok


def report_network(rows: list[dict[str, Any]], title: str, baseline: float) -> bool:
    table = []
    for i, r in enumerate(rows):
        raw = r["network"] - r["network_truth"]
        err = raw - baseline
        r["network_corrected"] = r["network"] - baseline
        good = _within(err, r["network_truth"], 2e-3, 0.10)
        table.append([str(i), r["provider"], "new" if r["new"] else "reused",
                      f"{r['network_truth'] * 1e3:.2f}", f"{r['network'] * 1e3:.2f}",
                      f"{raw * 1e3:+.2f}", f"{err * 1e3:+.2f}",
                      f"{r['rtt'] * 1e3:.2f} ({r['rtt_source']})",
                      r["parts"], f"{r['server_tail'] * 1e3:.2f}",
                      "ok" if good else "MISS"])
    print(f"\n(no-delay baseline: median network {baseline * 1e3:.2f} ms)")
    _table(title, table, ["call", "provider", "connection", "injected ms", "network ms",
                          "raw err ms", "corrected err ms", "rtt ms (source)",
                          "connect/upload/rtt/tail ms", "server tail ms", "max(2ms,10%)"])
    _summary(rows, "network", "network_truth", 2e-3, 0.10)
    _summary(rows, "network_corrected", "network_truth", 2e-3, 0.10)
    return _verdict(rows, "network_corrected", "network_truth", 2e-3, 0.10)


def _summary(rows: list[dict[str, Any]], key: str, truth: str, abs_tol: float,
             rel_tol: float) -> None:
    errs = [abs(r[key] - r[truth]) * 1e3 for r in rows]
    inside = sum(_within(r[key] - r[truth], r[truth], abs_tol, rel_tol) for r in rows)
    if errs:
        print(f"  {key}: |err| median {statistics.median(errs):.2f} ms, "
              f"max {max(errs):.2f} ms, within tolerance {inside}/{len(rows)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=16)
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    args = parser.parse_args(argv)
    exporter = _setup()
    gc.collect()
    gc.freeze()  # what long-running agents do; a full collection mid-stream is noise here
    base = SimulatorConfig(port=0, prefill_tps=PREFILL_TPS, output_tps=OUTPUT_TPS)
    rows = measure(exporter, base, args.calls, 0.0)
    baseline = statistics.median(r["network"] for r in rows)
    ok = report_phases(rows, f"Streaming calls, no added delay (prefill {PREFILL_TPS:g} tok/s, "
                             f"output {OUTPUT_TPS:g} tok/s)")
    if args.rtt_ms > 0:
        reason = kernel_delay_unavailable()
        kernel = reason is None
        config = base.replace(rtt_ms=args.rtt_ms, kernel_delay=kernel)
        rows = measure(exporter, config, args.calls, args.rtt_ms / 1e3)
        how = "kernel NFQUEUE delay" if kernel else f"delay proxy ({reason})"
        ok &= report_network(rows, f"--rtt-ms {args.rtt_ms:g} via {how}", baseline)
        ok &= report_phases(rows, f"Prefill and output generation under --rtt-ms {args.rtt_ms:g}")
    print(f"\nresult: {'PASS' if ok else 'FAIL'} (at least {REQUIRED_SHARE:.0%} of calls "
          "within tolerance in every table)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
