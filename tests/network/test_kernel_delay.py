"""Under a round trip injected in the kernel (NFQUEUE, root only): connect and each call's
network overhead read the injected delay, over requests, aiohttp and the Responses
WebSocket.  Loose bounds (a busy machine); benchmarks/bench_network_accuracy.py prints the
table with TLS and every client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from machine_load import busy_slack

from agent_latency import semconv
from agent_latency.instrumentation.net._kernel import KERNEL_TICK
from agent_latency.simulator import SimulatorConfig, SimulatorProcess, kernel_delay_unavailable

# quiet: round trips injected in the kernel, to a few ms (make test runs it alone).
pytestmark = [pytest.mark.skipif(kernel_delay_unavailable() is not None,
                                 reason=f"kernel delay unavailable: {kernel_delay_unavailable()}"),
              pytest.mark.quiet]
RTT = 0.02
BODY = {"model": "sim", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorProcess]:
    with SimulatorProcess(SimulatorConfig(port=0, prefill_tps=20000.0, output_tps=2000.0,
                                          rtt_ms=RTT * 1e3, kernel_delay=True)) as server:
        yield server


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
    from agent_latency.instrumentation.llm.requests import RequestsInstrumentor

    instrumentors = [OpenAIInstrumentor(), RequestsInstrumentor()]
    for i in instrumentors:
        i.instrument()
    yield
    for i in instrumentors:
        i.uninstrument()


def _calls(otel):
    return [s for s in otel.spans() if semconv.LLM_CLIENT in s.attributes]


def _close(value: float, truth: float) -> bool:
    # Loose on purpose (benchmarks/bench_network_accuracy.py prints the real accuracy): a
    # loaded machine schedules the client late, which a kernel delay of 10 ms each way makes
    # visible; CI must not fail on load.  Nor is the delay exact on an idle one: after the
    # machine idled its holds come out long (20 ms injected: plain connects 0.5 s apart
    # took 20.4-27.3 ms, 48 of them; 20 ms apart, 20.4-21.8 ms; run L's first connect read
    # 26.4 ms), so the floor is half the round trip: one RTT still reads apart from two.
    return abs(value - truth) <= max(0.010, 0.3 * truth) + busy_slack()


class TestKernelDelay:
    """Connect = one RTT; a call on a new connection pays two, one on an open one pays one."""

    def test_requests(self, otel, sim) -> None:
        requests = pytest.importorskip("requests")
        requests.post(sim.base_url + "/v1/chat/completions", json=BODY, timeout=30)
        (span,) = _calls(otel)
        a = span.attributes
        assert _close(a[semconv.LLM_CONNECT], RTT), a[semconv.LLM_CONNECT]
        assert _close(a[semconv.LLM_NETWORK], 2 * RTT), a[semconv.LLM_NETWORK]

    def test_aiohttp(self, otel, sim) -> None:
        aiohttp = pytest.importorskip("aiohttp")
        from agent_latency.instrumentation.llm import Settings
        from agent_latency.instrumentation.llm._invoke import call_wrapper
        from agent_latency.instrumentation.llm.openai import CHAT
        from agent_latency.instrumentation.protocols import view

        async def post(session, **body):
            async with session.post(sim.base_url + "/v1/chat/completions", json=body) as r:
                return view(await r.json())

        async def run() -> None:
            async with aiohttp.ClientSession() as session:
                await call_wrapper(CHAT, Settings())(post, None, (session,), dict(BODY))

        asyncio.run(run())
        (span,) = _calls(otel)
        assert _close(span.attributes[semconv.LLM_CONNECT], RTT)
        assert _close(span.attributes[semconv.LLM_NETWORK], 2 * RTT)

    def test_responses_websocket(self, otel, sim) -> None:
        openai = pytest.importorskip("openai")
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0)
        if not hasattr(client.responses, "connect"):
            pytest.skip("this openai release has no responses.connect()")
        with client.responses.connect() as conn:
            for _ in range(2):
                conn.response.create(model="sim", input="hello", max_output_tokens=8)
                for event in conn:
                    if event.type in ("response.completed", "response.incomplete"):
                        break
        setup = next(s for s in otel.spans() if s.name == semconv.SPAN_CONNECTION_SETUP)
        assert _close(setup.attributes[semconv.LLM_CONNECT], RTT)
        # The upgrade is one more round trip (the HTTP request and its 101 answer) plus the
        # simulator's handshake: 22.5-27.7 ms over a raw socket here (20 upgrades), read
        # from the kernel's last data sent and received, both counted in its ticks (4 ms at
        # HZ 250: 24 or 28 ms of 25).  The client's own work around it (5-15 ms on a first
        # call, which read past 1.6 RTT in 15 of 25 runs when it was counted) is not in it.
        assert 0.8 * RTT <= setup.attributes[semconv.NET_UPGRADE] <= (1.6 * RTT + KERNEL_TICK
                                                                       + busy_slack())
        for span in _calls(otel):
            # One round trip, plus what the wire really adds here: the server's small frames
            # wait for ACKs under the delay (Nagle), so a stream's last bytes may come up to
            # ~RTT/2 after its last token.
            assert 0.8 * RTT <= span.attributes[semconv.LLM_NETWORK] <= 2.5 * RTT


HOLD = 0.03


@pytest.fixture(scope="module")
def held() -> Iterator[SimulatorProcess]:
    """The simulator, its client's packets held ``HOLD`` below TCP (and its own answers as
    long on their way back)."""
    from agent_latency.simulator import KernelDelay

    with SimulatorProcess(SimulatorConfig(port=0, prefill_tps=20000.0,
                                          output_tps=2000.0)) as server:
        delay = KernelDelay(server.port, 2 * HOLD, sender_side=True)
        delay.start()
        try:
            yield server
        finally:
            delay.stop()


def _check_upload(otel, most: float) -> None:
    """The one call's upload: from 0.6 × ``HOLD`` to ``most`` × ``HOLD``."""
    (span,) = _calls(otel)
    upload = span.attributes[semconv.LLM_UPLOAD]
    assert 0.6 * HOLD <= upload <= most * HOLD + busy_slack(), upload


