"""A local HTTP server that answers as a hostile or broken trace backend would.

Each route (a path, without its query) maps to a behaviour: a fixed answer, a redirect, a
body that trickles, an endless body, a paging listing that never ends.  Every request is
recorded with its headers, and each behaviour counts the bytes it managed to send.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Behaviour = Callable[["Handler"], None]


@dataclass
class Seen:
    """One request as the server got it."""

    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class Server:
    """The running server: its URL base, routes (changeable while it runs) and what it saw."""

    port: int
    routes: dict[str, Behaviour] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)  # bytes sent per route

    @property
    def base(self) -> str:
        return f"127.0.0.1:{self.port}"


class Handler(BaseHTTPRequestHandler):
    server_state: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        state = self.server_state
        state.requests.append(Seen(parts.path, dict(urllib.parse.parse_qsl(parts.query)),
                                   {k.lower(): v for k, v in self.headers.items()}))
        behaviour = state.routes.get(parts.path)
        if behaviour is None:
            self.answer(404, b'{"error": "no such route"}')
            return
        try:
            behaviour(self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: what the test wants to see

    def answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {"Content-Type": "application/json",
                           "Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def count(self, size: int) -> None:
        route = urllib.parse.urlsplit(self.path).path
        self.server_state.sent[route] = self.server_state.sent.get(route, 0) + size


def body(data: bytes | str, status: int = 200) -> Behaviour:
    """Answer ``data``."""
    raw = data.encode() if isinstance(data, str) else data
    return lambda h: h.answer(status, raw)


def redirect(location: str, status: int = 302) -> Behaviour:
    """Redirect to ``location`` (``{query}`` is replaced by the request's query)."""
    def run(h: Handler) -> None:
        query = urllib.parse.urlsplit(h.path).query
        h.answer(status, b"", {"Location": location.replace("{query}", query)})
    return run


def trickle(every_s: float, size: int, *, in_headers: bool = False,
            length: bool = True) -> Behaviour:
    """A byte every ``every_s`` seconds, ``size`` bytes in all: of the body (declared
    with a Content-Length, or read to the close), or of a header line."""
    def run(h: Handler) -> None:
        h.close_connection = True
        if in_headers:
            h.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        else:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            if length:
                h.send_header("Content-Length", str(size))
            h.send_header("Connection", "close")
            h.end_headers()
        h.wfile.flush()
        for _ in range(size):
            time.sleep(every_s)
            h.wfile.write(b" ")
            h.wfile.flush()
            h.count(1)
    return run


def endless(block: int = 1 << 16, limit: int = 1 << 30, declared: int | None = None,
            ) -> Behaviour:
    """A body of spaces that goes on (to ``limit`` bytes), read to the close, or with a
    ``declared`` Content-Length."""
    def run(h: Handler) -> None:
        h.close_connection = True
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        if declared is not None:
            h.send_header("Content-Length", str(declared))
        h.send_header("Connection", "close")
        h.end_headers()
        chunk = b" " * block
        sent = 0
        while sent < limit:
            h.wfile.write(chunk)
            sent += block
            h.count(block)
    return run


def pages(cursors: Callable[[int], str | None], cap: int = 200, *, spans: int = 0,
          delay_s: float = 0.0) -> Behaviour:
    """Phoenix's span listing: pages of ``spans`` spans (a trace per page) whose
    ``next_cursor`` is ``cursors(n)`` for the n-th request (from 1), each after ``delay_s``;
    past ``cap`` requests an HTTP 500 ends a client that never stops on its own."""
    served = [0]
    lock = threading.Lock()

    def run(h: Handler) -> None:
        with lock:
            served[0] += 1
            n = served[0]
        time.sleep(delay_s)
        if n > cap:
            h.answer(500, b'{"error": "enough"}')
            return
        data = [{"context": {"trace_id": f"{n:032x}", "span_id": f"{n * 100_000 + i + 1:016x}"},
                 "name": f"span {i}", "parent_id": None,
                 "start_time": "2026-01-01T00:00:00+00:00",
                 "end_time": "2026-01-01T00:00:01+00:00", "status_code": "OK",
                 "attributes": {"pad": "x" * 200}} for i in range(spans)]
        doc = {"data": data, "next_cursor": cursors(n)}
        h.answer(200, json.dumps(doc).encode())
    return run


@contextmanager
def serve() -> Iterator[Server]:
    """A hostile server on a free loopback port, for the block's duration."""
    state = Server(0)
    handler = type("BoundHandler", (Handler,), {"server_state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    # (shutdown() waits for the loop's next poll: 0.5 s by default, at every test's end)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
