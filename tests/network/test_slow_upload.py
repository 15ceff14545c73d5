"""A long prompt on a slow uplink: its upload is dated to when its last byte left, on every
client stack, and the writer waits for room in the send buffer without spinning on the
kernel's transmit stamps.

A writer returns once the kernel holds its bytes: with a large send buffer at once, while a
slow uplink sends them for another 0.6 s, which was booked as prefill (upload 0.5 ms).

A stamp of bytes that left while the same write still waited made the socket poll as in
error, and the writer spun until room came: 0.35 s of CPU in a 0.9 s write.  The server here
reads the body 16 KiB at a time every 10 ms through a small receive window, then answers
with an OpenAI chat stream; the client's send buffer is 64 KiB.  The writer's thread CPU
time is compared with the upload's wall time."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp_streams import open_stream
from loopback import ThreadedServer
from machine_load import busy_slack

from agent_latency import semconv

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="transmit stamps are Linux's")

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
requests = pytest.importorskip("requests")
aiohttp = pytest.importorskip("aiohttp")

from agent_latency.instrumentation.llm import Settings  # noqa: E402
from agent_latency.instrumentation.llm._invoke import call_wrapper  # noqa: E402
from agent_latency.instrumentation.llm.openai import CHAT, OpenAIInstrumentor  # noqa: E402
from agent_latency.instrumentation.llm.requests import RequestsInstrumentor  # noqa: E402
from agent_latency.instrumentation.llm.sockets import SocketsInstrumentor  # noqa: E402

PROMPT = "x" * (1 << 20)  # 1 MiB: 0.64 s through the server's pace
READ_SIZE, READ_EVERY = 16 << 10, 0.010
# A small send buffer: the write blocks until the server has read all but its last 128 KiB
# (the kernel doubles the figure).  A large one (the most Linux grows one to by default):
# the write returns at once and the kernel sends the body at the server's pace.
SEND_BUFFERS = {"blocking-write": 64 << 10, "buffered-write": 4 << 20}
# The writer's CPU: encoding and copying a 1 MiB body and the client's own work take tens of
# milliseconds; the spin took 0.35 s of a 0.9 s upload.  On a busy machine the same work
# costs more CPU (caches and cores shared): 0.154 s once with two busy loops and three
# suites beside it, so the bound grows by a third of ``busy_slack`` there: 0.20 s, still
# well under the 0.35 s the spin took.
CPU_BOUND = 0.15
_CHUNK = ('data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
          '"choices":[{"index":0,"delta":%s,"finish_reason":%s}]}\n\n')
STREAM_REPLY = ("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close"
                "\r\n\r\n" + _CHUNK % ('{"role":"assistant","content":"hi"}', "null")
                + _CHUNK % ("{}", '"stop"') + "data: [DONE]\n\n").encode()
JSON_REPLY = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"
              b'{"id":"c","object":"chat.completion","created":0,"model":"m","choices":[{"index"'
              b':0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],'
              b'"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}')


class SlowReader(ThreadedServer):
    """An HTTP server on loopback that reads each request's body at a slow pace through a
    small receive window, then answers with a two-chunk chat stream (a chat completion to a
    request that does not ask for a stream)."""

    def __init__(self) -> None:
        super().__init__(receive_buffer=READ_SIZE)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def handle(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(READ_SIZE)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            left = length - len(body)
            tail = body[-64:]
            while left > 0:
                time.sleep(READ_EVERY)
                got = conn.recv(min(READ_SIZE, left))
                if not got:
                    return
                left -= len(got)
                tail = (tail + got)[-64:]
            streamed = b'"stream":true' in tail.replace(b" ", b"")
            conn.sendall(STREAM_REPLY if streamed else JSON_REPLY)


@pytest.fixture(scope="module")
def server() -> Iterator[SlowReader]:
    reader = SlowReader()
    yield reader
    reader.close()


@pytest.fixture(params=list(SEND_BUFFERS))
def send_buffer(request: pytest.FixtureRequest) -> list[tuple[int, int, int]]:
    """The client socket's options: a send buffer of that size."""
    return [(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFERS[request.param])]


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentors = [OpenAIInstrumentor(), RequestsInstrumentor(), SocketsInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument()
    yield
    for instrumentor in reversed(instrumentors):
        instrumentor.uninstrument()


BODY = {"model": "m", "messages": [{"role": "user", "content": PROMPT}], "stream": True}
SMALL_BODY = {**BODY, "messages": [{"role": "user", "content": "hi"}]}


def check(otel: Any, cpu: float) -> None:
    """One streamed call whose upload took the server's pace; the writer did not spin."""
    (call,) = [s for s in otel.spans() if semconv.LLM_PREFILL in (s.attributes or {})]
    upload = call.attributes[semconv.LLM_UPLOAD]
    phases = {attr: call.attributes[attr] for attr, _, _ in semconv.LLM_PHASES}
    assert upload > 0.3, phases
    assert cpu < CPU_BOUND + busy_slack() / 3, (cpu, upload)


def measure(otel: Any, call: Callable[[dict[str, Any]], None],
            before_body: Callable[[], None] | None = None) -> None:
    """``call`` once with a small body (the stack's first-use costs: pydantic's validators,
    a first event loop, lazy imports; up to 0.1 s of CPU on Python 3.10, which read past the
    bound on a busy machine), then with the 1 MiB body, whose writer is checked
    (``before_body`` runs just before it)."""
    call(SMALL_BODY)
    otel.exporter.clear()
    if before_body is not None:
        before_body()
    cpu = time.thread_time()
    call(BODY)
    check(otel, time.thread_time() - cpu)


def httpx_sync_call(server: SlowReader,
                    send_buffer: list[tuple[int, int, int]]) -> Callable[[dict[str, Any]], None]:
    """A streamed chat call through httpcore's sync stream (the openai SDK's default)."""
    def call(body: dict[str, Any]) -> None:
        transport = httpx.HTTPTransport(socket_options=send_buffer)
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0,
                               http_client=httpx.Client(transport=transport))
        for _ in client.chat.completions.create(**body):
            pass

    return call