@pytest.fixture(scope="module")
def on_the_wire() -> Iterator[None]:
    """Calls recognised on the wire too (a plain ``http.client`` POST)."""
    from agent_latency.instrumentation.llm.sockets import SocketsInstrumentor

    instrumentor = SocketsInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


class TestHeldBelowTcp:
    """A request's last byte held below TCP (sent, not yet on the device) is dated when its
    transmit stamp says it left, by the stamp's key, not by the empty send queue.  Written
    in one piece it is held ``HOLD``; the clients below write headers and body apart, and
    this kernel holds the body back until the headers are released (TCP small queues), so
    theirs leaves up to ``2 * HOLD`` after the write."""

    def test_one_write(self, otel, held, on_the_wire) -> None:
        import json
        import socket

        host = "127.0.0.1"
        body = json.dumps(BODY).encode()
        request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                   "Connection: close\r\n\r\n").encode() + body
        with socket.create_connection((host, held.port), timeout=30) as sock:
            sock.sendall(request)
            while sock.recv(65536):
                pass
        _check_upload(otel, 1.5)

    def test_http_client(self, otel, held, on_the_wire) -> None:
        import http.client
        import json

        conn = http.client.HTTPConnection("127.0.0.1", held.port, timeout=30)
        conn.request("POST", "/v1/chat/completions", json.dumps(BODY),
                     {"content-type": "application/json"})
        conn.getresponse().read()
        conn.close()
        _check_upload(otel, 2.5)

    def test_requests(self, otel, held) -> None:
        requests = pytest.importorskip("requests")
        requests.post(held.base_url + "/v1/chat/completions", json=BODY, timeout=30)
        _check_upload(otel, 2.5)

    def test_openai_stream(self, otel, held) -> None:
        openai = pytest.importorskip("openai")
        client = openai.OpenAI(base_url=held.base_url + "/v1", api_key="k", max_retries=0)
        for _ in client.chat.completions.create(stream=True, **BODY):
            pass
        _check_upload(otel, 2.5)
