"""Model requests seen on the wire: ``http.client``, ``urllib.request`` and dspy's bundled
client (plain sockets) against the simulator, one LLM call per request with the phases of
every other call, ``traceparent`` at the server, and never a second span for a request a
higher layer of ours already has."""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_helpers import calls_in_order, sockets_instrumented
from loopback import ThreadedServer
from tls_certificate import self_signed
from truth_log import close, close_to, received_at, server_prefill
from truth_log import served as served_truth

import agent_latency
from agent_latency import semconv
from agent_latency.instrumentation.llm._routes import endpoint_of
from agent_latency.instrumentation.llm.sockets import SocketsInstrumentor
from agent_latency.simulator import SimulatorConfig, SimulatorProcess

# dspy's adapter reads its fields from the answer.
DSPY_ANSWER = "[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]"
# Slow enough that prefill and output generation are tens of milliseconds each.
RATES = SimulatorConfig(prefill_tps=2000.0, output_tps=200.0, default_output_tokens=20,
                        script={"models": {"dspy-q": [{"content": DSPY_ANSWER}]}})
MESSAGES = [{"role": "user", "content": "hello " * 200}]
CHAT = {"model": "sim-q", "messages": MESSAGES, "max_tokens": 20}


@pytest.fixture(scope="module")
def wire_sim() -> Iterator[SimulatorProcess]:
    with SimulatorProcess(RATES) as server:
        yield server


wire_instrumented = pytest.fixture(scope="module", autouse=True)(sockets_instrumented)
_calls = calls_in_order


def _truth(sim: SimulatorProcess, span: Any) -> dict[str, Any]:
    # (a record lands just after the response's last byte)
    request_id = span.attributes[semconv.LLM_SERVER_REQUEST_ID]
    deadline = time.monotonic() + 5.0
    while True:
        found = [t for t in sim.truth if t["request_id"] == request_id]
        if found or time.monotonic() > deadline:
            (record,) = found
            return record
        time.sleep(0.005)


def check_phases(sim: SimulatorProcess, span: Any, *, streamed: bool = True) -> None:
    """Phases add up; streamed, prefill and output generation are the server's within
    max(10 ms, 5 %); the server saw this span's ``traceparent``."""
    a = span.attributes
    total = sum(a[attr] for attr, _, _ in semconv.LLM_PHASES)
    assert total == pytest.approx((span.end_time - span.start_time) / 1e9, abs=2e-6)
    truth = _truth(sim, span)
    assert truth["traceparent"].split("-")[1] == format(span.context.trace_id, "032x")
    assert truth["traceparent"].split("-")[2] == format(span.context.span_id, "016x")
    if streamed:
        prefill = server_prefill(truth)
        output = truth["last_token_at_mono"] - truth["first_token_at_mono"]
        seen = {k: v for k, v in a.items() if k.startswith("agent_latency.llm.")}
        assert a[semconv.LLM_TIMING_SOURCE] == semconv.SOURCE_MEASURED
        assert close_to(a[semconv.LLM_PREFILL], prefill), (prefill, seen)
        assert close(a[semconv.LLM_OUTPUT_GENERATION], output), (output, seen)


def _post(sim: SimulatorProcess, path: str, body: dict[str, Any],
          conn: http.client.HTTPConnection | None = None) -> bytes:
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", sim.port, timeout=30)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    assert response.status == 200, data
    if own:
        conn.close()
    return data


