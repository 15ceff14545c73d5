"""Instructions that LLM instrumentations add to the real openai SDK, counted by callgrind.

Timing a per-chunk cost of ~1 µs as the slope between two stream lengths is ~1 % of a
stream's CPU, inside the run-to-run drift of a shared machine; instruction counts do not
depend on the machine's load (hash seeds, garbage collection and CPython's type attribute
cache still move the per-chunk slope by ~±20 % between runs: see ``--seeds``). Each library
runs in its own process under ``valgrind --tool=callgrind`` (the simulator runs outside
it); after warm-up the worker makes ``--n`` calls of each kind with the library
instrumented, then ``--n`` with it uninstrumented, and asks callgrind to dump its counters
after each batch (``callgrind_control -d``), so imports and warm-up are never counted.
Printed: instructions added per non-streaming call and per streamed chunk (the slope
between streams of 20 and 200 output tokens). Needs valgrind; a library whose
``uninstrument()`` leaves wrappers behind (OpenLLMetry) cannot be measured this way.

What is counted is the per-chunk path alone: the worker's main thread only
(``--separate-threads=yes``; ``_callgrind.counts`` reads the main thread's files), so the
background threads' wake-ups (the arrival watcher's epoll wake-ups and 5 ms quiet ticks
while a first token is awaited, an export worker, timers) are left out; how many of them
fall inside a batch depends on the wire's timing against a client valgrind slows ~50x.
The main thread's reads do not depend on that timing either: the simulator sits behind
``_callgrind.EventPerRead``, which sends each event of a stream once the client has read
the one before (as a client keeping up with a streaming server reads them), so every
stream is read one event at a time in every batch.  Left to the wire, a batch's streams
were read in one piece or in a few, and each read is the SDK's work and, with the first
token in it, ours (its events counted for that token's date): the per-chunk slope moved by
thousands of instructions between runs (+4,100 to +8,100 over the runs of 2026-11-29; three
rounds in one process with each stream read one event at a time: +6,473 to +6,988).
``instrument()`` and ``uninstrument()`` run between dumps of their own, never inside a
batch: ours costs ~0.85 M instructions, which counted in the first batch after it came off
that batch's runs as the SDK's own work (per call, ~85,000 of ours hidden at ``--n 10``).

``--annotate`` also prints, per library, the C functions (``callgrind_annotate``, self and
inclusive) whose instructions per non-streaming call grew most with it on: the hot path
read function by function; and those whose instructions per streamed chunk changed most
(self): two processes' lists side by side say where their per-chunk figures part.

    python benchmarks/bench_llm_instructions.py [--n 10] [--libraries agent_latency,official]
        [--processor simple|batch]

Spans end into a ``SimpleSpanProcessor`` by default (each exported on the calling thread,
to an exporter that drops it): how these figures were first taken, which charges every span
its export's bookkeeping on the call's thread (a context attach and detach, a metrics
count).  ``--processor batch`` ends them into the SDK's ``BatchSpanProcessor``, what every
exporting setup runs (``agent_latency.instrument()``, ``opentelemetry-instrument``): the
call's thread only queues each span, and the export runs on the processor's own thread,
left out here.  A library that emits more spans per call (ours: the call and up to three
phases, the official's one) pays more of that bookkeeping with the first; measured, the two
differ by less than the run-to-run spread (1.42x per call with ``batch``, 1.39-1.41x with
``simple``, on 2026-11-29), so a phase span's price is its own record, not its export.

With garbage collection on, the per-chunk slope also carries where the collector's runs
land: a library that allocates more per call moves collections into (or out of) the
streaming loop. ``--no-gc`` turns the collector off after warm-up, which isolates the code's
own per-chunk work.

``agent_latency`` takes arrival times for each stream's first token only
(``AGENT_LATENCY_ARRIVALS=first``: what ``auto`` does for a client that keeps up; under
valgrind a client is far slower than the wire and ``auto`` would take them all the way);
``agent_latency+arrivals`` takes them on every read (``always``, what a client behind its
stream gets): the difference is the added cost per read.

``null`` (a pass-through wrapper on ``Completions.create``, put on and taken off as the
others are, recording nothing) measures the benchmark itself: its per-chunk figure is what
toggling a wrapper between batches moves in the SDK's own work (-99 to -370 per chunk in
three runs on 2026-11-30, against ours' +3,600 to +5,500, taken before ``instrument()`` had
its guard, so with a second wrapper toggled over a first), so a library's spread beyond
that is its own path's.

``agent_latency+bare`` turns off what ours measures beyond the official's call span and
histograms (phase spans, ``traceparent``, arrival times from the wire): the per-call floor
of recording a call at all, beside which the default's extra is the price of those
measurements; ``+nophases``, ``+nopropagate`` and ``+noarrivals`` turn off one each, for the
price of each (``bench_llm_overhead.VARIANTS``).

A library name ending in ``+litellm`` makes the same calls through ``litellm.completion``
(litellm's OpenAI path: the openai SDK's low-level ``client.post`` on an httpx client), with
our litellm instrumentation on top for ``agent_latency+litellm``: the per-chunk cost of the
path real agents (mini-swe-agent, smolagents, aider) take.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import Any

import _callgrind as callgrind
from bench_llm_overhead import SPAN_PROCESSOR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

KINDS = {"plain": 0, "s20": 20, "s200": 200}
_NO_GC = "BENCH_NO_GC"  # set by --no-gc for the worker


def worker(library: str, url: str, n: int) -> None:
    import gc

    import openai
    from bench_llm_overhead import VARIANTS, _setup

    base, _, via = library.partition("+")
    # Arrival times: on every read for ``+arrivals`` (a client behind its stream); else for
    # a stream's first token only, what a client that keeps up gets (``auto`` would take
    # them all the way here: under valgrind the client is ~50x slower than the wire, and
    # rightly seen to be behind it).
    os.environ["AGENT_LATENCY_ARRIVALS"] = "always" if via == "arrivals" else "first"
    os.environ.update(VARIANTS.get(via, {}))
    instrumentors = [i for i in (_setup(base),) if i is not None]
    messages = [{"role": "user", "content": "benchmark " * 20}]
    if via == "litellm":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        if base == "agent_latency":
            from agent_latency.instrumentation.llm.litellm import LiteLLMInstrumentor

            instrumentors.append(LiteLLMInstrumentor())
            instrumentors[-1].instrument()
        # Looked up at each call: uninstrument() puts the original function back.
        def create(**kwargs: Any) -> Any:
            return litellm.completion(model="openai/m", api_base=url + "/v1",
                                      api_key="sk-bench", max_retries=0, **kwargs)
    else:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)

        def create(**kwargs: Any) -> Any:
            return client.chat.completions.create(model="m", **kwargs)

    def run(kind: str) -> None:
        tokens = KINDS[kind]
        if not tokens:
            create(messages=messages, max_tokens=20, temperature=0.0)
            return
        for _ in create(messages=messages, stream=True, max_tokens=tokens, temperature=0.0,
                        stream_options={"include_usage": True}):
            pass

    for _ in range(5):
        for kind in KINDS:
            run(kind)
    gc.collect()
    gc.freeze()
    if os.environ.get(_NO_GC):
        gc.disable()

    def toggle(on: bool) -> None:
        for instrumentor in instrumentors:
            (instrumentor.instrument if on else instrumentor.uninstrument)()

    callgrind.on_off(toggle, KINDS, n, run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="calls of each kind per batch")
    parser.add_argument("--libraries", default="agent_latency,official")
    parser.add_argument("--no-gc", action="store_true",
                        help="measure with the garbage collector off (after warm-up): the "
                             "code's own per-chunk work, without where collections land")
    parser.add_argument("--processor", choices=("simple", "batch"), default="simple",
                        help="the span processor spans end into: simple (exported on the "
                             "calling thread, as the figures were first taken) or batch "
                             "(queued for a worker thread, as every exporting setup does)")
    parser.add_argument("--annotate", action="store_true",
                        help="also print, per library, the functions (C, callgrind_annotate) "
                             "whose instructions per non-streaming call grew most, and "
                             "those whose instructions per streamed chunk changed most")
    parser.add_argument("--seeds", default="",
                        help="PYTHONHASHSEED values, comma-separated: one measurement (a "
                             "worker per library) per seed; by default one, with the "
                             "interpreter's random seed. String hashes place the keys of "
                             "every dict, so the per-chunk slope moves from process to "
                             "process (+5,100 and +6,200 for the same code). It moves with "
                             "a fixed seed too (+6,783 and +5,529): CPython's type "
                             "attribute cache (4,096 slots) places an entry by the type's "
                             "version tag, given in the order types are first looked up, "
                             "and the name's address, so which lookups miss it and walk "
                             "the MRO differs by process. Repeat a seed (1,1,1) for the "
                             "spread")
    parser.add_argument("--worker")
    parser.add_argument("--url")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.url, args.n)
        return 0
    if not callgrind.available():
        return 1
    seeds = [seed.strip() for seed in args.seeds.split(",")] if args.seeds else [None]
    with callgrind.simulator() as sim:
        for seed in seeds:
            result = _measure(args, sim.base_url, seed)
            if result is None:
                return 1
            _print(args, seed, *result)
    return 0


def _measure(args: argparse.Namespace, url: str,
             seed: str | None) -> tuple[list[tuple[Any, ...]], dict[str, int | None]] | None:
    """Each library's row (its per-call and per-chunk figures) from one worker process each,
    with ``PYTHONHASHSEED`` set to ``seed`` (None: the interpreter's random one)."""
    rows = []
    toggles: dict[str, int | None] = {}
    for library in args.libraries.split(","):
        env = {**os.environ, SPAN_PROCESSOR: args.processor,
               **({_NO_GC: "1"} if args.no_gc else {}),
               **({"PYTHONHASHSEED": seed} if seed is not None else {})}
        keep = tempfile.mkdtemp(prefix="callgrind-") if args.annotate else None
        try:
            counts = callgrind.run(__file__, ["--worker", library, "--url", url,
                                              "--n", str(args.n)],
                                   callgrind.on_off_tags(KINDS), env, keep)
            if counts is not None and keep is not None:
                chunks = KINDS["s200"] - KINDS["s20"]
                print(f"{library}, per non-streaming call:\n"
                      f"{callgrind.top_added(keep, 'plain-on', 'plain-off', args.n)}\n"
                      f"{library}, per streamed chunk:\n"
                      f"{callgrind.top_added_per_chunk(keep, 's20', 's200', args.n, chunks)}"
                      "\n", flush=True)
        finally:
            if keep is not None:
                shutil.rmtree(keep, ignore_errors=True)
        if counts is None:
            return None
        own, added = callgrind.per_run(counts, args.n, KINDS)
        toggles[library] = counts.get("toggle-off")
        chunks = KINDS["s200"] - KINDS["s20"]
        rows.append((library, own["plain"], added["plain"],
                     (own["s200"] - own["s20"]) / chunks,
                     (added["s200"] - added["s20"]) / chunks))
    return rows, toggles


def _print(args: argparse.Namespace, seed: str | None, rows: list[tuple[Any, ...]],
           toggles: dict[str, int | None]) -> None:
    seeded = f", PYTHONHASHSEED={seed}" if seed is not None else ""
    print(f"instructions (callgrind), {args.n} calls of each kind per batch, spans into a "
          f"{args.processor} span processor{seeded}")
    print(f"{'library':<22} {'SDK per call':>13} {'added per call':>15} {'SDK per chunk':>14} "
          f"{'added per chunk':>16}")
    for library, sdk_call, call, sdk_chunk, chunk in rows:
        print(f"{library:<22} {sdk_call:>13,.0f} {call:>+15,.0f} {sdk_chunk:>14,.0f} "
              f"{chunk:>+16,.0f}")
    print("uninstrument(), between batches and not counted in them: " + ", ".join(
        f"{library} {cost:,}" for library, cost in toggles.items() if cost is not None)
        + " instructions")
    by_name = {r[0]: r for r in rows}
    if "agent_latency" in by_name and "official" in by_name:
        ours, official = by_name["agent_latency"], by_name["official"]
        print(f"ours / official: per call {ours[2] / official[2]:.2f}x, "
              f"per chunk {ours[4] / official[4]:.2f}x")
    if "agent_latency" in by_name and "agent_latency+arrivals" in by_name:
        # One read per event here (``EventPerRead``): the difference is the cost per read.
        extra = by_name["agent_latency+arrivals"][4] - by_name["agent_latency"][4]
        print(f"arrival times taken on every read (a busy client's stream): {extra:+,.0f} "
              "instructions per read")
    print(flush=True)

if __name__ == "__main__":
    sys.exit(main())
