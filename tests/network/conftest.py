"""Fixtures for the network tests: a TLS echo server on loopback, instrumented clients."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback import ThreadedServer
from tls_certificate import self_signed


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