class TestHttpClient:
    """``http.client`` POSTs to the chat endpoint: one call each, streamed or not."""

    def test_not_streamed(self, otel, wire_sim) -> None:
        data = json.loads(_post(wire_sim, "/v1/chat/completions", CHAT))
        (span,) = _calls(otel)
        a = span.attributes
        assert span.name == "chat sim-q"
        assert a[semconv.GEN_AI_PROVIDER_NAME] == "openai"
        assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 20
        assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == data["usage"]["completion_tokens"]
        assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] == data["usage"]["prompt_tokens"]
        assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == (data["choices"][0]["finish_reason"],)
        assert a[semconv.LLM_STREAMING] is False
        assert a[semconv.LLM_CONNECTION_REUSED] is False
        assert a[semconv.LLM_CONNECT] > 0
        assert a[semconv.LLM_RTT_SOURCE] == semconv.RTT_SOURCE_TCP_INFO
        check_phases(wire_sim, span, streamed=False)
        truth = _truth(wire_sim, span)
        server = truth["last_token_at_mono"] - received_at(truth)
        assert close(a[semconv.LLM_PREFILL] + a[semconv.LLM_OUTPUT_GENERATION], server)

    def test_streamed(self, otel, wire_sim) -> None:
        body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
        raw = _post(wire_sim, "/v1/chat/completions", body)
        assert raw.rstrip().endswith(b"data: [DONE]")
        (span,) = _calls(otel)
        a = span.attributes
        assert a[semconv.LLM_STREAMING] is True
        assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
        assert a[semconv.GEN_AI_RESPONSE_MODEL] == "sim-q"
        assert a[semconv.LLM_CHUNKS] >= 20
        check_phases(wire_sim, span)

    def test_a_pooled_connection(self, otel, wire_sim) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", wire_sim.port, timeout=30)
        served = len(wire_sim.truth)
        with agent_latency.task("pooled"):
            for _ in range(3):
                _post(wire_sim, "/v1/chat/completions", {**CHAT, "stream": True}, conn)
        conn.close()
        calls = _calls(otel)
        assert [s.attributes[semconv.LLM_CONNECTION_REUSED] for s in calls] == [
            False, True, True]
        for span in calls:
            check_phases(wire_sim, span)
        task = otel.span("invoke_agent pooled").attributes
        served = len(served_truth(wire_sim, served + 3)) - served
        assert task[semconv.budget_count("llm_calls")] == served == 3

    def test_anthropic_messages(self, otel, wire_sim) -> None:
        body = {"model": "claude-sim", "max_tokens": 20, "messages": MESSAGES, "stream": True}
        _post(wire_sim, "/v1/messages", body)
        (span,) = _calls(otel)
        a = span.attributes
        assert span.name == "chat claude-sim"
        assert a[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
        assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
        assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] > 0
        check_phases(wire_sim, span)

    def test_gemini_stream(self, otel, wire_sim) -> None:
        body = {"contents": [{"role": "user", "parts": [{"text": "hello " * 200}]}],
                "generationConfig": {"maxOutputTokens": 20}}
        _post(wire_sim, "/v1beta/models/gemini-sim:streamGenerateContent?alt=sse", body)
        (span,) = _calls(otel)
        a = span.attributes
        assert span.name == "chat gemini-sim"
        assert a[semconv.GEN_AI_PROVIDER_NAME] == "gcp.gemini"
        assert a[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 20
        assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
        check_phases(wire_sim, span)

    def test_error_status(self, otel, wire_sim) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", wire_sim.port, timeout=30)
        conn.request("POST", "/v1/chat/completions", json.dumps({"messages": "nope"}))
        response = conn.getresponse()
        response.read()
        conn.close()
        assert response.status >= 400
        (span,) = _calls(otel)
        assert span.attributes[semconv.ERROR_TYPE] == "HTTPStatusError"

    def test_other_requests_are_not_calls(self, otel, wire_sim) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", wire_sim.port, timeout=30)
        conn.request("GET", "/v1/models")
        conn.getresponse().read()
        conn.request("POST", "/v1/other", "{}")
        conn.getresponse().read()
        conn.close()
        assert _calls(otel) == []


class TestUrllib:
    """``urllib.request.urlopen`` to the chat endpoint: one call each, streamed or not."""

    def _open(self, sim: SimulatorProcess, body: dict[str, Any]) -> list[bytes]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{sim.port}/v1/chat/completions",
            data=json.dumps(body).encode(), headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return list(response)

    def test_not_streamed(self, otel, wire_sim) -> None:
        lines = self._open(wire_sim, CHAT)
        assert json.loads(b"".join(lines))["usage"]["completion_tokens"] == 20
        (span,) = _calls(otel)
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
        check_phases(wire_sim, span, streamed=False)

    def test_streamed(self, otel, wire_sim) -> None:
        lines = self._open(wire_sim, {**CHAT, "stream": True})
        assert lines[-2].strip() == b"data: [DONE]"
        (span,) = _calls(otel)
        assert span.attributes[semconv.LLM_STREAMING] is True
        check_phases(wire_sim, span)


class TestOtherClients:
    """Clients with no layer of their own above the socket: plain urllib3 and httpx."""

    def test_urllib3(self, otel, wire_sim) -> None:
        urllib3 = pytest.importorskip("urllib3")
        with urllib3.PoolManager() as pool:
            response = pool.request("POST", wire_sim.base_url + "/v1/chat/completions",
                                    body=json.dumps({**CHAT, "stream": True}),
                                    headers={"content-type": "application/json"},
                                    preload_content=False)
            for _ in response.stream(1024):
                pass
            response.release_conn()
        (span,) = _calls(otel)
        check_phases(wire_sim, span)

    def test_httpx(self, otel, wire_sim) -> None:
        httpx = pytest.importorskip("httpx")
        with httpx.Client() as client, client.stream(
                "POST", wire_sim.base_url + "/v1/chat/completions",
                json={**CHAT, "stream": True}) as response:
            for _ in response.iter_lines():
                pass
        (span,) = _calls(otel)
        check_phases(wire_sim, span)


class TestOneSpanPerRequest:
    """A request a higher layer of ours has (the openai SDK's) is not seen again here."""

    def test_openai_sdk(self, otel, wire_sim) -> None:
        openai = pytest.importorskip("openai")
        client = openai.OpenAI(base_url=wire_sim.base_url + "/v1", api_key="sk-test")
        served = len(wire_sim.truth)
        with agent_latency.task("sdk"):
            for _ in client.chat.completions.create(model="sim-q", messages=MESSAGES,
                                                    max_tokens=5, stream=True):
                pass
            client.chat.completions.create(model="sim-q", messages=MESSAGES, max_tokens=5)
        calls = _calls(otel)
        assert len(calls) == len(served_truth(wire_sim, served + 2)) - served == 2
        task = otel.span("invoke_agent sdk").attributes
        assert task[semconv.budget_count("llm_calls")] == 2


class TestEndpoints:
    """Which paths are model requests."""

    @pytest.mark.parametrize(("path", "operation", "model", "streams"), [
        ("/v1/chat/completions", "chat", "", False),
        ("/openai/deployments/x/chat/completions", "chat", "", False),
        ("/v1/completions", "text_completion", "", False),
        ("/v1/embeddings", "embeddings", "", False),
        ("/v1/responses", "chat", "", False),
        ("/v1/messages", "chat", "", False),
        ("/v1beta/models/gemini-2.5-flash:generateContent", "chat", "gemini-2.5-flash", False),
        ("/v1/projects/p/locations/l/publishers/google/models/g:streamGenerateContent",
         "chat", "g", True),
    ])
    def test_known(self, path: str, operation: str, model: str, streams: bool) -> None:
        endpoint, seen_model, seen_streams = endpoint_of(path) or (None, None, None)
        assert endpoint is not None and endpoint.operation == operation
        assert (seen_model, seen_streams) == (model, streams)

    def test_a_long_body_is_read_at_its_edges(self) -> None:
        from agent_latency.instrumentation.llm.sockets import _edge_fields

        text = 'not "model": "this one" ' * 40000  # ~1 MB, quotes escaped in the JSON
        body = json.dumps({"model": "m-1", "messages": [{"role": "user", "content": text}],
                           "stream": True, "max_tokens": 5}).encode()
        assert _edge_fields(body) == {"model": "m-1", "stream": True, "max_tokens": 5}

    @pytest.mark.parametrize("path", ["/v1/models", "/v1/traces", "/v1/other",
                                      "/v1beta/models/x:countTokens", "/"])
    def test_unknown(self, path: str) -> None:
        assert endpoint_of(path) is None


os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the internet


class TestDSPyDefaultEngine:
    """dspy's default engine (its bundled client on plain sockets): one LLM call per
    request the server served, with phases and ``traceparent``."""

    def test_predict(self, otel, wire_sim, monkeypatch) -> None:
        dspy = pytest.importorskip("dspy")
        from agent_latency.instrumentation.llm import sockets

        # Which calls this layer ended (the openai SDK's layer is instrumented too: dspy's
        # default engine must not go through it).
        ended: list[object] = []
        response_end = sockets.WireCall.response_end

        def counted(self: Any, t: float, error: BaseException | None) -> None:
            ended.append(self)
            response_end(self, t, error)

        monkeypatch.setattr(sockets.WireCall, "response_end", counted)
        lm = dspy.LM("openai/dspy-q", api_base=wire_sim.base_url + "/v1", api_key="sk-test",
                     cache=False, max_tokens=20)
        served = len(wire_sim.truth)
        with dspy.context(lm=lm), agent_latency.task("dspy"):
            for _ in range(2):
                dspy.Predict("question -> answer")(question="What is the answer?")
        truth = served_truth(wire_sim, served + 2)[served:]
        calls = _calls(otel)
        assert len(calls) == len(truth) == len(ended) == 2
        for span in calls:
            check_phases(wire_sim, span, streamed=span.attributes[semconv.LLM_STREAMING])
        task = otel.span("invoke_agent dspy").attributes
        assert task[semconv.budget_count("llm_calls")] == len(truth)


async def _asyncio_post(sim: SimulatorProcess, path: str, body: dict[str, Any]) -> bytes:
    """An HTTP/1.1 POST written by hand on ``asyncio`` streams, head and body apart."""
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", sim.port)
    payload = json.dumps(body).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{sim.port}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                 "Connection: close\r\n\r\n".encode())
    writer.write(payload)
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    return data


