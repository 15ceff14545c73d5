"""Fixtures for the network tests: a TLS echo server on loopback, instrumented clients, the
kernel's receive stamps kept on."""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from time import perf_counter

import pytest
from loopback import ThreadedServer, loopback_pair
from tls_certificate import self_signed

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for ``localhost`` (the openssl command line)."""
    return self_signed(tmp_path_factory.mktemp("tls"))


class EchoServer(ThreadedServer):
    """Accepts TCP (optionally TLS) connections on 127.0.0.1 and echoes what it reads."""

    def __init__(self, context: ssl.SSLContext | None) -> None:
        self.context = context
        super().__init__()

    def handle(self, conn: socket.socket) -> None:
        try:
            if self.context is not None:
                conn = self.context.wrap_socket(conn, server_side=True)
            while data := conn.recv(65536):
                conn.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()


@pytest.fixture(scope="module")
def tls_server(tls_files: tuple[Path, Path]) -> Iterator[EchoServer]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls_files)
    server = EchoServer(context)
    yield server
    server.close()


@pytest.fixture(scope="module")
def tcp_server() -> Iterator[EchoServer]:
    server = EchoServer(None)
    yield server
    server.close()


@pytest.fixture
def client_tls(tls_files: tuple[Path, Path]) -> ssl.SSLContext:
    """A client context that trusts the test certificate."""
    return ssl.create_default_context(cafile=str(tls_files[0]))


@pytest.fixture(scope="module")
def stamps_on() -> Iterator[None]:
    """The kernel's receive stamps on for the whole system while these tests run.

    The kernel turns them on some time after the first socket asks (a deferred work item)
    and off after the last one closes: a test that sends right after making its socket may
    otherwise get its bytes without a stamp (half the time, measured, on a machine where
    nothing else keeps them on).  One stamping connection held open keeps them on."""
    keeper, peer = loopback_pair()
    keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    deadline = perf_counter() + 5.0
    while perf_counter() < deadline:
        peer.sendall(b"x")
        time.sleep(0.005)
        _, ancillary, _, _ = keeper.recvmsg(16, 256)
        if any(kind == SO_TIMESTAMPNS for _, kind, _ in ancillary):
            break
    yield
    keeper.close()
    peer.close()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """``(client, server)``: a fresh TCP connection on loopback, closed after the test."""
    client, server = loopback_pair()
    yield client, server
    client.close()
    server.close()
