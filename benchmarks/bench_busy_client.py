"""A busy client against the simulator's truth: are prefill and output generation still the
server's, and is the client's delay its own?

Each scenario runs in a fresh child process (its first call is a process's first call), the
simulator in another with its truth log on; per LLM call the table prints our prefill and
output generation against the server's (``first_token_at - started_at`` and ``last_token_at
- first_token_at``), where each first/last token's time came from (``measured``: a kernel
stamp; ``read``: a read's own time; ``estimated``: dated back from the pace; ``handed-over``:
no wire data), the client's lag (hand-over minus arrival of the first token) and its tail
(the end of the stream minus the last byte's arrival).

Scenarios: asyncio with 8 and 16 parallel streams and 2/5/10 ms of the program's own CPU per
chunk on the event loop; a 150 ms garbage collection during prefill and one during output;
a collection longer than the whole stream (started just after the request left);
three threads holding the GIL; the first streamed call of a process for openai chat,
Responses, Anthropic and litellm; the first Responses WebSocket response; a known lag after
the last token (the program sleeps before reading the end); and the asyncio and collection
cases again through a TLS forwarder.  Goals: prefill and output generation within
max(5 ms, 5 %) of the truth, max(10 ms, 5 %) where a collection holds the GIL as the first
token lands; the known lag within max(5 ms, 5 %).  A collection that holds the GIL through
the whole stream leaves nothing to date its tokens by (the kernel merges what queues behind
it into one segment with the newest stamp): there the goal is that the first token's
bound (``±first``, the one shown with the split) holds the error of both figures.

    python benchmarks/bench_busy_client.py [--only async] [--repeat 1]

The truth's own marks are taken by the server right after each write; it also marks
when each write started, and the error is how far ours is outside that interval (a loaded
machine can hold the server between the two).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PREFILL_TPS = 5000.0
OUTPUT_TPS = 100.0
WORDS = 1000  # ~2,000 input tokens: ~0.4 s of prefill
OUTPUT_TOKENS = 30  # ~0.3 s of output generation
KNOWN_LAG = 0.2
# Seconds of the collection longer than the whole stream (~0.7 s; a heap's collection takes
# less than its sample says once the heap is built: 1.3 s for 2 s here).
STREAM_COLLECTION = 2.0

SCENARIOS = [
    *(f"async:{n}:{w}" for n in (8, 16) for w in (2, 5, 10)),
    "gc:prefill", "gc:output", "gc:stream", "threads",
    "first:chat", "first:responses", "first:anthropic", "first:litellm", "first:websocket",
    "lag", "tls:async:8:5", "tls:gc:prefill",
]


# -- the worker: one scenario, in its own process ----------------------------------------------
def _messages() -> list[dict[str, str]]:
    return [{"role": "user", "content": "measure " * WORDS}]


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _collection_time() -> float:
    started = time.perf_counter()
    gc.collect()
    return time.perf_counter() - started


def _heap_for(seconds: float) -> list[list[int]]:
    # What the process holds already (the SDKs' modules) is frozen out of collections: left
    # in, it made each sample item look dearer and the heap smaller than asked (a 2 s heap
    # collected in 0.4 s after openai's import), and no trimming can undo it.
    gc.freeze()
    heap = [[i] for i in range(100_000)]
    per_item = _collection_time() / len(heap)
    heap = [[i] for i in range(int(seconds / max(per_item, 1e-9)))]
    for _ in range(3):
        took = _collection_time()
        if took <= seconds * 1.3:
            break
        del heap[int(len(heap) * seconds / took):]
    return heap


def _openai(base: str, cafile: str | None, is_async: bool = False) -> Any:
    import openai

    kwargs: dict[str, Any] = {"base_url": base + "/v1", "api_key": "sk-bench",
                              "max_retries": 0}
    if cafile is not None:
        import ssl

        import httpx2

        context = ssl.create_default_context(cafile=cafile)
        kwargs["http_client"] = (httpx2.AsyncClient(verify=context) if is_async
                                 else httpx2.Client(verify=context))
    return openai.AsyncOpenAI(**kwargs) if is_async else openai.OpenAI(**kwargs)


def _chat(client: Any, tokens: int = OUTPUT_TOKENS, model: str = "sim") -> Any:
    return client.chat.completions.create(model=model, messages=_messages(), stream=True,
                                          max_tokens=tokens,
                                          stream_options={"include_usage": True})


def _warm_up(client: Any) -> float:
    """One call under another model name (nothing learned for ``sim``); returns its time
    to first token as the client saw it, a stand-in for the prefill."""
    started = time.perf_counter()
    first = None
    for chunk in _chat(client, 2, "sim-warm-up"):
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
    return (first or time.perf_counter()) - started


def _run_async(base: str, cafile: str | None, streams: int, work: float) -> None:
    async def one(client: Any) -> None:
        stream = await _chat(client)
        async for _ in stream:
            _busy(work)

    async def main() -> None:
        client = _openai(base, cafile, is_async=True)
        await asyncio.gather(*(one(client) for _ in range(streams)))
        await client.close()

    asyncio.run(main())


def _run_gc(base: str, cafile: str | None, when: str) -> dict[str, float]:
    client = _openai(base, cafile)
    prefill = _warm_up(client)
    if when == "stream":
        return _collect_through_stream(client)
    heap = _heap_for(0.15)
    stream = _chat(client, 60)
    if when == "prefill":
        time.sleep(max(prefill - 0.06, 0.0))  # the collection starts just before the token
        started = time.perf_counter()
        gc.collect()
        ended = time.perf_counter()
        for _ in stream:
            pass
    else:
        started = ended = 0.0
        for i, _ in enumerate(stream):
            if i == 10:  # ten tokens in: a collection while the server goes on
                started = time.perf_counter()
                gc.collect()
                ended = time.perf_counter()
    del heap
    return {"pause_start": started, "pause_end": ended}


def _collect_through_stream(client: Any) -> dict[str, float]:
    """A collection longer than the whole stream: started by another thread just after the
    request left (the call waits for the response's head, sent with the first token), so
    every byte of the response lands while it holds the GIL."""
    heap = _heap_for(STREAM_COLLECTION)
    pause: dict[str, float] = {}

    def collect() -> None:
        pause["pause_start"] = time.perf_counter()
        gc.collect()
        pause["pause_end"] = time.perf_counter()

    collector = threading.Timer(0.05, collect)
    collector.start()
    for _ in _chat(client):
        pass
    collector.join()
    del heap
    return pause


def _run_threads(base: str) -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(2000))

    threads = [threading.Thread(target=spin, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    client = _openai(base, None)
    for _ in range(4):
        for _ in _chat(client):
            pass
    stop.set()


def _run_first(base: str, api: str) -> None:
    if api == "chat":
        for _ in _chat(_openai(base, None)):
            pass
    elif api == "responses":
        client = _openai(base, None)
        for _ in client.responses.create(model="sim", input="measure " * WORDS, stream=True,
                                         max_output_tokens=OUTPUT_TOKENS):
            pass
    elif api == "anthropic":
        import anthropic

        client = anthropic.Anthropic(base_url=base, api_key="sk-bench", max_retries=0)
        with client.messages.stream(model="sim", max_tokens=OUTPUT_TOKENS,
                                    messages=_messages()) as stream:
            for _ in stream:
                pass
    elif api == "litellm":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        for _ in litellm.completion(model="openai/sim", api_base=base + "/v1",
                                    api_key="sk-bench", messages=_messages(), stream=True,
                                    max_tokens=OUTPUT_TOKENS):
            pass
    elif api == "websocket":
        client = _openai(base, None)
        with client.responses.connect() as connection:
            connection.response.create(model="sim", input="measure " * WORDS,
                                       max_output_tokens=OUTPUT_TOKENS)
            for event in connection:
                if event.type in ("response.completed", "response.incomplete"):
                    break


def _run_lag(base: str) -> dict[str, float]:
    client = _openai(base, None)
    for chunk in _chat(client):
        if chunk.choices and chunk.choices[0].finish_reason:
            time.sleep(KNOWN_LAG)  # the last token is in: the program looks away
    return {"known_lag": KNOWN_LAG}


def worker(scenario: str, base: str, cafile: str | None) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import agent_latency

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    agent_latency.instrument(targets=["openai", "anthropic", "litellm", "httpx"])
    parts = scenario.split(":")
    if parts[0] == "tls":
        parts = parts[1:]
    else:
        cafile = None
    meta: dict[str, Any] = {}
    if parts[0] == "async":
        _run_async(base, cafile, int(parts[1]), float(parts[2]) / 1000.0)
    elif parts[0] == "gc":
        meta = _run_gc(base, cafile, parts[1])
    elif parts[0] == "threads":
        _run_threads(base)
    elif parts[0] == "first":
        _run_first(base, parts[1])
    elif parts[0] == "lag":
        meta = _run_lag(base)
    spans = [dict(s.attributes or {}) for s in exporter.get_finished_spans()
             if "agent_latency.llm.prefill" in (s.attributes or {})]
    print(json.dumps({"meta": meta, "spans": spans}))


# -- the parent: the simulator, the forwarder, the table -------------------------------------
def _forwarder(target_port: int, tls_port: int, cert: str, key: str, ready: Any) -> None:
    from bench_network_accuracy import _free_port, _serve

    _serve(target_port, _free_port(), tls_port, cert, key, ready)


def _truths(sim: Any) -> list[dict[str, Any]]:
    time.sleep(0.5)
    return [r for r in sim.truth if r.get("last_token_at_mono")]


def _error(ours: float, truth: tuple[float, float]) -> float:
    """How far ``ours`` is outside the truth's interval (0 inside it)."""
    low, high = truth
    return ours - high if ours > high else (ours - low if ours < low else 0.0)


def _within(err: float, truth: float, abs_tol: float) -> bool:
    return abs(err) <= max(abs_tol, 0.05 * abs(truth))


def _rows(scenario: str, result: dict[str, Any], truths: list[dict[str, Any]]
          ) -> list[dict[str, Any]]:
    from agent_latency import semconv

    by_id = {t["request_id"]: t for t in truths}
    websocket = [t for t in truths if t.get("transport") == "websocket"]
    rows = []
    for a in result["spans"]:
        if a.get(semconv.GEN_AI_REQUEST_MODEL) == "sim-warm-up":
            continue
        truth = by_id.get(a.get(semconv.LLM_SERVER_REQUEST_ID, ""))
        if truth is None and websocket:
            truth = websocket.pop(0)
        if truth is None:
            continue
        # The server wrote each token between ``*_write_mono`` and ``*_at_mono``: a loaded
        # machine can hold it between the two, so the truth is that interval.
        start = truth["started_at_mono"]
        first = (truth.get("first_token_write_mono") or truth["first_token_at_mono"],
                 truth["first_token_at_mono"])
        last = (truth.get("last_token_write_mono") or truth["last_token_at_mono"],
                truth["last_token_at_mono"])
        prefill = (first[0] - start, first[1] - start)
        output = (last[0] - first[1], last[1] - first[0])
        rows.append({
            "scenario": scenario, "prefill": a[semconv.LLM_PREFILL], "prefill_truth": prefill,
            "output": a[semconv.LLM_OUTPUT_GENERATION], "output_truth": output,
            "first": a.get(semconv.LLM_FIRST_TOKEN_SOURCE, "-"),
            "last": a.get(semconv.LLM_LAST_TOKEN_SOURCE, "-"),
            "lag": a.get(semconv.LLM_CLIENT_LAG, 0.0),
            "tail": a.get(semconv.LLM_CLIENT_TAIL, 0.0),
            "meta": result["meta"],
            "gil_held_at_first": (result["meta"].get("pause_start", 0)
                                  < truth["first_token_at_mono"]
                                  < result["meta"].get("pause_end", 0)),
            "gil_held_throughout": (result["meta"].get("pause_start", 0)
                                    < first[0]
                                    and truth["last_token_at_mono"]
                                    < result["meta"].get("pause_end", 0)),
            "bound": a.get(semconv.LLM_FIRST_TOKEN_BOUND, 0.0),
            "last_bound": a.get(semconv.LLM_LAST_TOKEN_BOUND, 0.0),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="scenarios whose name starts with this")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--worker")
    parser.add_argument("--url")
    parser.add_argument("--cafile")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.url, args.cafile)
        return 0

    from bench_network_accuracy import _certificate, _free_port

    from agent_latency.simulator import SimulatorConfig, SimulatorProcess

    scenarios = [s for s in SCENARIOS if s.startswith(args.only)] * args.repeat
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, SimulatorProcess(SimulatorConfig(
            port=0, prefill_tps=PREFILL_TPS, output_tps=OUTPUT_TPS)) as sim:
        cert, key = _certificate(Path(tmp))
        tls_port = _free_port()
        ready = multiprocessing.Event()
        forwarder = multiprocessing.Process(
            target=_forwarder, args=(int(sim.base_url.rpartition(":")[2]), tls_port, cert,
                                     key, ready), daemon=True)
        forwarder.start()
        ready.wait(10)
        for scenario in scenarios:
            base = f"https://localhost:{tls_port}" if scenario.startswith("tls:") else sim.base_url
            before = {r["request_id"] for r in sim.truth}
            out = subprocess.run([sys.executable, __file__, "--worker", scenario, "--url", base,
                                  "--cafile", cert], capture_output=True, text=True,
                                 timeout=600)
            if out.returncode != 0:
                print(f"{scenario}: worker failed\n{out.stderr[-2000:]}")
                continue
            result = json.loads(out.stdout.strip().splitlines()[-1])
            truths = [t for t in _truths(sim) if t["request_id"] not in before]
            rows += _rows(scenario, result, truths)
        forwarder.terminate()
    return _report(rows)


def _report(rows: list[dict[str, Any]]) -> int:
    print(f"{'scenario':<18}{'prefill ms':>11}{'truth':>8}{'err':>8}  {'output ms':>10}"
          f"{'truth':>8}{'err':>8}  {'first/last token':<22}{'lag':>8}{'tail':>8}"
          f"{'±first':>8}{'±last':>8}")
    misses = 0
    for r in rows:
        err_p = _error(r["prefill"], r["prefill_truth"])
        err_o = _error(r["output"], r["output_truth"])
        tol = 0.010 if r["gil_held_at_first"] else 0.005
        if r["gil_held_throughout"]:
            # Nothing can date the tokens inside such a collection: the goal is the bound
            # shown with the split (the first token's), holding the truth.
            ok = abs(err_p) <= r["bound"] + tol and abs(err_o) <= r["bound"] + tol
        else:
            ok = (_within(err_p, r["prefill_truth"][1], tol)
                  and _within(err_o, r["output_truth"][1], tol))
        known = r["meta"].get("known_lag")
        if known is not None:
            ok = ok and _within(r["tail"] - known, known, 0.005)
        misses += not ok
        print(f"{r['scenario']:<18}{r['prefill'] * 1e3:>11.1f}{r['prefill_truth'][1] * 1e3:>8.1f}"
              f"{err_p * 1e3:>+8.1f}  {r['output'] * 1e3:>10.1f}"
              f"{r['output_truth'][1] * 1e3:>8.1f}"
              f"{err_o * 1e3:>+8.1f}  {r['first'] + '/' + r['last']:<22}"
              f"{r['lag'] * 1e3:>8.1f}{r['tail'] * 1e3:>8.1f}{r['bound'] * 1e3:>8.1f}"
              f"{r['last_bound'] * 1e3:>8.1f}{'' if ok else '  MISSED'}")
    print(f"\n{len(rows) - misses}/{len(rows)} calls within the goal "
          "(max(5 ms, 5 %); 10 ms where a collection held the GIL as the first token landed; "
          "within the first token's bound, ±first, where one held it through the whole stream; "
          "the known lag within max(5 ms, 5 %))")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