class TestAsyncio:
    """A request written on ``asyncio`` streams: one call, streamed or not."""

    async def test_streamed(self, otel, wire_sim) -> None:
        raw = await _asyncio_post(wire_sim, "/v1/chat/completions",
                                  {**CHAT, "stream": True,
                                   "stream_options": {"include_usage": True}})
        assert b"data: [DONE]" in raw
        (span,) = _calls(otel)
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
        assert span.attributes[semconv.LLM_CONNECTION_REUSED] is False
        check_phases(wire_sim, span)

    async def test_not_streamed(self, otel, wire_sim) -> None:
        raw = await _asyncio_post(wire_sim, "/v1/chat/completions", CHAT)
        assert raw.startswith(b"HTTP/1.1 200")
        (span,) = _calls(otel)
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
        check_phases(wire_sim, span, streamed=False)

    async def test_dspy_async(self, otel, wire_sim) -> None:
        dspy = pytest.importorskip("dspy")
        lm = dspy.LM("openai/dspy-q", api_base=wire_sim.base_url + "/v1", api_key="sk-test",
                     cache=False, max_tokens=20)
        served = len(wire_sim.truth)
        with dspy.context(lm=lm), agent_latency.task("adspy"):
            await dspy.Predict("question -> answer").acall(question="What is the answer?")
        truth = served_truth(wire_sim, served + 1)[served:]
        calls = _calls(otel)
        assert len(calls) == len(truth) == 1
        check_phases(wire_sim, calls[0], streamed=calls[0].attributes[semconv.LLM_STREAMING])
        task = otel.span("invoke_agent adspy").attributes
        assert task[semconv.budget_count("llm_calls")] == 1


