"""The socket layer: DNS, TCP connect and TLS recorded for whatever is recording, sync and
asyncio, each counted once, and nothing touched when nothing records."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator

import pytest

from agent_latency.instrumentation.net import NetPhases, Recording, _sockets


@pytest.fixture(autouse=True)
def socket_patches() -> Iterator[None]:
    _sockets.PATCH.acquire()
    yield
    _sockets.PATCH.release()


class TestSync:
    """socket.getaddrinfo, socket.connect and SSLSocket.do_handshake, timed once each."""

    def test_plain_connection(self, tcp_server) -> None:
        with Recording(NetPhases()) as phases:
            sock = socket.create_connection(("localhost", tcp_server.port))
        sock.close()
        assert phases.dns > 0
        assert phases.connect > 0 and phases.connects == 1
        assert phases.tls == 0 and phases.tls_handshakes == 0
        assert phases.last_sock is sock

    def test_tls_connection(self, tls_server, client_tls) -> None:
        with Recording(NetPhases()) as phases:
            raw = socket.create_connection(("localhost", tls_server.port))
            sock = client_tls.wrap_socket(raw, server_hostname="localhost")
            sock.sendall(b"ping")
            assert sock.recv(4) == b"ping"
        sock.close()
        assert phases.connects == 1 and phases.tls_handshakes == 1
        assert phases.tls > 0

    def test_nothing_recorded_outside(self, tcp_server) -> None:
        phases = NetPhases()
        with Recording(phases):
            pass
        socket.create_connection(("localhost", tcp_server.port)).close()
        assert (phases.dns, phases.connect, phases.connects) == (0.0, 0.0, 0)

    def test_errors_pass_through(self) -> None:
        with Recording(NetPhases()) as phases:
            with pytest.raises(OSError):
                socket.create_connection(("127.0.0.1", 9), timeout=2)
        assert phases.connects == 1  # the attempt took time, and counts as one


class TestAsyncio:
    """The event loop's getaddrinfo, sock_connect and TLS transport, counted once."""

    def test_tls_open_connection(self, tls_server, client_tls) -> None:
        async def run() -> NetPhases:
            with Recording(NetPhases()) as phases:
                reader, writer = await asyncio.open_connection(
                    "localhost", tls_server.port, ssl=client_tls)
                writer.write(b"ping")
                assert await reader.readexactly(4) == b"ping"
            writer.close()
            await writer.wait_closed()
            return phases

        phases = asyncio.run(run())
        assert phases.dns > 0
        # The loop's non-blocking socket.connect inside sock_connect is not a second one.
        assert phases.connects == 1 and phases.connect > 0
        assert phases.tls_handshakes == 1 and phases.tls > 0

    def test_tasks_record_into_their_own_context(self, tcp_server) -> None:
        async def connect(phases: NetPhases) -> None:
            with Recording(phases):
                _, writer = await asyncio.open_connection("127.0.0.1", tcp_server.port)
                writer.close()

        async def run() -> tuple[NetPhases, NetPhases]:
            a, b = NetPhases(), NetPhases()
            await asyncio.gather(connect(a), connect(b))
            return a, b

        a, b = asyncio.run(run())
        assert a.connects == 1 and b.connects == 1


class TestPatches:
    """Applied and removed with the reference count; the originals come back."""

    def test_remove_restores(self) -> None:
        if _sockets.PATCH._users != 1:
            pytest.skip("another instrumentor in this process holds the socket patches")
        _sockets.PATCH.release()
        try:
            assert "connect" not in socket.socket.__dict__
            assert ssl.SSLSocket.do_handshake.__qualname__ == "SSLSocket.do_handshake"
            assert socket.getaddrinfo.__module__ == "socket"
        finally:
            _sockets.PATCH.acquire()
        assert socket.socket.connect.__module__ == _sockets.__name__
