"""Client CPU that LLM instrumentations add to the real openai SDK, side by side.

Each library runs in a child process of its own (so patches never mix) against one
simulator in another process; inside it, blocks with the library instrumented and
uninstrumented alternate, so the added cost is measured within one process (a library whose
``uninstrument()`` leaves wrappers behind is compared with the ``none`` process instead), on
the real ``openai`` SDK with an OpenTelemetry SDK tracer
provider (spans dropped by a no-op exporter) and meter provider (in-memory reader), default
settings of each library.  Measured with ``time.thread_time()`` around each call (the client
is single-threaded): per non-streaming call, and per streamed chunk as the slope between
streams of two lengths.  Libraries:

* ``none`` — the bare SDK (the baseline);
* ``agent_latency`` — ours, all phase detail on (phase spans, traceparent, network trace
  hooks, TCP_INFO, budget processor);
* ``official`` — ``opentelemetry-instrumentation-openai-v2``;
* ``openllmetry`` — ``opentelemetry-instrumentation-openai``;
* ``openinference`` — ``openinference-instrumentation-openai``;
* ``null`` — a pass-through wrapper on ``Completions.create`` that records nothing (not in the
  default set: the instruction benchmarks' measure of their own spread);
* ``reads`` — ``null`` plus, per streamed chunk, the least that tells an output chunk from
  the others: one clock read and the chunk's ``choices[0].delta.content`` (not in the
  default set: the per-chunk floor of any library that dates a stream's last token).

Goals: per streamed chunk <= 1.0 µs added and <= 0.5x the official's; per non-streaming
call <= 0.5x the official's.

The ``SDK floor`` column is what the OpenTelemetry SDK alone charges for the telemetry each
library emitted for one non-streaming call: the worker captures that call's spans (names,
kinds, parents, attributes) and metric records, then replays exactly them through the same
providers with no library code around them — right after each uninstrumented call (the
caches as cold as a real call leaves them; the figure shown), and warm in a tight loop (in
brackets).  ``own`` is the rest: the library's wrapping, timing and bookkeeping.  Libraries
that cannot be uninstrumented get no floor.

The machine is shared, so CPU time per call inflates when other work runs: each block's
figure is a median, on/off differences are paired block by block, and the workers run in
rounds (the order of libraries rotating).

    python benchmarks/bench_llm_overhead.py [--reps 7] [--blocks 6] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

LIBRARIES = ("none", "agent_latency", "official", "openllmetry", "openinference")
SMALL, BIG = 20, 400  # output tokens (one per chunk) of the two stream lengths


# -- worker (child process) -----------------------------------------------------------------
#: What each ``agent_latency+<variant>`` turns off, as environment settings: ``bare`` is what
#: the official instrumentation records and no more (no phase spans, no ``traceparent``, no
#: arrival times from the wire); the ``no…`` variants turn off one of those measurements
#: each, so the price of each is the default's figure less theirs.
VARIANTS: dict[str, dict[str, str]] = {
    "bare": {"AGENT_LATENCY_ARRIVALS": "off", "AGENT_LATENCY_PHASE_SPANS": "false",
             "AGENT_LATENCY_PROPAGATE": "false"},
    "nophases": {"AGENT_LATENCY_PHASE_SPANS": "false"},
    "nopropagate": {"AGENT_LATENCY_PROPAGATE": "false"},
    "noarrivals": {"AGENT_LATENCY_ARRIVALS": "off"},
}


#: The span processor the worker's provider exports through (``BENCH_SPAN_PROCESSOR``):
#: ``simple`` exports each span as it ends, on the calling thread (the SDK's debugging
#: processor); ``batch`` queues it for a worker thread, as every exporting setup does
#: (``agent_latency.instrument()``, ``opentelemetry-instrument``, the SDK's own examples).
SPAN_PROCESSOR = "BENCH_SPAN_PROCESSOR"


def _setup(library: str) -> Any:
    """Providers, and the library's instrumentor (instrumented); None for ``none``."""
    import os

    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    provider = TracerProvider()
    if library == "agent_latency":
        from agent_latency import BudgetSpanProcessor

        provider.add_span_processor(BudgetSpanProcessor(meter_provider))
    batch = os.environ.get(SPAN_PROCESSOR) == "batch"
    provider.add_span_processor((BatchSpanProcessor if batch else SimpleSpanProcessor)(Drop()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(meter_provider)
    kwargs = {"tracer_provider": provider, "meter_provider": meter_provider}
    if library == "agent_latency":
        from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor

        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument()
        return instrumentor
    if library == "official":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as Official

        instrumentor = Official()
    elif library == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as Traceloop

        instrumentor = Traceloop()
    elif library == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference

        instrumentor = OpenInference()
    elif library == "null":
        instrumentor = _Null()
    elif library == "reads":
        instrumentor = _Reads()
    else:
        return None
    instrumentor.instrument(**kwargs)
    return instrumentor


class _Null:
    """An instrumentation that records nothing: a pass-through wrapper on the method the
    others wrap (``Completions.create``), put on and taken off as theirs are.  Its "added"
    figures are the measurement's own: what toggling a wrapper between batches moves in the
    SDK's work (which types get new version tags, so which attribute lookups miss CPython's
    type cache), with no code of a library per chunk."""

    __slots__ = ()

    @staticmethod
    def _wrapper() -> Any:
        """The wrapper on ``Completions.create`` when it is on, else None."""
        import wrapt
        from openai.resources.chat.completions import Completions

        current = Completions.__dict__["create"]
        return current if isinstance(current, wrapt.FunctionWrapper) else None

    def instrument(self, **_kwargs: Any) -> None:
        import wrapt

        if self._wrapper() is not None:
            return  # on already: once, as an instrumentor's guard keeps it
        wrapt.wrap_function_wrapper("openai.resources.chat.completions", "Completions.create",
                                    lambda wrapped, _instance, args, kwargs:
                                    wrapped(*args, **kwargs))

    def uninstrument(self) -> None:
        from openai.resources.chat.completions import Completions

        wrapper = self._wrapper()
        if wrapper is not None:
            Completions.create = wrapper.__wrapped__


class _Reads(_Null):
    """``null`` whose streams are handed back as a generator over the SDK stream's own (as
    ours are: the ``Stream.__iter__`` layer replaced, not added to), reading per chunk the
    least that says whether it carries output text: the clock, then ``choices``, the first
    choice's ``delta`` and its ``content``.  What it adds per chunk is the floor of a library
    that dates a stream's last output token exactly, in the same process layout as the
    library measured beside it (the reads go through pydantic's ``__getattr__`` hook, so
    through CPython's type attribute cache)."""

    __slots__ = ()

    def instrument(self, **_kwargs: Any) -> None:
        import wrapt

        if self._wrapper() is not None:
            return

        def wrapper(wrapped: Any, _instance: Any, args: Any, kwargs: Any) -> Any:
            result = wrapped(*args, **kwargs)
            return _read_chunks(result._iterator) if kwargs.get("stream") else result

        wrapt.wrap_function_wrapper("openai.resources.chat.completions", "Completions.create",
                                    wrapper)


def _read_chunks(source: Any) -> Any:
    """The chunks of ``source``, each dated and looked at as an output classifier must."""
    clock = time.perf_counter
    last = None
    for chunk in source:
        now = clock()
        choices = chunk.choices
        if choices and choices[0].delta.content:
            last = now
        yield chunk
    del last


def _patch_points() -> dict[str, Any]:
    """What instrumentations wrap, to tell whether ``uninstrument()`` restored the SDK."""
    import importlib

    points = {}
    for module_name, owner, attr in (
            ("openai.resources.chat.completions", "Completions", "create"),
            ("openai.resources.chat.completions", "AsyncCompletions", "create"),
            ("openai", "OpenAI", "request"), ("openai._base_client", "SyncAPIClient", "request"),
            ("openai._streaming", "Stream", "__next__"),
            ("openai._streaming", "Stream", "__iter__"),
            ("httpx2", "Client", "send"), ("httpx", "Client", "send")):
        try:
            cls = getattr(importlib.import_module(module_name), owner)
        except (ImportError, AttributeError):
            continue
        for klass in cls.__mro__:
            if attr in klass.__dict__:
                # Identity, not ==: a wrapt wrapper compares equal to what it wraps.
                points[f"{module_name}.{owner}.{attr}"] = id(klass.__dict__[attr])
                break
    return points


def _capture(provider: Any, call: Any) -> tuple[list[Any], list[Any]]:
    """The spans and metric records one ``call()`` emits (SDK hooks, removed after)."""
    from opentelemetry.sdk.metrics._internal import instrument
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    records: list[Any] = []
    saved = [(cls, name, cls.__dict__[name]) for cls, name in (
        (instrument.Histogram, "record"), (instrument.Counter, "add"),
        (instrument.UpDownCounter, "add"))]
    for cls, name, real in saved:
        def hook(self: Any, amount: Any, attributes: Any = None, context: Any = None,
                 _real: Any = real, _kind: str = name) -> Any:
            records.append((_kind, self.name, amount, dict(attributes or {})))
            return _real(self, amount, attributes, context)
        setattr(cls, name, hook)
    try:
        call()
    finally:
        for cls, name, real in saved:
            setattr(cls, name, real)
        provider._active_span_processor._span_processors = (  # the capture stops here
            provider._active_span_processor._span_processors[:-1])
    return list(exporter.get_finished_spans()), records


def _replay(provider: Any, meter_provider: Any, spans: list[Any], records: list[Any]) -> Any:
    """A function that emits ``spans`` and ``records`` again through the SDK, nothing else."""
    from opentelemetry import trace

    tracer = provider.get_tracer("floor")
    meter = meter_provider.get_meter("floor")
    instruments = {}
    for kind, name, _, _ in records:
        if (kind, name) not in instruments:
            make = meter.create_histogram if kind == "record" else meter.create_counter
            instruments[kind, name] = make(name)
    by_start = sorted(spans, key=lambda s: s.start_time)
    by_end = sorted(range(len(by_start)), key=lambda i: by_start[i].end_time)
    index = {s.context.span_id: i for i, s in enumerate(by_start)}
    parents = [index.get(s.parent.span_id) if s.parent is not None else None
               for s in by_start]
    plan = [(s.name, s.kind, dict(s.attributes or {}), parents[i])
            for i, s in enumerate(by_start)]
    metric_plan = [(getattr(instruments[kind, name], kind), amount, attrs)
                   for kind, name, amount, attrs in records]

    def once() -> None:
        live: list[Any] = []
        for name, kind, attrs, parent in plan:
            ctx = trace.set_span_in_context(live[parent]) if parent is not None else None
            live.append(tracer.start_span(name, context=ctx, kind=kind, attributes=attrs))
        for i in by_end:
            live[i].end()
        for emit, amount, attrs in metric_plan:
            emit(amount, attrs)

    return once


def _floors(once: Any, plain: Any, reps: int, blocks: int) -> tuple[float, float]:
    """``(warm, in place)`` µs of ``once``: in a tight loop, and right after each
    uninstrumented ``plain()`` call (where the caches are as cold as a real call leaves
    them), paired block by block."""
    for _ in range(100):
        once()
    warm = float("inf")
    for _ in range(5):
        t0 = time.thread_time()
        for _ in range(400):
            once()
        warm = min(warm, (time.thread_time() - t0) / 400)
    diffs = []
    for _ in range(blocks):
        alone, both = [], []
        for _ in range(reps):
            t0 = time.thread_time()
            plain()
            alone.append(time.thread_time() - t0)
            t0 = time.thread_time()
            plain()
            once()
            both.append(time.thread_time() - t0)
        diffs.append(statistics.median(both) - statistics.median(alone))
    return warm * 1e6, statistics.median(diffs) * 1e6


def worker(library: str, url: str, reps: int, blocks: int) -> dict[str, Any]:
    """CPU per call of each kind, with the library on and (where it unwraps cleanly) off.

    On/off blocks alternate in this one process, so the difference is free of the
    variation between processes; a library whose ``uninstrument()`` leaves wrappers behind
    is measured on only (compared with the ``none`` worker by the driver).
    """
    import gc

    import openai

    original = _patch_points()
    instrumentor = _setup(library)
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)
    messages = [{"role": "user", "content": "benchmark " * 20}]
    chunk_counts: dict[str, int] = {}

    def stream(tokens: int) -> int:
        n = 0
        for _ in client.chat.completions.create(model="m", messages=messages, stream=True,
                                                max_tokens=tokens, temperature=0.0,
                                                stream_options={"include_usage": True}):
            n += 1
        return n

    def plain() -> int:
        client.chat.completions.create(model="m", messages=messages, max_tokens=SMALL,
                                       temperature=0.0)
        return 0

    kinds = {"stream_small": lambda: stream(SMALL), "stream_big": lambda: stream(BIG),
             "plain": plain}
    toggles = False
    if instrumentor is not None:
        instrumentor.uninstrument()
        toggles = _patch_points() == original
        instrumentor.instrument()
        toggles = toggles and _patch_points() != original
    for _ in range(5):
        for fn in kinds.values():
            fn()
    gc.collect()
    gc.freeze()
    on: dict[str, list[float]] = {k: [] for k in kinds}
    off: dict[str, list[float]] = {k: [] for k in kinds}
    for block in range(blocks * (2 if toggles else 1)):
        enabled = block % 2 == 0 or not toggles
        if toggles:
            (instrumentor.instrument if enabled else instrumentor.uninstrument)()
        for kind, fn in kinds.items():
            cpu = []
            for _ in range(reps):
                t0 = time.thread_time()
                n = fn()
                cpu.append((time.thread_time() - t0) * 1e6)
                chunk_counts[kind] = n
            (on if enabled else off)[kind].append(statistics.median(cpu))
    floor = None
    if instrumentor is not None and toggles:
        from opentelemetry import metrics, trace

        instrumentor.instrument()
        spans, records = _capture(trace.get_tracer_provider(), plain)
        instrumentor.uninstrument()
        once = _replay(trace.get_tracer_provider(), metrics.get_meter_provider(), spans,
                       records)
        warm, in_place = _floors(once, plain, reps, blocks)
        floor = {"us": in_place, "warm_us": warm, "spans": len(spans),
                 "attributes": sum(len(s.attributes or {}) for s in spans),
                 "records": len(records)}
    client.close()
    out: dict[str, Any] = {"library": library, "chunks": chunk_counts, "toggles": toggles,
                           "on_us": {k: min(v) for k, v in on.items()}, "floor": floor}
    if toggles:
        out["added_us"] = {k: statistics.median(a - b for a, b in zip(on[k], off[k], strict=True))
                           for k in kinds}
        out["off_us"] = {k: min(v) for k, v in off.items()}
    return out


# -- driver ------------------------------------------------------------------------------------
def _available(library: str) -> bool:
    module = {"official": "opentelemetry.instrumentation.openai_v2",
              "openllmetry": "opentelemetry.instrumentation.openai",
              "openinference": "openinference.instrumentation.openai"}.get(library)
    if module is None:
        return True
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--worker", choices=LIBRARIES)
    parser.add_argument("--url")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.url, args.reps, args.blocks)))
        return 0

    from agent_latency.simulator import SimulatorConfig, SimulatorProcess

    libraries = [lib for lib in LIBRARIES if _available(lib)]
    missing = sorted(set(LIBRARIES) - set(libraries))
    results: dict[str, list[dict[str, Any]]] = {lib: [] for lib in libraries}
    config = SimulatorConfig(port=0, prefill_tps=1e7, output_tps=1e6, spin_us=0.0,
                             default_output_tokens=BIG)
    with SimulatorProcess(config) as sim:
        for round_no in range(args.rounds):
            shift = round_no % len(libraries)
            for lib in libraries[shift:] + libraries[:shift]:
                proc = subprocess.run(
                    [sys.executable, __file__, "--worker", lib, "--url", sim.base_url,
                     "--reps", str(args.reps), "--blocks", str(args.blocks)],
                    capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    print(f"{lib} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                    return 1
                results[lib].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    _report(results, missing)
    return 0


def _report(results: dict[str, list[dict[str, Any]]], missing: list[str]) -> None:
    chunks = results["none"][0]["chunks"]
    extra = chunks["stream_big"] - chunks["stream_small"]

    def lowest(lib: str, kind: str) -> float:
        return min(r["on_us"][kind] for r in results[lib])

    added: dict[str, dict[str, float]] = {}
    how: dict[str, str] = {}
    for lib, runs in results.items():
        if lib == "none":
            continue
        if all(r["toggles"] for r in runs):
            added[lib] = {k: statistics.median(r["added_us"][k] for r in runs)
                          for k in ("plain", "stream_small", "stream_big")}
            how[lib] = "on/off in-process"
        else:
            added[lib] = {k: lowest(lib, k) - lowest("none", k)
                          for k in ("plain", "stream_small", "stream_big")}
            how[lib] = "vs none process (no clean unwrap)"
    figures = {}
    for lib, a in added.items():
        per_chunk = (a["stream_big"] - a["stream_small"]) / extra
        fixed = a["stream_small"] - per_chunk * chunks["stream_small"]
        figures[lib] = (per_chunk, a["plain"], fixed)
    floors = {lib: (statistics.median(r["floor"]["us"] for r in runs), runs[0]["floor"])
              for lib, runs in results.items() if runs[0].get("floor")}
    official = figures.get("official")
    header = ["library", "added µs/call", "vs official", "SDK floor µs/call", "own µs/call",
              "added µs/chunk", "vs official", "added µs/stream (fixed)", "measured"]
    sdk_chunk = (lowest("none", "stream_big") - lowest("none", "stream_small")) / extra
    rows = [["none (SDK alone)", f"{lowest('none', 'plain'):.0f} µs/call", "",
             "", "", f"{sdk_chunk:.1f} µs/chunk", "", "", ""]]
    for lib, (per_chunk, per_call, fixed) in figures.items():
        rc = rk = ""
        if official:
            rk = f"{per_chunk / official[0]:.2f}x" if official[0] > 0 else "-"
            rc = f"{per_call / official[1]:.2f}x" if official[1] > 0 else "-"
        floor_us, what = floors.get(lib, (None, None))
        floor_cell = own_cell = ""
        if floor_us is not None:
            floor_cell = (f"{floor_us:.1f} (warm {what['warm_us']:.1f}; {what['spans']} spans, "
                          f"{what['attributes']} attrs, {what['records']} records)")
            own_cell = f"{per_call - floor_us:+.1f}"
        rows.append([lib, f"{per_call:+.1f}", rc, floor_cell, own_cell, f"{per_chunk:+.2f}", rk,
                     f"{fixed:+.1f}", how[lib]])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"client CPU (thread time) added to the openai SDK; streams of "
          f"{chunks['stream_small']} and {chunks['stream_big']} chunks; "
          f"{len(results['none'])} rounds")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    if missing:
        print(f"not installed (skipped): {', '.join(missing)}")
    ours = figures.get("agent_latency")
    if ours and official:
        print(f"\ngoals: per chunk {ours[0]:+.2f} µs <= 1.0 µs: "
              f"{'yes' if ours[0] <= 1.0 else 'NO'}; <= 0.5x official ({official[0]:.2f} µs): "
              f"{'yes' if ours[0] <= 0.5 * official[0] else 'NO'}; per non-streaming call "
              f"{ours[1]:+.1f} µs <= 0.5x official ({official[1]:.1f} µs): "
              f"{'yes' if ours[1] <= 0.5 * official[1] else 'NO'}")
        if "agent_latency" in floors and "official" in floors:
            floor_ours = floors["agent_latency"][0]
            floor_official = floors["official"][0]
            print(f"SDK floor of the telemetry emitted per non-streaming call: ours "
                  f"{floor_ours:.1f} µs, the official's {floor_official:.1f} µs; 0.5x the "
                  f"official's added cost is {0.5 * official[1]:.1f} µs, "
                  f"{'below' if floor_ours > 0.5 * official[1] else 'above'} our floor")


if __name__ == "__main__":
    sys.exit(main())
