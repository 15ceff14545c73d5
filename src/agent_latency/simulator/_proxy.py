"""A delaying TCP proxy that puts a round-trip time in front of the simulator.

Which phases pay the delay (``R`` = ``--rtt-ms``, ``R/2`` each way):

* **TCP connect**: the kernel completes the client's handshake with the proxy's listening
  socket at once, so a client's own connect timer sees ~0. To keep a new connection's
  total cost right, the first bytes of each new connection are held until
  ``accepted + R + R/2`` (the handshake's round trip plus the one-way trip), unless
  ``connect_penalty`` is off. A client therefore sees the handshake's R inside its wait for
  the first response byte, not in its connect time.
* **upload**: every chunk read from the client is forwarded ``R/2`` after it was read;
* **download / first byte**: every chunk read from the server reaches the client ``R/2``
  after the server wrote it.

Chunks are forwarded in order, in writes of at most 1500 bytes, each on an absolute
deadline (so delays do not accumulate). Bandwidth is not modelled. A connection's FIN is
delayed like data.
"""

from __future__ import annotations

import asyncio
import contextlib
from time import perf_counter

from ._timing import PreciseClock

_MSS = 1500
_EOF = b""


class DelayProxy:
    """Forwards ``listen`` to ``upstream`` with ``rtt_s / 2`` added in each direction."""

    __slots__ = ("_clock", "_conns", "_penalty", "_server", "_upstream", "half")

    def __init__(self, upstream: tuple[str, int], rtt_s: float, clock: PreciseClock,
                 connect_penalty: bool = True) -> None:
        self._upstream = upstream
        self.half = rtt_s / 2.0
        self._penalty = rtt_s if connect_penalty else 0.0
        self._clock = clock
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0 = any free port); return the bound port."""
        self._server = await asyncio.start_server(self._accept, host, port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        for task in list(self._conns):
            with contextlib.suppress(BaseException):
                await task

    async def _accept(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        accepted = perf_counter()
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            ureader, uwriter = await asyncio.open_connection(*self._upstream)
        except OSError:
            cwriter.close()
            self._conns.discard(task)
            return
        try:
            await asyncio.gather(
                self._pipe(creader, uwriter, accepted + self._penalty),
                self._pipe(ureader, cwriter, 0.0))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # close() cancels open connections; ending quietly is the point
        finally:
            for w in (cwriter, uwriter):
                w.close()
            self._conns.discard(task)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    not_before: float) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(queue, writer))
        try:
            while True:
                data = await reader.read(65536)
                due = max(perf_counter(), not_before) + self.half
                if not data:
                    queue.put_nowait((due, _EOF))
                    break
                for i in range(0, len(data), _MSS):
                    queue.put_nowait((due, data[i : i + _MSS]))
        except (ConnectionError, asyncio.CancelledError):
            sender.cancel()
            raise
        await sender

    async def _send(self, queue: asyncio.Queue[tuple[float, bytes]],
                    writer: asyncio.StreamWriter) -> None:
        last = 0.0
        while True:
            due, data = await queue.get()
            last = max(last, due)
            await self._clock.sleep_until(last)
            if data is _EOF or not data:
                with contextlib.suppress(OSError, RuntimeError):
                    if writer.can_write_eof():
                        writer.write_eof()
                return
            writer.write(data)
            if writer.transport.get_write_buffer_size() > 1 << 20:
                await writer.drain()
