"""Peak memory and time of ``agent-latency report`` on a large generated trace file.

    PYTHONPATH=src python benchmarks/bench_report_memory.py [--mb 200] [--src DIR]

Writes a file of realistic traces (each a task with 20 LLM calls — a CLIENT span with ~27
attributes and three phase spans — exported in two batch lines, the second interleaved with
the next trace's first, as a batch processor does), then runs ``agent-latency report --json``
on it in a child process and prints the child's peak RSS and wall time.  ``--src`` runs the
report from another source tree (an older checkout, for a before/after).  Never fails on
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from bench_local_exporter import realistic_spans

from agent_latency._otlp_json import encode_line


def write_file(path: Path, megabytes: float) -> int:
    spans = realistic_spans(81)  # one task: 20 calls × 4 spans, and the task
    trace_hex = f"{spans[0].context.trace_id:032x}"
    half = len(spans) // 2
    first, second = encode_line(spans[:half]).decode(), encode_line(spans[half:]).decode()
    traces = 0
    with path.open("w") as f:
        tail = ""
        while f.tell() < megabytes * 1e6:
            traces += 1
            new_hex = f"{traces:032x}"
            f.write(first.replace(trace_hex, new_hex))
            if tail:
                f.write(tail)
            tail = second.replace(trace_hex, new_hex)
        f.write(tail)
    return traces


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=200)
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--keep", help="write the file here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.keep) if args.keep else Path(tmp) / "traces.jsonl"
        if not path.exists():
            traces = write_file(path, args.mb)
            print(f"wrote {traces:,} traces")
        size = path.stat().st_size
        env = dict(os.environ, PYTHONPATH=args.src)
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "agent_latency", "report", "--json",
                                 str(path)], env=env, capture_output=True,
                                text=True)
        wall = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:  # one object (schema 1); older code printed a JSON line per task
            tasks = len(json.loads(result.stdout)["tasks"])
        except (ValueError, KeyError, TypeError):
            tasks = result.stdout.count("\n")
        print(f"report on {size / 1e6:,.0f} MB ({args.src}): exit {result.returncode}, "
              f"{tasks:,} tasks, peak RSS {usage.ru_maxrss / 1024:,.0f} MB, wall {wall:.1f} s, "
              f"CPU {usage.ru_utime + usage.ru_stime:.1f} s")
        if result.returncode:
            print(result.stderr[-2000:])


if __name__ == "__main__":
    main()
