"""Instructions agent-latency adds per streamed chunk, counted by callgrind, on each path a
model stream takes: the openai SDK's own layer (the baseline), a stream recognised on the
wire (groq's client: SSE read off the socket, no SDK layer of ours) and an Ollama NDJSON
stream (``ollama``'s client on ``/api/chat``).

As in ``bench_llm_instructions.py``: each client runs in its own process under ``valgrind
--tool=callgrind`` (the simulator outside it); after warm-up it makes ``--n`` streamed calls
of 20 and of 200 output tokens with every integration instrumented, then ``--n`` with them
uninstrumented, and asks callgrind to dump its counters after each batch, so imports and
warm-up are never counted; only the worker's main thread is counted (the background
threads' wake-ups are not the per-chunk path: see ``_callgrind``).  Printed per client:
the client's own instructions per chunk and the instructions we add per chunk (the slope
between the two stream lengths).

``CLIENT`` takes arrival times for each stream's first token only (what ``auto`` does for
a client that keeps up: under valgrind a client is far slower than the wire and ``auto``
would take them all the way); ``CLIENT+arrivals`` takes them on every read (a client behind
its stream).  Ollama needs the simulator's ``/api/chat`` route and a recogniser for it;
without them it is named and skipped.

    python benchmarks/bench_wire_instructions.py [--n 10] [--clients openai,groq,ollama]
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _callgrind as callgrind
from bench_first_call_clients import _served

LENGTHS = {"s20": 20, "s200": 200}
# Streams of each length before counting: the client's first calls (imports, first parses,
# lazily built models) are never counted.
WARM_UP = 2
MESSAGES = [{"role": "user", "content": "benchmark " * 20}]


def _stream(client: str, url: str) -> Any:
    """``stream(tokens)``: one streamed call of ``client``, read to its end."""
    if client == "openai":
        import openai

        sdk: Any = openai.OpenAI(base_url=url + "/v1", api_key="sk-bench", max_retries=0)

        def stream(tokens: int) -> Any:
            return sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                               max_tokens=tokens)
    elif client == "groq":
        import groq

        sdk = groq.Groq(base_url=url, api_key="sk-bench", max_retries=0)

        def stream(tokens: int) -> Any:
            return sdk.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                               max_tokens=tokens)
    else:
        import ollama

        sdk = ollama.Client(host=url)

        def stream(tokens: int) -> Any:
            return sdk.chat(model="m", messages=MESSAGES, stream=True,
                            options={"num_predict": tokens})
    return stream


def worker(library: str, url: str, n: int) -> None:
    import gc

    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    from agent_latency import BudgetSpanProcessor
    from agent_latency.instrumentation._all import instrument_all

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    client, _, via = library.partition("+")
    os.environ["AGENT_LATENCY_ARRIVALS"] = "always" if via == "arrivals" else "first"
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    provider = TracerProvider()
    provider.add_span_processor(BudgetSpanProcessor(meter_provider))
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(meter_provider)
    stream = _stream(client, url)  # the client imported: its integration applies at once
    instrumentors = instrument_all()

    def run(tokens: int) -> None:
        for _ in stream(tokens):
            pass

    for _ in range(WARM_UP):
        for tokens in LENGTHS.values():
            run(tokens)
    gc.collect()
    gc.freeze()

    def toggle(on: bool) -> None:
        if not on:
            for instrumentor in reversed(instrumentors):
                instrumentor.uninstrument()

    callgrind.on_off(toggle, LENGTHS, n, lambda kind: run(LENGTHS[kind]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="streams of each length per batch")
    parser.add_argument("--clients",
                        default="openai,groq,groq+arrivals,ollama,ollama+arrivals")
    parser.add_argument("--worker")
    parser.add_argument("--url")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.url, args.n)
        return 0
    if not callgrind.available():
        return 1
    print(f"instructions (callgrind), {args.n} streams of 20 and 200 tokens per batch")
    print(f"{'client':<20} {'client per chunk':>17} {'added per chunk':>16}", flush=True)
    with callgrind.simulator() as sim:
        for library in args.clients.split(","):
            if library.startswith("ollama") and not _served(sim.base_url, "/api/chat"):
                print(f"{library}: skipped, the simulator has no /api/chat route")
                continue
            counts = callgrind.run(__file__, ["--worker", library, "--url", sim.base_url,
                                              "--n", str(args.n)],
                                   callgrind.on_off_tags(LENGTHS))
            if counts is None:
                continue
            own_run, added = callgrind.per_run(counts, args.n, LENGTHS)
            chunks = LENGTHS["s200"] - LENGTHS["s20"]
            own = (own_run["s200"] - own_run["s20"]) / chunks
            ours = (added["s200"] - added["s20"]) / chunks
            print(f"{library:<20} {own:>17,.0f} {ours:>+16,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
