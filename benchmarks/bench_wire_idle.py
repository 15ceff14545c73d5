"""What recognising model requests on the wire costs every other socket operation, counted by
callgrind: instructions added per ``sendall`` and per ``recv`` while no model call runs.

The wire layer (``agent_latency.instrumentation.llm.sockets``) patches
``socket.socket.sendall`` and ``send`` and ``ssl.SSLSocket.sendall``; reads are not patched (only a
socket carrying a recognised request is moved to a class that watches them), and a new
connection's setup is kept for a request that may follow.  The worker runs under ``valgrind
--tool=callgrind`` over a loopback TCP pair: after warm-up, ``--n`` operations of each kind
with the instrumentor on, then ``--n`` with it off, dumping callgrind's counters after each
batch (``callgrind_control -d``), so imports and warm-up are never counted.  Kinds:

- ``sendall``: ``sendall`` of 256 bytes that are not a request head (the common case);
- ``send``: the same with ``send``;
- ``recv``: ``recv`` of those 256 bytes on the other end (written with ``os.write``);
- ``post``: ``sendall`` of a JSON ``POST`` to a path that is not a model endpoint (the
  request line and headers are parsed; with generic spans on, the body is looked at for a
  model request and the exchange let go; ``AGENT_LATENCY_GENERIC_CALLS=off``: the
  recogniser says no at the head);
- ``connect``: ``socket.create_connection`` to the listener, then ``close`` (the setup is
  kept for a request that may follow).

Printed: instructions per operation with the layer off, added with it on, and the added
instructions in microseconds at the rate this machine runs the same unpatched loop natively
(timed outside valgrind).

    python benchmarks/bench_wire_idle.py [--n 5000]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from collections.abc import Callable

import _callgrind as callgrind

KINDS = ("sendall", "send", "recv", "post", "connect")
PAYLOAD = b"x" * 256
POST = (b"POST /v1/other HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2\r\n\r\n{}")


def _pair() -> tuple[socket.socket, socket.socket, socket.socket]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.listen(64)
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    return listener, client, server


def operations(n: int) -> dict[str, Callable[[], None]]:
    """One batch of each kind (``n`` operations) on a loopback pair."""
    listener, client, server = _pair()
    address = listener.getsockname()
    # (methods looked up at each call, as a program does: the patch replaces the class's)

    def sendall() -> None:
        for _ in range(n):
            client.sendall(PAYLOAD)
            server.recv(4096)  # drained here: the buffers never fill

    def send() -> None:
        for _ in range(n):
            client.send(PAYLOAD)
            server.recv(4096)

    def recv_only() -> None:
        # The reads alone: the other side writes to its file descriptor (nothing patched).
        fd = server.fileno()
        for _ in range(n):
            os.write(fd, PAYLOAD)
            client.recv(4096)

    def post() -> None:
        for _ in range(n):
            client.sendall(POST)
            server.recv(4096)

    def connect() -> None:
        for _ in range(n):
            sock = socket.create_connection(address)
            accepted, _ = listener.accept()
            sock.close()
            accepted.close()

    return {"sendall": sendall, "send": send, "recv": recv_only, "post": post,
            "connect": connect,
            "python": lambda: _python(n)}


def _check(data: bytes) -> bool:
    return data[:5] == b"POST "


def _python(n: int) -> None:
    """Plain Python work (calls, slices, compares) with no system call: the rate at which
    this machine runs the interpreter's own instructions, to put the added ones in µs (the
    socket loops' wall time is mostly the kernel's, which callgrind does not count)."""
    for _ in range(n):
        for _ in range(20):
            _check(PAYLOAD)


def worker(n: int) -> None:
    from agent_latency.instrumentation.llm.sockets import SocketsInstrumentor

    instrumentor = SocketsInstrumentor()
    batches = operations(n)
    for on in (True, False):  # warm-up both ways
        (instrumentor.instrument if on else instrumentor.uninstrument)()
        for run in batches.values():
            run()

    callgrind.dump("warm")
    for on in (True, False):
        (instrumentor.instrument if on else instrumentor.uninstrument)()
        for kind, run in batches.items():
            run()
            callgrind.dump(f"{kind}-{'on' if on else 'off'}")


def _native_seconds(n: int) -> dict[str, float]:
    """Seconds per batch of each kind, unpatched, timed here (best of five)."""
    batches = operations(n)
    best = {}
    for kind, run in batches.items():  # (unpatched: this process never instruments)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
        best[kind] = min(times)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="operations of each kind")
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.n)
        return 0
    if not callgrind.available():
        return 1
    # The shared runner: it counts the worker's main thread, the files ``counts`` reads
    # (a runner of this script's own, without ``--separate-threads``, found none of them).
    counts = callgrind.run(__file__, ["--worker", "--n", str(args.n)],
                           callgrind.on_off_tags(KINDS))
    if counts is None:
        return 1
    native = _native_seconds(args.n)
    # Interpreter instructions per microsecond on this machine.
    rate = counts["python-off"] / (native["python"] * 1e6)
    print(f"instructions (callgrind), {args.n:,} operations of each kind, no model call running")
    print(f"{'operation':<10} {'unpatched':>12} {'added':>9} {'added µs':>9}")
    for kind in KINDS:
        off = counts[f"{kind}-off"] / args.n
        added = counts[f"{kind}-on"] / args.n - off
        print(f"{kind:<10} {off:>12,.0f} {added:>+9,.0f} {added / rate:>+9.3f}")
    print(f"(µs at {rate:,.0f} interpreter instructions per µs, timed natively; sends and post "
          "include the other end's recv; recv, the other end's write; connect, the accept and "
          "both closes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