class TLSFront(ThreadedServer):
    """Terminates TLS on 127.0.0.1 and forwards each connection to the simulator in plain
    TCP (written to the file descriptor, so its own forwarding is not a request of the
    client's)."""

    def __init__(self, context: ssl.SSLContext, upstream: int) -> None:
        self.context = context
        self.upstream = upstream
        super().__init__()

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> None:
        if isinstance(sock, ssl.SSLSocket):
            sock.sendall(data)  # a response: not a request
            return
        view = memoryview(data)
        while view:
            view = view[os.write(sock.fileno(), view):]

    def handle(self, conn: socket.socket) -> None:
        try:
            # Without TCP_NODELAY, Nagle holds each small SSE write until the client's
            # delayed ACK (40 ms on Linux): time a real front (nginx, uvicorn) never adds.
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.context.wrap_socket(conn, server_side=True)
            plain = socket.create_connection(("127.0.0.1", self.upstream))
            plain.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                ready, _, _ = select.select([tls, plain], [], [], 30)
                if not ready:
                    return
                for source in ready:
                    other = plain if source is tls else tls
                    data = source.recv(65536)
                    while source is tls and tls.pending():
                        data += tls.recv(65536)
                    if not data:
                        return
                    self._send(other, data)
        except OSError:
            pass
        finally:
            conn.close()


