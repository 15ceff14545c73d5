"""The scheduler: precise sleeps, capacity (queue, prefill slot, decode batch), token deadlines.

Capacity model (a simplified continuous-batching server):

1. every request first waits its fixed ``queue_ms``;
2. it then waits for one of ``max_batch`` decode-batch seats (held until it finishes);
3. prefill is compute-bound and serialized through a single prefill slot: a request holds
   the slot for ``input_tokens / prefill_tps`` seconds. Waiting for a seat or the slot is
   queue time;
4. prefill ends with the first output token; token ``i`` is then due at
   ``prefill_end + sum(gap_1..gap_i)`` where each gap is ``1 / output_tps`` times
   ``1 + U(-jitter, +jitter)``. Streams in the batch do not slow each other down.

Deadlines are absolute, so a late wake-up never shifts later tokens. asyncio's selector
rounds timeouts up to whole milliseconds, so one ticker task sleeps until ``spin_us``
before the earliest deadline and then spins with ``await asyncio.sleep(0)`` (other tasks
keep running while it spins), releasing each waiter as soon as its deadline has passed.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from collections.abc import Iterator
from time import perf_counter


class PreciseClock:
    """Sub-millisecond ``sleep_until`` for one event loop (one ticker task serves all)."""

    __slots__ = ("_heap", "_seq", "_spin_s", "_task", "_timer", "_wake")

    def __init__(self, spin_us: float = 1200.0) -> None:
        self._spin_s = spin_us / 1e6
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def sleep_until(self, deadline: float) -> None:
        """Return as soon as ``perf_counter() >= deadline`` (a few µs late at best)."""
        if perf_counter() >= deadline:
            return
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        fut: asyncio.Future[None] = loop.create_future()
        first = not self._heap or deadline < self._heap[0][0]
        heapq.heappush(self._heap, (deadline, next(self._seq), fut))
        if first and self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
        await fut

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` precisely."""
        await self.sleep_until(perf_counter() + seconds)

    def close(self) -> None:
        """Stop the ticker task."""
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        heap = self._heap
        while True:
            now = perf_counter()
            while heap and heap[0][0] <= now:
                fut = heapq.heappop(heap)[2]
                if not fut.done():
                    fut.set_result(None)
            if not heap:
                await self._park(loop, None)
                continue
            remaining = heap[0][0] - now
            if remaining > self._spin_s:
                await self._park(loop, remaining - self._spin_s)
            else:
                await asyncio.sleep(0)

    async def _park(self, loop: asyncio.AbstractEventLoop, timeout: float | None) -> None:
        self._wake = wake = loop.create_future()
        timer = None
        if timeout is not None:
            timer = loop.call_later(timeout, _resolve, wake)
        try:
            await wake
        finally:
            if timer is not None:
                timer.cancel()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class AdmissionGate:
    """Holds requests before their queue time starts until :meth:`open` (a test's barrier).

    Requests held here arrive "together" by construction, whatever the machine's load did to
    their senders: :meth:`open` lets them all compete for capacity at one instant,
    ``opened_at_mono``.
    """

    __slots__ = ("_future", "opened_at_mono", "waiting")

    def __init__(self) -> None:
        self._future: asyncio.Future[None] | None = None
        self.waiting = 0  # read from the test's thread: an int is read atomically
        self.opened_at_mono: float | None = None

    async def wait(self) -> None:
        """Return once the gate is open (at once if it already is)."""
        if self.opened_at_mono is not None:
            return
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
        self.waiting += 1
        await self._future

    def open(self) -> None:
        """Let every held request in (call in the server's event loop)."""
        self.opened_at_mono = perf_counter()
        if self._future is not None and not self._future.done():
            self._future.set_result(None)


class Capacity:
    """Decode-batch seats and the single prefill slot of one simulated server."""

    __slots__ = ("_batch", "_max_batch", "_prefill")

    def __init__(self, max_batch: int) -> None:
        self._max_batch = max_batch
        self._batch: asyncio.Semaphore | None = None
        self._prefill: asyncio.Lock | None = None

    def _ensure(self) -> None:
        if self._batch is None:
            self._batch = asyncio.Semaphore(self._max_batch)
            self._prefill = asyncio.Lock()

    async def acquire_seat(self) -> None:
        """Wait for a decode-batch seat."""
        self._ensure()
        assert self._batch is not None
        await self._batch.acquire()

    def release_seat(self) -> None:
        """Give a seat back."""
        assert self._batch is not None
        self._batch.release()

    @property
    def prefill_slot(self) -> asyncio.Lock:
        """The lock every prefill holds while it runs."""
        self._ensure()
        assert self._prefill is not None
        return self._prefill


def token_deadlines(start: float, n: int, rate: float, jitter: float,
                    rng: random.Random) -> Iterator[float]:
    """Absolute due times of ``n`` tokens, token 0 at ``start``."""
    gap = 1.0 / rate
    t = start
    for i in range(n):
        if i:
            t += gap * (1.0 + rng.uniform(-jitter, jitter)) if jitter else gap
        yield t


def chunk_deadlines(start: float, n: int, per_chunk: int, rate: float, jitter: float,
                    rng: random.Random) -> list[tuple[int, int, float]]:
    """``(first_token, end_token, due)`` per chunk; a chunk is due with its last token."""
    dues = list(token_deadlines(start, n, rate, jitter, rng))
    return [(i, min(i + per_chunk, n), dues[min(i + per_chunk, n) - 1])
            for i in range(0, n, per_chunk)]
