"""Accuracy of the network phases under a delay injected in the kernel, for every client.

Not a test: prints a table.  Run as root (NFQUEUE; Debian ``iptables``,
``libnetfilter-queue-dev`` and pip ``netfilterqueue``, see docs/simulator.md):
``python benchmarks/bench_network_accuracy.py [--rtt-ms 20] [--calls 5]``.

Set-up: the simulator in its own process, undelayed; in front of it two forwarders in another
process, one plain TCP and one TLS 1.3 (a self-signed certificate made with ``openssl``),
each on a port whose loopback packets the kernel holds ``RTT/2`` each way
(``KernelDelay``: SYN and SYN-ACK too, so a TCP connect takes one RTT, a TLS 1.3 handshake
one more).  Each client makes ``--calls`` streamed (or, for aiohttp, plain) chat calls on a
new connection each, over TLS and over plain TCP, and the table compares, per call:

- ``connect`` and ``tls`` against the true round trip (the injected RTT);
- the call's network overhead (DNS + connect + TLS + upload + RTT + tail) against the
  truth: the injected round trips (connect, TLS, one for the request) — the loopback's own
  upload and tail (~0.1–1.5 ms) are in ours, not in the truth.

Clients: httpx (openai SDK on an ``httpx.Client``), httpx2 (openai 3.x's own), aiohttp (a
call whose request goes through ``aiohttp.ClientSession``), requests (``requests.post`` to
``/chat/completions``), the Responses WebSocket (``client.responses.connect()``: the setup
span's connect/TLS, the calls' network) and a raw ``websockets`` connect (socket-layer
connect/TLS only; no LLM call exists without an SDK above it).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import ssl
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_latency import semconv
from agent_latency.simulator import SimulatorConfig, SimulatorProcess, kernel_delay_unavailable

MESSAGES = [{"role": "user", "content": "hello " * 100}]


# -- the forwarders (their own process) ------------------------------------------------------
def _forward(target_port: int, plain_port: int, tls_port: int, cert: str, key: str,
             rtt: float, ready: Any) -> None:
    # The kernel delay's packet handler runs here too, away from the clients' GIL.
    from agent_latency.simulator._kernel_delay import KernelDelay

    delays = [KernelDelay(plain_port, rtt), KernelDelay(tls_port, rtt)]
    for delay in delays:
        delay.start()
    try:
        _serve(target_port, plain_port, tls_port, cert, key, ready)
    finally:
        for delay in delays:
            delay.stop()


def _serve(target_port: int, plain_port: int, tls_port: int, cert: str, key: str,
           ready: Any) -> None:
    async def pipe(reader: Any, writer: Any) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def handle(reader: Any, writer: Any) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def main() -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.load_cert_chain(cert, key)
        await asyncio.start_server(handle, "127.0.0.1", plain_port)
        await asyncio.start_server(handle, "127.0.0.1", tls_port, ssl=context)
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _certificate(directory: Path) -> tuple[str, str]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-keyout",
                    str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


# -- clients: each makes one call on a new connection ----------------------------------------
def _openai_stream(client: Any) -> None:
    stream = client.chat.completions.create(model="sim", messages=MESSAGES, max_tokens=16,
                                            stream=True)
    for _ in stream:
        pass


def httpx_call(base: str, cafile: str) -> None:
    import httpx
    import openai

    with httpx.Client(verify=cafile) as http:
        _openai_stream(openai.OpenAI(base_url=base, api_key="k", max_retries=0,
                                     http_client=http))


def httpx2_call(base: str, cafile: str) -> None:
    import httpx2
    import openai

    with httpx2.Client(verify=ssl.create_default_context(cafile=cafile)) as http:
        _openai_stream(openai.OpenAI(base_url=base, api_key="k", max_retries=0,
                                     http_client=http))


def aiohttp_call(base: str, cafile: str) -> None:
    import aiohttp

    from agent_latency.instrumentation.llm import Settings
    from agent_latency.instrumentation.llm._invoke import call_wrapper
    from agent_latency.instrumentation.llm.openai import CHAT
    from agent_latency.instrumentation.protocols import view

    wrapper = call_wrapper(CHAT, Settings())
    context = ssl.create_default_context(cafile=cafile)

    async def post(session: Any, **body: Any) -> Any:
        async with session.post(base + "/chat/completions", json=body, ssl=context) as r:
            return view(await r.json())

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            await wrapper(post, None, (session,), {"model": "sim", "messages": MESSAGES,
                                                   "max_tokens": 16})

    asyncio.run(run())


def requests_call(base: str, cafile: str) -> None:
    import requests

    response = requests.post(base + "/chat/completions", stream=True, timeout=30,
                             verify=cafile,
                             json={"model": "sim", "messages": MESSAGES, "max_tokens": 16,
                                   "stream": True})
    for _ in response.iter_lines():
        pass


def responses_ws_call(base: str, cafile: str) -> None:
    import openai

    client = openai.OpenAI(base_url=base, api_key="k", max_retries=0)
    options = {"ssl": ssl.create_default_context(cafile=cafile)} if base.startswith(
        "https") else {}
    with client.responses.connect(websocket_connection_options=options) as conn:
        conn.response.create(model="sim", input="hello " * 100, max_output_tokens=16)
        for event in conn:
            if event.type in ("response.completed", "response.incomplete", "error"):
                break


def reference(port: int, cafile: str | None) -> tuple[float, float]:
    """An uninstrumented TCP connect and TLS handshake to the same port, timed around the
    bare socket calls: the true round trips as this machine delivers them."""
    import socket
    from time import perf_counter

    from agent_latency.instrumentation.net import _sockets

    connect = _sockets._orig.get("socket.connect", socket.socket.connect)
    sock = socket.socket()
    t0 = perf_counter()
    connect(sock, ("127.0.0.1", port))
    t1 = perf_counter()
    tls = 0.0
    if cafile is not None:
        context = ssl.create_default_context(cafile=cafile)
        wrapped = context.wrap_socket(sock, server_hostname="localhost",
                                      do_handshake_on_connect=False)
        handshake = _sockets._orig.get("do_handshake", ssl.SSLSocket.do_handshake)
        t2 = perf_counter()
        handshake(wrapped)
        tls = perf_counter() - t2
        sock = wrapped
    sock.close()
    return t1 - t0, tls


def websockets_connect(base: str, cafile: str) -> dict[str, float]:
    """A raw ``websockets`` handshake, socket-layer phases only."""
    from websockets.sync.client import connect

    from agent_latency.instrumentation.net import NetPhases, Recording

    url = base.replace("https", "wss").replace("http", "ws") + "/responses"
    secure = url.startswith("wss")
    with Recording(NetPhases()) as phases:
        ws = connect(url, ssl=ssl.create_default_context(cafile=cafile) if secure else None)
    ws.close()
    return {"connect": phases.connect, "tls": phases.tls}


CLIENTS: dict[str, Callable[[str, str], Any]] = {
    "httpx": httpx_call, "httpx2": httpx2_call, "aiohttp": aiohttp_call,
    "requests": requests_call, "Responses WebSocket": responses_ws_call,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=20.0)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    reason = kernel_delay_unavailable()
    if reason is not None:
        print(f"kernel delay unavailable: {reason}")
        return 1
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
    from agent_latency.instrumentation.llm.requests import RequestsInstrumentor
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument()
    RequestsInstrumentor().instrument()
    rtt = args.rtt_ms / 1e3

    with tempfile.TemporaryDirectory() as tmp, SimulatorProcess(SimulatorConfig(
            port=0, prefill_tps=20000.0, output_tps=2000.0)) as sim:
        cert, key = _certificate(Path(tmp))
        plain_port, tls_port = _free_port(), _free_port()
        ready = multiprocessing.Event()
        forwarder = multiprocessing.Process(
            target=_forward, args=(int(sim.base_url.rpartition(":")[2]), plain_port, tls_port,
                                   cert, key, rtt, ready))
        forwarder.start()
        ready.wait(10)
        try:
            rows = []
            for secure, port in ((True, tls_port), (False, plain_port)):
                scheme = "https" if secure else "http"
                base = f"{scheme}://localhost:{port}/v1"
                for name, client in CLIENTS.items():
                    client(base, cert)  # warm-up: imports, the SDK's first-use work
                    exporter.clear()
                    for _ in range(args.calls):
                        client(base, cert)
                    rows.append(_row(name, secure, exporter.get_finished_spans(), rtt))
                refs = [reference(port, cert if secure else None) for _ in range(args.calls)]
                ref_connect = statistics.median(r[0] for r in refs)
                ref_tls = statistics.median(r[1] for r in refs) if secure else None
                rows.append(("reference (bare)", secure, ref_connect, ref_tls, None, None, None))
                ws = [websockets_connect(base, cert) for _ in range(args.calls)]
                rows.append(("websockets (raw)", secure,
                             statistics.median(w["connect"] for w in ws),
                             statistics.median(w["tls"] for w in ws) if secure else None,
                             None, None, None))
        finally:
            forwarder.terminate()  # SIGTERM: its KernelDelay removes its rules
            forwarder.join(10)

    print(f"\nRTT {args.rtt_ms:.0f} ms injected in the kernel (10 ms each way), "
          f"{args.calls} calls per client, new connection per call, median.  Truth: the bare "
          "socket's connect and TLS handshake to the same port (reference rows); a call's "
          "network truth is its new connection's connect + TLS plus one round trip")
    print(f"{'client':<21}{'TLS':>5}{'connect ms':>12}{'err':>8}{'tls ms':>9}{'err':>8}"
          f"{'network ms':>12}{'truth':>8}{'err ms':>8}{'err':>8}{'kernel rtt':>12}")
    refs = {r[1]: r for r in rows if r[0] == "reference (bare)"}
    for name, secure, connect, tls, network, new_connection, kernel_rtt in rows:
        _, _, ref_connect, ref_tls, *_ = refs[secure]
        line = f"{name:<21}{'yes' if secure else 'no':>5}"
        line += f"{connect * 1e3:>12.2f}{_err(connect, ref_connect):>8}"
        line += (f"{tls * 1e3:>9.2f}{_err(tls, ref_tls):>8}" if tls is not None
                 else f"{'-':>9}{'':>8}")
        if network is not None:
            truth = ref_connect + new_connection * (ref_connect + (ref_tls or 0.0))
            line += (f"{network * 1e3:>12.2f}{truth * 1e3:>8.2f}"
                     f"{(network - truth) * 1e3:>+8.2f}{_err(network, truth):>8}")
            line += f"{kernel_rtt * 1e3:>12.2f}" if kernel_rtt else f"{'-':>12}"
        print(line)
    return 0


def _err(value: float, truth: float) -> str:
    return f"{100 * (value - truth) / truth:+.1f}%"


def _row(name: str, secure: bool, spans: Any, rtt: float) -> tuple[Any, ...]:
    calls = [s for s in spans if semconv.LLM_CLIENT in s.attributes]
    setups = [s for s in spans if s.name == semconv.SPAN_CONNECTION_SETUP]
    new_connection = 1
    if setups:  # the WebSocket: setup apart, the call pays one round trip
        connect = statistics.median(s.attributes[semconv.LLM_CONNECT] for s in setups)
        tls = statistics.median(s.attributes[semconv.LLM_TLS] for s in setups)
        new_connection = 0
    else:
        connect = statistics.median(s.attributes[semconv.LLM_CONNECT] for s in calls)
        tls = statistics.median(s.attributes[semconv.LLM_TLS] for s in calls)
    network = statistics.median(s.attributes[semconv.LLM_NETWORK] for s in calls)
    kernel = statistics.median(s.attributes[semconv.LLM_RTT] for s in calls)
    return (name, secure, connect, tls if secure else None, network, new_connection, kernel)


if __name__ == "__main__":
    raise SystemExit(main())
