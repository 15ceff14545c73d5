"""Reading speed and peak memory of ``agent-latency report`` on a 1,000,000-span file.

    PYTHONPATH=src python benchmarks/bench_report_read.py [--spans 1000000] [--keep FILE]
        [--before DIR]

Writes an OTLP/JSON lines file as the local default writes it (the direct OTLP/JSON encoder)
of realistic traces — per trace a task span with its budget, 16 LLM calls (a CLIENT span with
~27 attributes and its three phase spans, which carry only OpenInference's span kind, as the
instrumentation makes them) and 16 shell tool calls (``execute_tool`` spans with a command
line), 81 spans — exported in two batch lines, the second interleaved with the next trace's
first as a batch processor does; then runs ``agent-latency report --json`` on it in a child
process with this tree's code (with orjson where installed, and with the standard library
only) and, given ``--before DIR``, with another source tree (the code before a change:
``git archive COMMIT src | tar -x -C /tmp/before``), and prints spans/s, CPU and each
child's own peak RSS.  Targets:
at least 100,000 spans/s and under 300 MB.  Never fails on figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

from agent_latency import semconv  # noqa: E402
from agent_latency._otlp_json import encode_line  # noqa: E402

# Runs the CLI in the child and prints the child's own peak RSS (not its parent's) last.
_CHILD = ("import resource, sys\n"
          "from agent_latency.cli import main\n"
          "rc = main(sys.argv[1:])\n"
          "u = resource.getrusage(resource.RUSAGE_SELF)\n"
          "print(u.ru_maxrss, u.ru_utime + u.ru_stime, file=sys.stderr)\n"
          "sys.exit(rc)\n")

SPANS_PER_TRACE = 81


def run_report(src: str, path: Path, **environ: str) -> tuple[float, float, float, int, str]:
    """``(wall s, CPU s, peak RSS MB, exit status, stderr tail)`` of one report in a
    child."""
    env = dict(os.environ, PYTHONPATH=src, **environ)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", _CHILD, "report", "--json", str(path)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    wall = time.perf_counter() - start
    lines = result.stderr.strip().splitlines()
    try:
        rss_kb, cpu = lines[-1].split()
        rss, cpu_s = int(rss_kb) / 1024, float(cpu)
    except (IndexError, ValueError):
        rss = cpu_s = float("nan")
    return wall, cpu_s, rss, result.returncode, "\n".join(lines[-4:-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--keep", help="write the file here and keep it (reused if present)")
    parser.add_argument("--before", default="",
                        help="source tree of the code to compare with, e.g. one made by "
                             "'git archive COMMIT src | tar -x -C /tmp/before' "
                             "(then /tmp/before/src)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "traces.jsonl"
        if not path.exists():
            started = time.perf_counter()
            write_file_spans(path, args.spans)
            print(f"wrote {path} in {time.perf_counter() - started:.0f} s")
        traces = -(-args.spans // SPANS_PER_TRACE)
        spans = traces * SPANS_PER_TRACE
        print(f"file: {path.stat().st_size / 1e6:,.0f} MB, {traces:,} traces, {spans:,} spans")
        now = str(HERE.parent / "src")
        # "now" parses with orjson when it is installed (an optional accelerator, not a
        # dependency); "now-stdlib" with the standard library only.
        trees: list[tuple[str, str, dict[str, str]]] = [
            ("now", now, {}), ("now-stdlib", now, {"AGENT_LATENCY_REPORT_JSON": "stdlib"})]
        if args.before:
            trees.insert(0, ("before", args.before, {}))
        print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"{'code':<10} {'wall s':>8} {'spans/s':>10} {'CPU s':>7} {'spans/CPU s':>12} "
              f"{'peak RSS MB':>12}  exit")
        for _ in range(args.repeat):
            for label, src, environ in trees:
                wall, cpu, rss, rc, err = run_report(src, path, **environ)
                print(f"{label:<10} {wall:>8.1f} {spans / wall:>10,.0f} {cpu:>7.1f} "
                      f"{spans / cpu:>12,.0f} {rss:>12,.0f}  {rc}" + (f"  {err}" if rc else ""))
        print("targets: >= 100,000 spans/s, < 300 MB peak RSS.  Wall time depends on the "
              "machine's load (other processes); spans per CPU second is what the code "
              "costs")


class _Keep(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def trace_spans() -> list[ReadableSpan]:
    """One realistic trace of ``SPANS_PER_TRACE`` spans (ended order, task last)."""
    keep = _Keep()
    provider = TracerProvider(resource=Resource.create({
        "service.name": "agent", "process.pid": os.getpid(), "host.name": "bench"}))
    provider.add_span_processor(keep)
    tracer = provider.get_tracer("agent_latency", "0.1")
    with tracer.start_as_current_span("task fix", attributes={
            semconv.TASK_NAME: "fix"}) as task:
        for i in range(16):
            with tracer.start_as_current_span("chat gpt-5-mini", kind=SpanKind.CLIENT) as call:
                call.set_attributes({
                    semconv.GEN_AI_OPERATION_NAME: "chat",
                    semconv.GEN_AI_PROVIDER_NAME: "openai",
                    semconv.GEN_AI_REQUEST_MODEL: "gpt-5-mini",
                    semconv.GEN_AI_REQUEST_MAX_TOKENS: 4096,
                    semconv.GEN_AI_REQUEST_TEMPERATURE: 0.2,
                    semconv.GEN_AI_REQUEST_STREAM: True,
                    semconv.GEN_AI_RESPONSE_MODEL: "gpt-5-mini-2025-08-07",
                    semconv.GEN_AI_RESPONSE_ID: f"chatcmpl-{i:024d}",
                    semconv.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
                    semconv.GEN_AI_USAGE_INPUT_TOKENS: 12_345 + i,
                    semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 321,
                    semconv.SERVER_ADDRESS: "api.openai.com",
                    semconv.SERVER_PORT: 443,
                    semconv.LLM_CLIENT: 0.0012,
                    semconv.LLM_STREAMING: True,
                    semconv.LLM_TTFT: 0.41234,
                    semconv.LLM_RETRY: 0.0,
                    semconv.LLM_DNS: 0.0,
                    semconv.LLM_CONNECT: 0.0,
                    semconv.LLM_TLS: 0.0,
                    semconv.LLM_UPLOAD: 0.0021,
                    semconv.LLM_RTT: 0.0123,
                    semconv.LLM_RTT_SOURCE: "tcp_info",
                    semconv.LLM_PREFILL: 0.3881,
                    semconv.LLM_OUTPUT_GENERATION: 2.104,
                    semconv.LLM_TAIL: 0.0003,
                    semconv.LLM_CLIENT_TAIL: 0.0001,
                    semconv.LLM_CONNECTION_REUSED: True,
                    semconv.LLM_ATTEMPTS: 1,
                    semconv.LLM_CHUNKS: 322,
                    semconv.LLM_OUTPUT_TOKENS_PER_SECOND: 152.1,
                })
                for phase in ("network", "prefill", "output_generation"):
                    with tracer.start_as_current_span(
                            phase, attributes=semconv.PHASE_SPAN_ATTRIBUTES):
                        pass
            with tracer.start_as_current_span("execute_tool pytest", attributes={
                    semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_EXECUTE_TOOL,
                    semconv.GEN_AI_TOOL_NAME: "pytest",
                    semconv.COMPONENT: semconv.TOOL_EXECUTION,
                    semconv.TOOL_SOURCE: "subprocess",
                    semconv.TOOL_EXECUTABLE: "/usr/bin/python3",
                    semconv.TOOL_COMMAND: f"python -m pytest -x -q tests/test_module_{i}.py",
                    semconv.TOOL_PID: 4242 + i,
                    semconv.TOOL_EXIT_CODE: 0,
            }):
                pass
        task.set_attributes({semconv.BUDGET_WALL: 61.5, **{
            semconv.budget_share(c): 12.3 for c in semconv.COMPONENTS}, **{
            semconv.budget_count(c): 16 for c in semconv.COUNT_NAMES}})
    assert len(keep.spans) == SPANS_PER_TRACE, len(keep.spans)
    return keep.spans


def write_file_spans(path: Path, spans: int) -> None:
    """A file of ``spans`` spans, rounded up to whole traces."""
    template = trace_spans()
    trace_hex = f"{template[0].context.trace_id:032x}"
    half = len(template) // 2
    first = encode_line(template[:half]).decode()
    second = encode_line(template[half:]).decode()
    with path.open("w") as f:
        tail = ""
        for n in range(1, -(-spans // SPANS_PER_TRACE) + 1):
            new_hex = f"{n:032x}"
            f.write(first.replace(trace_hex, new_hex))
            f.write(tail)
            tail = second.replace(trace_hex, new_hex)
        f.write(tail)


if __name__ == "__main__":
    main()
