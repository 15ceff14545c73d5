"""Real sockets on loopback, for tests that need them and the kernel's stamps: a connected
TCP pair, a send timed on the test's clock, and a threaded server to build test servers on."""

from __future__ import annotations

import socket
import sys
import threading
from time import perf_counter

import pytest

# The two clocks' offset is read a microsecond apart; the kernel stamps inside the send call.
CLOCK_SLACK = 0.0005

# A module of tests on the kernel's receive stamps: Linux only, the stamps kept on throughout
# (the ``stamps_on`` fixture of tests/network).
KERNEL_STAMPS = [
    pytest.mark.skipif(not sys.platform.startswith("linux"),
                       reason="kernel receive stamps (SO_TIMESTAMPNS) are Linux's"),
    pytest.mark.usefixtures("stamps_on"),
]


def loopback_pair() -> tuple[socket.socket, socket.socket]:
    """``(client, server)``: a fresh TCP connection on 127.0.0.1, its listener closed."""
    listener = socket.create_server(("127.0.0.1", 0))
    try:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    finally:
        listener.close()
    return client, server


def timed_send(sock: socket.socket, data: bytes) -> tuple[float, float]:
    """Send all of ``data``; the ``perf_counter`` times before and after (on loopback the
    kernel stamps the segments inside the call)."""
    before = perf_counter()
    sock.sendall(data)
    return before, perf_counter()


def within(t: float, window: tuple[float, float]) -> bool:
    """``t`` inside ``window``, give or take the clocks' :data:`CLOCK_SLACK`."""
    return window[0] - CLOCK_SLACK <= t <= window[1] + CLOCK_SLACK


class ThreadedServer:
    """A TCP listener on 127.0.0.1 that hands each connection to :meth:`handle` on a thread
    of its own; ``receive_buffer`` (bytes) is set on the listener, so on every connection."""

    def __init__(self, receive_buffer: int | None = None) -> None:
        self.listener = socket.socket()
        if receive_buffer is not None:
            self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port: int = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        """Serve one accepted connection (and close it)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop accepting (connections being served go on)."""
        self.listener.close()
