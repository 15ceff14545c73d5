"""What the socket-layer patches add per socket operation, with and without something
recording, beside the floor of the unpatched operation.

Not a test: prints a table.  Run: ``python benchmarks/bench_socket_overhead.py [--n 20000]``.

Operations, each on loopback: ``socket.getaddrinfo("127.0.0.1", …)`` (numeric: no resolver
round trip), a TCP ``connect`` + ``close`` to a local listener, ``loop.getaddrinfo`` and an
asyncio ``open_connection`` + close, and one whole ``requests.get`` on a kept-alive session
(no connect: the per-request floor of an unpatched call).  Three states, in alternating
blocks so the machine's load drifts through all of them alike:

- **unpatched**: the standard library as it is;
- **patched, idle**: our wrappers in place, nothing recording (every call outside an LLM
  call or a connection setup) — the cost every program pays;
- **patched, recording**: inside a ``Recording`` (what an LLM call's own sockets pay).

Per-operation times are medians over blocks; the differences are small against the
operations themselves, so the figure to read is the idle overhead's order of magnitude.  A
second table times the wrapper alone, over a no-op in place of the real operation.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import socket
import statistics
import threading
from collections.abc import Callable
from time import perf_counter

from agent_latency.instrumentation.net import NetPhases, Recording, _sockets


class _Quiet(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, delayed ACKs cost 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def _per_op(fn: Callable[[], object], n: int) -> float:
    t = perf_counter()
    for _ in range(n):
        fn()
    return (perf_counter() - t) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--blocks", type=int, default=7)
    args = parser.parse_args()

    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = listener.getsockname()[1]

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    import requests

    session = requests.Session()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    session.get(url)
    loop = asyncio.new_event_loop()

    async def aconnect() -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()

    def tcp() -> None:
        socket.create_connection(("127.0.0.1", port)).close()

    ops: dict[str, tuple[Callable[[], object], int]] = {
        "getaddrinfo": (lambda: socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM),
                        args.n),
        "connect+close": (tcp, max(args.n // 20, 200)),
        "loop.getaddrinfo": (lambda: loop.run_until_complete(
            loop.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)), max(args.n // 20, 200)),
        "asyncio connect": (lambda: loop.run_until_complete(aconnect()),
                            max(args.n // 40, 100)),
        "requests.get (kept alive)": (lambda: session.get(url), max(args.n // 40, 100)),
    }
    states = ("unpatched", "patched, idle", "patched, recording")
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.blocks):
        for state in states:
            if state != "unpatched":
                _sockets.PATCH.acquire()
            try:
                for name, (fn, n) in ops.items():
                    if state == "patched, recording":
                        with Recording(NetPhases()):
                            value = _per_op(fn, n)
                    else:
                        value = _per_op(fn, n)
                    times.setdefault((name, state), []).append(value)
            finally:
                if state != "unpatched":
                    _sockets.PATCH.release()

    print(f"\nper operation, median of {args.blocks} alternating blocks (µs)")
    print(f"{'operation':<28}{'unpatched':>11}{'idle':>9}{'+idle':>8}{'recording':>11}"
          f"{'+rec':>8}")
    for name in ops:
        base, idle, rec = (statistics.median(times[(name, s)]) * 1e6 for s in states)
        print(f"{name:<28}{base:>11.2f}{idle:>9.2f}{idle - base:>+8.2f}{rec:>11.2f}"
              f"{rec - base:>+8.2f}")

    # The wrapper alone: a no-op in place of the original.
    _sockets.PATCH.acquire()
    try:
        saved = _sockets._orig["getaddrinfo"]
        _sockets._orig["getaddrinfo"] = lambda *a, **k: None
        wrapped = socket.getaddrinfo
        n = args.n * 10
        bare = [_per_op(lambda: None, n) for _ in range(args.blocks)]
        idle = [_per_op(lambda: wrapped("h", 1), n) for _ in range(args.blocks)]
        with Recording(NetPhases()):
            rec = [_per_op(lambda: wrapped("h", 1), n) for _ in range(args.blocks)]
        _sockets._orig["getaddrinfo"] = saved
    finally:
        _sockets.PATCH.release()
    b, i, r = (statistics.median(x) * 1e9 for x in (bare, idle, rec))
    print(f"\nthe wrapper alone (over a no-op, call overhead of a lambda {b:.0f} ns removed): "
          f"idle +{i - b:.0f} ns, recording +{r - b:.0f} ns per operation")
    listener.close()
    server.shutdown()
    loop.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
