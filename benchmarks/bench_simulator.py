"""How closely the simulator keeps its configured timing (a script, not a test).

Starts the simulator in a child process (its own GIL), streams chat completions from
this process with a minimal asyncio HTTP client that timestamps every received chunk, and
compares with the configuration and with the simulator's truth records:

* inter-token gap: client-observed arrival gap minus 1/output_tps;
* prefill: the server's first-token write minus (prefill start + input/prefill_tps);
* truth vs client: client arrival of the first/last token minus the truth file's
  ``first_token_at_mono``/``last_token_at_mono`` (same CLOCK_MONOTONIC).

Usage: python benchmarks/bench_simulator.py [--streams 20] [--tokens 1000] [--tps 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from time import perf_counter

from agent_latency.simulator import SimulatorConfig, SimulatorProcess

_TOKEN_MARK = b'"delta": {"content"'


class _Stream(asyncio.Protocol):
    """Raw HTTP/1.1 client that timestamps each token chunk as it arrives."""

    def __init__(self, request: bytes, done: asyncio.Future[None]) -> None:
        self.request = request
        self.done = done
        self.arrivals: list[float] = []
        self.head = b""
        self.request_id = ""
        self.sent_at = 0.0
        self.tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.sent_at = perf_counter()
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = perf_counter()
        if not self.request_id:
            self.head += data
            if b"\r\n\r\n" not in self.head:
                return
            for line in self.head.split(b"\r\n"):
                if line.lower().startswith(b"x-request-id:"):
                    self.request_id = line.split(b":", 1)[1].strip().decode()
            data = self.head
        chunk = self.tail + data
        n = chunk.count(_TOKEN_MARK)
        self.arrivals.extend([now] * n)
        self.tail = chunk[-len(_TOKEN_MARK):]  # a mark split across two reads
        if b"data: [DONE]" in chunk and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _run_streams(port: int, streams: int, tokens: int, prompt_chars: int) -> list[_Stream]:
    loop = asyncio.get_running_loop()
    body = json.dumps({"model": "bench", "stream": True, "max_tokens": tokens,
                       "messages": [{"role": "user", "content": "x" * prompt_chars}],
                       "simulator": {"output_tokens": tokens}}).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
               + body)
    protos = []
    waits = []
    for _ in range(streams):
        done: asyncio.Future[None] = loop.create_future()
        proto = _Stream(request, done)
        await loop.create_connection(lambda p=proto: p, "127.0.0.1", port)
        protos.append(proto)
        waits.append(done)
    await asyncio.gather(*waits)
    return protos


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _row(name: str, values_s: list[float]) -> str:
    ms = [abs(v) * 1e3 for v in values_s]
    signed = [v * 1e3 for v in values_s]
    return (f"{name:<44} {len(ms):>7} {statistics.fmean(signed):>9.3f} {_pct(ms, 0.5):>8.3f} "
            f"{_pct(ms, 0.99):>8.3f} {max(ms):>8.3f}")


def bench(streams: int, tokens: int, tps: float, prefill_tps: float,
          prompt_chars: int) -> list[str]:
    """Run one configuration; return table rows."""
    cfg = SimulatorConfig(port=0, output_tps=tps, prefill_tps=prefill_tps, tokens_per_chunk=1,
                          max_batch=max(64, streams))
    with SimulatorProcess(cfg) as sim:
        port = int(sim.base_url.rsplit(":", 1)[1])
        asyncio.run(_run_streams(port, 1, 20, 40))  # warm-up
        protos = asyncio.run(_run_streams(port, streams, tokens, prompt_chars))
        deadline = perf_counter() + 5
        truth: dict[str, dict] = {}
        while perf_counter() < deadline:
            truth = {r["request_id"]: r for r in sim.truth}
            if all(p.request_id in truth for p in protos):
                break
    gap = 1.0 / tps
    gaps, prefill_dev, prefill_slot, first_dev, last_dev = [], [], [], [], []
    for p in protos:
        rec = truth[p.request_id]
        gaps += [b - a - gap for a, b in zip(p.arrivals, p.arrivals[1:], strict=False)]
        nominal = rec["input_tokens"] / rec["prefill_tps"]
        prefill_slot.append(rec["prefill_s"] - nominal)
        prefill_dev.append(rec["first_token_at_mono"] - rec["prefill_started_at_mono"] - nominal)
        first_dev.append(p.arrivals[0] - rec["first_token_at_mono"])
        last_dev.append(p.arrivals[-1] - rec["last_token_at_mono"])
    label = f"{streams} stream(s) x {tokens} tok @ {tps:g} tok/s"
    return [f"-- {label}",
            _row("inter-token gap - 1/rate (client)", gaps),
            _row("prefill: first token written - nominal", prefill_dev),
            _row("prefill: slot time - nominal (server)", prefill_slot),
            _row("client first token - truth first_token_at", first_dev),
            _row("client last token - truth last_token_at", last_dev)]


def main() -> None:
    """Parse arguments, run the configurations, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=20)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--tps", type=float, default=1000.0)
    ap.add_argument("--prefill-tps", type=float, default=5000.0)
    ap.add_argument("--prompt-chars", type=int, default=800)
    ns = ap.parse_args()
    header = (f"{'deviation (ms)':<44} {'n':>7} {'mean':>9} {'p50|.|':>8} {'p99|.|':>8} "
              f"{'max|.|':>8}")
    rows = [header, "-" * len(header)]
    for streams in sorted({1, ns.streams}):
        rows += bench(streams, ns.tokens, ns.tps, ns.prefill_tps, ns.prompt_chars)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