def httpx_async_call(server: SlowReader,
                     send_buffer: list[tuple[int, int, int]]) -> Callable[[dict[str, Any]], None]:
    """A streamed chat call through httpcore's anyio stream on asyncio."""
    async def run(body: dict[str, Any]) -> None:
        transport = httpx.AsyncHTTPTransport(socket_options=send_buffer)
        client = openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0,
                                    http_client=httpx.AsyncClient(transport=transport))
        async for _ in await client.chat.completions.create(**body):
            pass

    return lambda body: asyncio.run(run(body))


def http_client_call(server: SlowReader,
                     send_buffer: list[tuple[int, int, int]]) -> Callable[[dict[str, Any]], None]:
    """A plain ``http.client`` POST, recognised on the wire (``sendall`` on the socket)."""
    def call(body: dict[str, Any]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(*send_buffer[0])
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"content-type": "application/json"})
        assert conn.getresponse().read().endswith(b"data: [DONE]\n\n")
        conn.close()

    return call


class TestWriterWaitsWithoutSpinning:
    """A 1 MiB request body into a small and a large send buffer: the upload is the body's
    time on the wire; the writer's CPU stays small."""

    def test_httpx_sync(self, otel: Any, server: SlowReader,
                        send_buffer: list[tuple[int, int, int]]) -> None:
        """httpcore's sync stream (the openai SDK's default client)."""
        measure(otel, httpx_sync_call(server, send_buffer))

    def test_httpx_async(self, otel: Any, server: SlowReader,
                         send_buffer: list[tuple[int, int, int]]) -> None:
        """httpcore's anyio stream on asyncio."""
        measure(otel, httpx_async_call(server, send_buffer))

    def test_httpx_async_not_streamed(self, otel: Any, server: SlowReader,
                                      send_buffer: list[tuple[int, int, int]]) -> None:
        """httpcore's anyio stream, a call that is not streamed (nothing watches its
        connection until the request is written)."""
        async def run(body: dict[str, Any]) -> None:
            transport = httpx.AsyncHTTPTransport(socket_options=send_buffer)
            client = openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0,
                                        http_client=httpx.AsyncClient(transport=transport))
            body = {k: v for k, v in body.items() if k != "stream"}
            reply = await client.chat.completions.create(**body)
            assert reply.choices[0].message.content == "hi"

        measure(otel, lambda body: asyncio.run(run(body)))

    def test_requests(self, otel: Any, server: SlowReader,
                      send_buffer: list[tuple[int, int, int]]) -> None:
        """urllib3's ``sendall`` under ``requests``."""
        from requests.adapters import HTTPAdapter
        from urllib3.connection import HTTPConnection

        class SmallSendBuffer(HTTPAdapter):
            def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
                kwargs["socket_options"] = [*HTTPConnection.default_socket_options,
                                            *send_buffer]
                super().init_poolmanager(*args, **kwargs)

        def call(body: dict[str, Any]) -> None:
            with requests.Session() as session:
                session.mount("http://", SmallSendBuffer())
                response = session.post(f"{server.url}/chat/completions", json=body,
                                        stream=True, timeout=30)
                assert [line for line in response.iter_lines() if line][-1] == b"data: [DONE]"

        measure(otel, call)

    def test_http_client(self, otel: Any, server: SlowReader,
                         send_buffer: list[tuple[int, int, int]]) -> None:
        """A plain ``http.client`` POST, recognised on the wire (``sendall`` on the socket)."""
        measure(otel, http_client_call(server, send_buffer))

    def test_aiohttp(self, otel: Any, server: SlowReader,
                     send_buffer: list[tuple[int, int, int]]) -> None:
        """aiohttp's transport, read as the openai SDK's chat stream."""
        wrapper = call_wrapper(CHAT, Settings())

        def with_send_buffer(addr_info: Any) -> socket.socket:
            family, kind, proto, _, _ = addr_info
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(*send_buffer[0])
            return sock

        async def run(body: dict[str, Any]) -> None:
            connector = aiohttp.TCPConnector(socket_factory=with_send_buffer)
            async with aiohttp.ClientSession(connector=connector) as session:
                stream = await wrapper(open_stream, None,
                                       (session, f"{server.url}/chat/completions"), body)
                async for _ in stream:
                    pass

        measure(otel, lambda body: asyncio.run(run(body)))