@pytest.fixture(scope="module")
def tls_front(wire_sim: SimulatorProcess, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[TLSFront, ssl.SSLContext]]:
    """The simulator behind TLS, and a client context that trusts its certificate."""
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    front = TLSFront(server, wire_sim.port)
    yield front, ssl.create_default_context(cafile=str(cert))
    front.close()


class TestTLS:
    """Requests over TLS (``ssl.SSLSocket``, the event loop's TLS transport): one call, the
    handshake split out, ``traceparent`` at the server."""

    def test_https_connection(self, otel, wire_sim, tls_front) -> None:
        front, context = tls_front
        conn = http.client.HTTPSConnection("localhost", front.port, context=context,
                                           timeout=30)
        body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
        for _ in range(2):
            _post(wire_sim, "/v1/chat/completions", body, conn)
        conn.close()
        first, second = _calls(otel)
        a = first.attributes
        assert a[semconv.LLM_CONNECTION_REUSED] is False
        assert a[semconv.LLM_TLS] > 0 and a[semconv.LLM_CONNECT] > 0
        assert second.attributes[semconv.LLM_CONNECTION_REUSED] is True
        assert second.attributes[semconv.LLM_TLS] == 0
        assert second.attributes[semconv.LLM_ROUND_TRIPS_AVOIDED] == 2
        for span in (first, second):
            assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
            check_phases(wire_sim, span)

    async def test_asyncio_tls(self, otel, wire_sim, tls_front) -> None:
        import asyncio

        front, context = tls_front
        reader, writer = await asyncio.open_connection("localhost", front.port, ssl=context)
        payload = json.dumps({**CHAT, "stream": True}).encode()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\nConnection: close\r\n"
                     b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        raw = await reader.read()
        writer.close()
        assert b"data: [DONE]" in raw
        (span,) = _calls(otel)
        a = span.attributes
        assert a[semconv.LLM_CONNECTION_REUSED] is False
        assert a[semconv.LLM_TLS] > 0
        check_phases(wire_sim, span)


class _Seen:
    """An observer that keeps what the network layer told it."""

    def __init__(self) -> None:
        self.attempts: list[Any] = []
        self.body: bytes | None = None
        self.status = 0
        self.data = b""
        self.ended: tuple[float, BaseException | None] | None = None

    def add_attempt(self, attempt: Any) -> None:
        self.attempts.append(attempt)

    def header_lines(self) -> bytes:
        return b""

    def request_body(self, body: bytes | None) -> None:
        self.body = body

    def response_head(self, status: int, headers: dict[str, str], t: float) -> None:
        self.status = status

    def response_data(self, data: bytes, t: float) -> None:
        self.data += data

    def response_end(self, t: float, error: BaseException | None) -> None:
        self.ended = (t, error)


