"""CPU that process spans add per spawned process and per ``os.system`` call.

    python benchmarks/bench_subprocess.py [--n 300] [--rounds 5]

One process, the real SDK set up as ``instrument()`` does (budget processor first), inside a
task; rounds alternate with the subprocess instrumentation on and off.  Two exporters:

* ``none``  — budget processor only (what the instrumentation itself costs);
* ``jsonl`` — plus the local default (batch export to ``.agent-latency/traces.jsonl``).

Two clocks: ``thread`` is the calling thread's CPU (``time.thread_time``: what the program
pays inline), ``process`` is every thread's (``time.process_time``: adds the background
export).  The children's own CPU is in neither.  Rows:

* ``subprocess.run(["true"])`` and ``os.system("true")`` end to end (spawning itself costs
  ~0.1–1 ms and is noisy, so the difference is only indicative);
* ``span work only``: the same per-process work with the fork replaced by a stub, which
  isolates the instrumentation's cost with warm caches;
* ``SDK floor``: no instrumentation, but one SDK span with the same attributes (an
  ``execute_tool`` span, its pid and exit code) started before ``subprocess.run`` and ended
  after it — what the OpenTelemetry SDK alone charges for the span in that place, where the
  kernel's fork, exec and wait have just left the caches cold.

Goal: <= 50 µs added per spawned process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def _cpu(fn, n: int) -> tuple[float, float]:
    t0, p0 = time.thread_time(), time.process_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t0) / n, (time.process_time() - p0) / n


class _Stub(subprocess.Popen):  # type: ignore[type-arg]
    """A Popen whose spawn does nothing (``Popen.__init__`` bypassed)."""

    def __init__(self) -> None:
        self.returncode = None
        self.pid = 1 << 22
        self._child_created = False


def _stub() -> None:
    p = _Stub()
    p._execute_child(["true"], None, None, True, (), None, None, None, 0, False,  # type: ignore[attr-defined]
                     -1, -1, -1, -1, -1, -1, True, None, None, None, None, False, -1)
    p.returncode = 0


def _plain_run() -> None:
    subprocess.run(["true"])


_floor_tracer: list = []


def _floor_run() -> None:
    if not _floor_tracer:
        from opentelemetry import trace

        _floor_tracer.append(trace.get_tracer("floor"))
    span = _floor_tracer[0].start_span("execute_tool true", attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "true",
        "gen_ai.tool.type": "extension", "agent_latency.component": "tool_execution",
        "agent_latency.tool.source": "subprocess"})
    process = subprocess.run(["true"])
    span.set_attributes({"agent_latency.tool.pid": 1, "agent_latency.tool.exit_code":
                         process.returncode})
    span.end()


def _setup(exporter: str, tmp: str):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from agent_latency import BudgetSpanProcessor
    from agent_latency._local import JsonLinesSpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BudgetSpanProcessor())
    if exporter == "jsonl":
        provider.add_span_processor(BatchSpanProcessor(
            JsonLinesSpanExporter(os.path.join(tmp, "traces.jsonl")), max_queue_size=1 << 16))
    trace.set_tracer_provider(provider)
    return provider


def measure(n: int, rounds: int) -> list[tuple[str, str, float, float, float, float]]:
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    import agent_latency
    from agent_latency.instrumentation.tools.subprocess import SubprocessInstrumentor

    tmp = tempfile.mkdtemp(prefix="bench-subprocess-")
    rows = []
    for exporter in ("none", "jsonl"):
        trace._TRACER_PROVIDER_SET_ONCE = Once()  # a fresh global provider per exporter
        trace._TRACER_PROVIDER = None
        provider = _setup(exporter, tmp)
        _floor_tracer.clear()
        instrumentor = SubprocessInstrumentor()
        real = subprocess.Popen._execute_child
        with agent_latency.task("bench"):
            for label, fn in (('subprocess.run(["true"])', lambda: subprocess.run(["true"])),
                              ('os.system("true")', lambda: os.system("true")),
                              ("span work only (fork stubbed)", _stub),
                          ("SDK floor: the span alone", _floor_run)):
                if fn is _stub:
                    subprocess.Popen._execute_child = lambda self, *a, **k: None  # type: ignore
                base_t, base_p, inst_t, inst_p = [], [], [], []
                for _ in range(rounds):
                    t, p = _cpu(fn if fn is not _floor_run else _plain_run, n)
                    base_t.append(t)
                    base_p.append(p)
                    if fn is not _floor_run:
                        instrumentor.instrument()
                    p0 = time.process_time()
                    t, _ = _cpu(fn, n)
                    provider.force_flush()  # the export this round caused, counted in it
                    p = (time.process_time() - p0) / n
                    if fn is not _floor_run:
                        instrumentor.uninstrument()
                    inst_t.append(t)
                    inst_p.append(p)
                subprocess.Popen._execute_child = real  # type: ignore[method-assign]
                rows.append((exporter, label, statistics.median(base_t),
                             statistics.median(inst_t), statistics.median(base_p),
                             statistics.median(inst_p)))
        provider.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300, help="calls per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    rows = measure(args.n, args.rounds)
    print(f"CPU per call in µs, median of {args.rounds} rounds x {args.n} calls "
          f"(Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"{'exporter':<8} {'operation':<31} {'thread plain':>12} {'thread instr':>12} "
          f"{'added':>7} {'process plain':>13} {'process instr':>13} {'added':>7}")
    for exporter, label, bt, it, bp, ip in rows:
        print(f"{exporter:<8} {label:<31} {bt * 1e6:>12.1f} {it * 1e6:>12.1f} "
              f"{(it - bt) * 1e6:>7.1f} {bp * 1e6:>13.1f} {ip * 1e6:>13.1f} "
              f"{(ip - bp) * 1e6:>7.1f}")
    print("goal: <= 50 µs added per spawned process (thread column = inline cost)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
