"""What a dead, black-holed or slow backend adds to a program's run and exit.

Runs a small instrumented program (20 tasks over about 2 s, each with a tool) against:
no backend at all (``OTEL_TRACES_EXPORTER=none``: the baseline), a backend that refuses
connections, one that accepts connections and never answers, and one that answers every
request after 5 s.  Prints the median wall time of N runs, the delay over the baseline, and
the number of lines the program wrote on stderr, beside the goal: the exit flush bounded by
``AGENT_LATENCY_EXIT_TIMEOUT`` (2 s), one warning per destination and a count at exit.

    python benchmarks/bench_exit_delay.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROGRAM = textwrap.dedent("""
    import time, agent_latency
    agent_latency.instrument()
    for i in range(20):
        with agent_latency.task(f"t{i}"):
            with agent_latency.tool("step"):
                time.sleep(0.1)
""")


class _Slow(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(5)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _run(env: dict[str, str]) -> tuple[float, int]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    full.update(env, AGENT_LATENCY_PROCESS_TASK="false", AGENT_LATENCY_SUMMARY="false")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", PROGRAM], env=full, capture_output=True,
                            text=True, timeout=120)
    return time.monotonic() - started, len([x for x in result.stderr.splitlines() if x.strip()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs

    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))
    refused_port = refused.getsockname()[1]
    refused.close()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(128)
    slow = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    cases = {
        "no backend (baseline)": {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
        "refused": {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{refused_port}"},
        "black-holed": {"OTEL_EXPORTER_OTLP_ENDPOINT":
                        f"http://127.0.0.1:{hole.getsockname()[1]}"},
        "slow (5 s per request)": {"OTEL_EXPORTER_OTLP_ENDPOINT":
                                   f"http://127.0.0.1:{slow.server_port}"},
    }
    print(f"{'backend':<24} {'median wall':>12} {'delay':>8} {'stderr lines':>13}   "
          f"(median of {runs}; goal: delay <= 2.0 s exit bound, <= 2 lines per destination)")
    baseline = None
    for label, env in cases.items():
        walls, lines = zip(*(_run(env) for _ in range(runs)), strict=True)
        wall = statistics.median(walls)
        baseline = wall if baseline is None else baseline
        print(f"{label:<24} {wall:>11.2f}s {wall - baseline:>7.2f}s {max(lines):>13}")
    hole.close()
    slow.shutdown()


if __name__ == "__main__":
    main()