def _exchange() -> tuple[Any, _Seen]:
    from agent_latency.instrumentation.net import Attempt
    from agent_latency.instrumentation.net._exchange import Exchange

    seen = _Seen()
    return Exchange(seen, Attempt("127.0.0.1", 80)), seen


class TestResponseParsing:
    """The response is parsed however its bytes are split across reads."""

    PIECES = (b'data: {"a":1}\n\n', b"data: x")
    CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
               b"Content-Type: text/event-stream\r\n\r\n"
               + b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in PIECES)
               + b"0\r\nTrailer: x\r\n\r\n")

    @pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 4096])
    def test_chunked(self, size: int) -> None:
        exchange, seen = _exchange()
        for i in range(0, len(self.CHUNKED), size):
            exchange.received(self.CHUNKED[i:i + size], float(i))
        assert seen.status == 200
        assert seen.data == b"".join(self.PIECES)
        assert seen.ended is not None and seen.ended[1] is None

    def test_content_length_after_a_100_continue(self) -> None:
        exchange, seen = _exchange()
        exchange.received(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
                          b"Content-Length: 5\r\n\r\nhel", 1.0)
        assert seen.ended is None
        exchange.received(b"lo", 2.0)
        assert (seen.status, seen.data, seen.ended) == (200, b"hello", (2.0, None))

    def test_until_close(self) -> None:
        exchange, seen = _exchange()
        exchange.received(b"HTTP/1.0 200 OK\r\n\r\nbody", 1.0)
        assert seen.ended is None
        exchange.received(b"", 3.0)
        assert (seen.data, seen.ended) == (b"body", (3.0, None))

    def test_cut(self) -> None:
        exchange, seen = _exchange()
        exchange.received(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 1.0)
        exchange.received(b"", 2.0)
        assert seen.ended is not None and type(seen.ended[1]).__name__ == "ResponseCut"


class TestUninstrument:
    """After uninstrument() the socket methods are the standard library's again."""

    def test_restored(self, otel, wire_sim) -> None:
        import asyncio.selector_events

        transport = asyncio.selector_events._SelectorSocketTransport
        patched = (socket.socket.sendall, ssl.SSLSocket.sendall, transport.write)
        instrumentor = SocketsInstrumentor()
        instrumentor.uninstrument()
        try:
            assert "sendall" not in socket.socket.__dict__
            assert ssl.SSLSocket.sendall is not patched[1]
            assert transport.write is not patched[2]
            _post(wire_sim, "/v1/chat/completions", CHAT)
            assert _calls(otel) == []
        finally:
            instrumentor.instrument()
        assert socket.socket.sendall is not patched[0]  # a new wrapper, applied again
        _post(wire_sim, "/v1/chat/completions", CHAT)
        assert len(_calls(otel)) == 1


class TestRegistration:
    """instrument() loads the wire's recogniser when the program imports an HTTP client,
    not before (start-up stays light), whichever comes first."""

    @pytest.mark.parametrize("module", ["urllib.request", "asyncio", "http.client"])
    def test_applied_on_import(self, module: str, tmp_path: Path) -> None:
        import sys

        code = ("import sys, agent_latency\nagent_latency.instrument()\n"
                "before = 'agent_latency.instrumentation.llm.sockets' in sys.modules\n"
                f"import {module}\n"
                "from agent_latency.instrumentation.llm.sockets import SocketsInstrumentor\n"
                "import socket\n"
                "print(before, SocketsInstrumentor().is_instrumented_by_opentelemetry,\n"
                "      'sendall' in socket.socket.__dict__)\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
        env[semconv.ENV_OUTPUT_DIR] = str(tmp_path)
        proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.split() == ["False", "True", "True"], proc.stderr[-2000:]
        assert "failed" not in proc.stderr, proc.stderr[-2000:]
