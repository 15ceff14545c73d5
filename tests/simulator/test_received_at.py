"""The truth's ``received_at_mono``: when a request's last byte reached the server (the
kernel's stamp), before its handler had the request parsed (``started_at``): the server
time a client sees before the first token starts there."""

from __future__ import annotations

import json
import socket
import time
from time import perf_counter

import pytest

# Between a request's head and its body: far longer than a wake-up on a loaded machine.
GAP = 0.4


def _request(body: dict[str, object], path: str = "/v1/chat/completions") -> tuple[bytes, bytes]:
    raw = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw)}\r\n\r\n").encode()
    return head, raw


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (non-streamed, with a Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return head


CHAT = {"model": "m", "stream": False, "max_tokens": 2,
        "messages": [{"role": "user", "content": "hello"}]}


class TestReceivedAt:
    """A request is received when its last byte lands, not when its handler starts."""

    def test_a_slow_body_is_received_at_its_end(self, make_sim) -> None:
        """The head read, the body sent later (after the handler began): received when
        the body landed, before the parse; the next request on the connection has its
        own."""
        sim = make_sim()
        head, body = _request(CHAT)
        with socket.create_connection(("127.0.0.1", sim.port)) as sock:
            before_head = perf_counter()
            sock.sendall(head)
            time.sleep(GAP)
            before_body = perf_counter()
            sock.sendall(body)
            _read_response(sock)
            time.sleep(GAP)
            before_next = perf_counter()
            sock.sendall(head + body)
            _read_response(sock)
        first, following = sim.wait_truth(2)
        assert before_head < before_body <= first["received_at_mono"]
        # (the kernel's stamp: within the send, however late the server read it)
        assert first["received_at_mono"] < before_body + GAP / 2
        assert first["received_at_mono"] <= first["started_at_mono"]
        assert before_next <= following["received_at_mono"] <= following["started_at_mono"]

    def test_a_request_that_made_no_record_leaves_no_mark(self, make_sim) -> None:
        """A request answered without a truth record (an unknown path, a bad body) on the
        same connection: the next request's mark is its own."""
        sim = make_sim()
        with socket.create_connection(("127.0.0.1", sim.port)) as sock:
            for bad in (_request(CHAT, "/v1/nowhere"), _request({"model": 1})):
                sock.sendall(b"".join(bad))
                assert b" 40" in _read_response(sock).split(b"\r\n")[0]
            time.sleep(GAP)
            before = perf_counter()
            sock.sendall(b"".join(_request(CHAT)))
            _read_response(sock)
        [truth] = sim.wait_truth(1)
        assert before <= truth["received_at_mono"] <= truth["started_at_mono"]

    def test_each_request_on_a_kept_connection_has_its_own(self, make_sim) -> None:
        """Requests one after another on one connection: each mark after its own send."""
        sim = make_sim()
        sends = []
        with socket.create_connection(("127.0.0.1", sim.port)) as sock:
            for _ in range(3):
                time.sleep(0.05)
                sends.append(perf_counter())
                sock.sendall(b"".join(_request(CHAT)))
                _read_response(sock)
        truths = sim.wait_truth(3)
        for sent, truth in zip(sends, truths, strict=True):
            assert sent <= truth["received_at_mono"] <= truth["started_at_mono"]

    def test_a_websocket_message_is_received_at_its_own_bytes(self, make_sim) -> None:
        """On the Responses WebSocket each message is a request: its mark is its own
        frame's, not the upgrade's."""
        websockets = pytest.importorskip("websockets.sync.client")
        sim = make_sim()
        sends = []
        with websockets.connect(sim.base_url.replace("http", "ws") + "/v1/responses") as ws:
            for _ in range(2):
                time.sleep(0.05)
                sends.append(perf_counter())
                ws.send(json.dumps({"type": "response.create", "model": "m",
                                    "input": "hello", "max_output_tokens": 2}))
                while json.loads(ws.recv(timeout=10))["type"] not in (
                        "response.completed", "response.incomplete"):
                    pass
        truths = sim.wait_truth(2)
        for sent, truth in zip(sends, truths, strict=True):
            assert sent <= truth["received_at_mono"] <= truth["started_at_mono"]