class LateCount:
    """A kernel call that returns (``after``) or starts ``delay`` seconds late once, when
    armed: the time a thread taking the GIL between two system calls holds it, while the
    slow reader acknowledges the request's bytes as it reads them."""

    __slots__ = ("after", "armed", "call", "delay", "late_when")

    def __init__(self, call: Callable[..., Any], late_when: Callable[..., bool], *,
                 after: bool, delay: float = 0.03) -> None:
        self.call, self.late_when, self.after, self.delay = call, late_when, after, delay
        self.armed = False

    def __call__(self, *args: Any) -> Any:
        if not (self.armed and self.late_when(*args)):
            return self.call(*args)
        self.armed = False
        if not self.after:
            time.sleep(self.delay)
            return self.call(*args)
        result = self.call(*args)
        time.sleep(self.delay)
        return result


class TestAcknowledgementBetweenTheCounts:
    """The request's last byte's key comes from two kernel counts read apart (the bytes
    acknowledged, the send queue) and from the acknowledged count when the stamps start:
    an acknowledgement landing between them does not lose the upload."""

    @pytest.fixture
    def late(self, monkeypatch: pytest.MonkeyPatch) -> list[LateCount]:
        from agent_latency.instrumentation.net import _arrivals

        # Late after the acknowledged count, before the stamps start (the head of the body
        # is still going out), and between the send queue's count and the acknowledged one.
        in_flight = _arrivals.unacknowledged_bytes
        start = LateCount(_arrivals.transmit_stamps,
                          lambda sock, on: on and bool(in_flight(sock.fileno())), after=False)
        queue = LateCount(in_flight, lambda fd: True, after=True)
        monkeypatch.setattr(_arrivals, "transmit_stamps", start)
        monkeypatch.setattr(_arrivals, "unacknowledged_bytes", queue)
        return [start, queue]

    @pytest.mark.parametrize("stack", [http_client_call, httpx_sync_call, httpx_async_call],
                             ids=["http_client", "httpx_sync", "httpx_async"])
    def test_upload_kept(self, otel: Any, server: SlowReader,
                         send_buffer: list[tuple[int, int, int]], late: list[LateCount],
                         stack: Callable[..., Callable[[dict[str, Any]], None]]) -> None:
        """``http.client`` (the sockets' tap), httpcore's sync stream and its anyio stream
        (where the watcher takes the last byte's stamp): each count late once, with the
        1 MiB body only."""
        def arm() -> None:
            for count in late:
                count.armed = True

        measure(otel, stack(server, send_buffer), before_body=arm)
        assert not any(count.armed for count in late)  # each came late once
