"""What the watcher's quiet ticks cost a program that is busy in Python while a stream's
first token is awaited.

Not a test: prints figures.  While a connection is watched with ticks on
(``Arrivals.ticked``), the watcher thread wakes every ``TICK`` seconds and takes the GIL for a
few microseconds; a program waiting for its bytes does not hold the GIL and pays nothing, a
program computing in Python is made to hand it over once a tick.  This runs a CPU-bound Python
loop on the main thread (``--loop`` iterations) in interleaved rounds: with no connection
watched, with one watched and ticked, and with one watched and not ticked (the watcher
blocked with no timeout), and prints each mode's median wall time and its ratio to the
unwatched rounds.  ``--tick`` overrides the interval (seconds).

    python benchmarks/bench_watcher_ticks.py [--rounds 15] [--loop 3000000] [--tick 0.005]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time

from agent_latency.instrumentation.net import Arrivals, _watcher
from agent_latency.instrumentation.net._watcher import WATCHER

MODES = ("unwatched", "ticked", "watched, no ticks")


def busy_loop(n: int) -> float:
    """Wall seconds of ``n`` iterations of Python arithmetic."""
    started = time.perf_counter()
    total = 0
    for i in range(n):
        total += i * i
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--loop", type=int, default=3_000_000)
    parser.add_argument("--tick", type=float, default=None)
    args = parser.parse_args()
    if args.tick is not None:
        _watcher.TICK = args.tick
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    busy_loop(args.loop // 10)  # warm-up
    for _ in range(args.rounds):
        for mode in MODES:
            arrivals = Arrivals(client)
            arrivals.ticked = mode == "ticked"
            if mode != "unwatched":
                WATCHER.watch(arrivals)
            time.sleep(0.05)  # the watcher settles into its wait
            times[mode].append(busy_loop(args.loop))
            WATCHER.unwatch(arrivals)
    base = statistics.median(times["unwatched"])
    print(f"a busy Python loop, {args.rounds} interleaved rounds, tick {_watcher.TICK * 1e3:.0f} "
          f"ms (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    for mode in MODES:
        median = statistics.median(times[mode])
        print(f"  {mode:<18} median {median * 1e3:7.1f} ms  ×{median / base:.3f}")
    client.close()
    server.close()
    listener.close()


if __name__ == "__main__":
    main()
