"""A connected TCP pair on loopback, for tests that need real sockets and kernel stamps."""

from __future__ import annotations

import socket


def loopback_pair() -> tuple[socket.socket, socket.socket]:
    """``(client, server)``: a fresh TCP connection on 127.0.0.1, its listener closed."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    finally:
        listener.close()
    return client, server
