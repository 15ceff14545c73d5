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

from _agent_trace import task_spans  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402

from agent_latency._otlp_json import encode_line  # noqa: E402

# Runs the CLI in the child and prints, last, its own peak RSS and its workers' (the largest
# one's: ru_maxrss of RUSAGE_CHILDREN), and the CPU of both.
_CHILD = ("import resource, sys\n"
          "from agent_latency.cli import main\n"
          "rc = main(sys.argv[1:])\n"
          "u = resource.getrusage(resource.RUSAGE_SELF)\n"
          "c = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
          "print(u.ru_maxrss, c.ru_maxrss, u.ru_utime + u.ru_stime + c.ru_utime + c.ru_stime,\n"
          "      file=sys.stderr)\n"
          "sys.exit(rc)\n")

SPANS_PER_TRACE = 81


def run_report(src: str, path: Path, **environ: str) -> tuple[float, float, float, float, int,
                                                                str]:
    """``(wall s, CPU s, peak RSS MB, the largest worker's peak RSS MB, exit status, stderr
    tail)`` of one report in a child."""
    env = dict(os.environ, PYTHONPATH=src, **environ)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", _CHILD, "report", "--json", str(path)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    wall = time.perf_counter() - start
    lines = result.stderr.strip().splitlines()
    try:
        rss_kb, workers_kb, cpu = lines[-1].split()
        rss, workers, cpu_s = int(rss_kb) / 1024, int(workers_kb) / 1024, float(cpu)
    except (IndexError, ValueError):
        rss = workers = cpu_s = float("nan")
    return wall, cpu_s, rss, workers, result.returncode, "\n".join(lines[-4:-1])


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
        # "now" reads with one process per CPU (report/_parallel.py) and parses with orjson
        # when it is installed (an optional accelerator, not a dependency); "now-1proc" in one
        # process; "now-stdlib" with the standard library's parser.
        trees: list[tuple[str, str, dict[str, str]]] = [
            ("now", now, {}), ("now-1proc", now, {"AGENT_LATENCY_REPORT_WORKERS": "1"}),
            ("now-stdlib", now, {"AGENT_LATENCY_REPORT_JSON": "stdlib"})]
        if args.before:
            trees.insert(0, ("before", args.before, {"AGENT_LATENCY_REPORT_WORKERS": "1"}))
        cpus = len(os.sched_getaffinity(0))
        print(f"load average before: {os.getloadavg()[0]:.1f} on {cpus} CPUs")
        print(f"{'code':<10} {'wall s':>7} {'spans/s':>9} {'CPU s':>6} {'spans/CPU s':>11} "
              f"{'RSS MB':>7} {'worker MB':>9} {'all MB':>7}  exit")
        for _ in range(args.repeat):
            for label, src, environ in trees:
                wall, cpu, rss, worker, rc, err = run_report(src, path, **environ)
                # An upper bound of the memory in use at once: this process's peak and each
                # worker at the largest one's (forked pages shared with the parent count in
                # both).
                workers = 0 if environ.get("AGENT_LATENCY_REPORT_WORKERS") == "1" else min(
                    cpus, 8)
                total = rss + workers * worker if workers > 1 else rss
                print(f"{label:<10} {wall:>7.1f} {spans / wall:>9,.0f} {cpu:>6.1f} "
                      f"{spans / cpu:>11,.0f} {rss:>7,.0f} {worker:>9,.0f} {total:>7,.0f}  "
                      f"{rc}" + (f"  {err}" if rc else ""))
        print("targets: >= 100,000 spans/s, < 300 MB peak RSS (all processes).  Wall time "
              "depends on the machine's load (other processes); spans per CPU second is what "
              "the code costs")


def trace_spans() -> list[ReadableSpan]:
    """One realistic trace of ``SPANS_PER_TRACE`` spans (ended order, task last)."""
    spans = task_spans(16)
    assert len(spans) == SPANS_PER_TRACE, len(spans)
    return spans


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
