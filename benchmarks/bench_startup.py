"""Start-up and exit cost of agent-latency on an empty program.

Not a test: prints figures.  Run: ``python benchmarks/bench_startup.py [--runs 10]``.

Three programs, each started ``--runs`` times, interleaved (so machine noise hits them
alike), in a fresh directory with the local default on (no ``OTEL_*`` variables):

* ``python -c pass`` — the floor;
* ``python -c "import agent_latency; agent_latency.instrument()"`` — goal: at most 60 ms
  above the floor (median);
* ``agent-latency run -- python -c pass`` (as ``python -m agent_latency run``) — goal: at
  most 100 ms above the floor.

Wall time of the whole process, start to exit (exit work included: the process task's end
and the local default's export).  Then ``python -X importtime`` of the ``instrument()``
program: the imports that cost most, self and cumulative.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

GOALS_MS = {"instrument()": 60.0, "agent-latency run": 100.0}


def _programs() -> dict[str, list[str]]:
    py = sys.executable
    return {
        "python -c pass": [py, "-c", "pass"],
        "instrument()": [py, "-c", "import agent_latency; agent_latency.instrument()"],
        "agent-latency run": [py, "-m", "agent_latency", "run", "--", py, "-c", "pass"],
    }


def _environment(directory: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "AGENT_LATENCY_"))}
    env["AGENT_LATENCY_DIR"] = os.path.join(directory, "out")
    return env


def _time_once(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _importtime(env: dict[str, str], cwd: str, top: int) -> list[tuple[int, int, str]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           "import agent_latency; agent_latency.instrument()"],
                          env=env, cwd=cwd, capture_output=True, text=True, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _, self_us, cumulative_us, name = (part.strip() for part in
                                            line.replace("import time:", "|").split("|"))
        rows.append((int(cumulative_us), int(self_us), name))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    """Time the three programs and print medians beside the goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        env = _environment(directory)
        programs = _programs()
        for cmd in programs.values():  # warm the page cache and .pyc files
            _time_once(cmd, env, directory)
        times: dict[str, list[float]] = {name: [] for name in programs}
        for _ in range(args.runs):
            for name, cmd in programs.items():
                times[name].append(_time_once(cmd, env, directory))
        floor = statistics.median(times["python -c pass"]) * 1000
        print(f"median of {args.runs} runs, wall time of the whole process (ms)")
        print(f"  {'program':<20} {'median':>8} {'min':>8} {'added':>8} {'goal':>8}")
        for name, samples in times.items():
            median = statistics.median(samples) * 1000
            added = median - floor
            goal = GOALS_MS.get(name)
            goal_text = f"<= {goal:.0f}" if goal else ""
            mark = "" if goal is None else ("  ok" if added <= goal else "  OVER")
            print(f"  {name:<20} {median:8.1f} {min(samples) * 1000:8.1f} "
                  f"{added:8.1f} {goal_text:>8}{mark}")
        print(f"\npython -X importtime, instrument(): top {args.top} by cumulative time (us)")
        print(f"  {'cumulative':>10} {'self':>8}  module")
        for cumulative, self_us, name in _importtime(env, directory, args.top):
            print(f"  {cumulative:10d} {self_us:8d}  {name}")


if __name__ == "__main__":
    main()
