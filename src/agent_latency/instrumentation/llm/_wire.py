"""The wire's clock for a stream: its first and last output tokens dated when their bytes
reached this host, not when the SDK handed them over.

Arrival times (the network layer's :func:`~..net.follow`) are taken while they matter, so
that a stream read by a client that keeps up costs nothing per chunk:

- from the response's headers until the first output token has been handed over, always;
- for the rest of the stream when the client may be late: the first output token was handed
  over late (a first parse, a busy loop), other async streams were in flight on the same
  process (an event loop shared by parallel streams), a garbage collection paused the
  process during the stream, or other threads took the CPU while the first token was awaited
  (they hold the GIL when bytes come).

While they are taken, each chunk the SDK hands over is matched to the event that completed
it: the ``k``-th chunk after a read is the ``k``-th event that read completed (an SDK reads
only when it needs bytes for its next event).  A chunk handed over from bytes read before
the tap is not matched (it keeps its hand-over time).
"""

from __future__ import annotations

import threading
import weakref
from time import perf_counter, process_time, thread_time
from typing import Any

from ... import _pauses
from ..._log import internal_error
from ..net import Arrival, follow
from . import _rates

#: Other threads used at least this share of the CPU while a first token was awaited: they
#: may hold the GIL when the later tokens land.
_BUSY_THREADS = 0.2
#: The first output token was handed over at least this long after its bytes came: the
#: client is behind the wire (a first parse, a busy loop), and the rest of the stream too.
_LATE = 0.002

# Streams being read now (weakly: a stream dropped unfinished leaves by itself).
_open: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


def _on_pause(start: float, end: float) -> None:
    for chunks in tuple(_open):
        busy(chunks)


_pauses.PAUSES.listeners.append(_on_pause)


def start(chunks: Any) -> None:
    """Take arrival times for ``chunks``' stream from now until its first output token."""
    call = chunks.call
    if not call.attempts or not call.wants_arrivals:
        return
    attempt = call.attempts[-1]
    following = attempt.following
    if following is None:
        following = attempt.following = follow(attempt)
        if following is None:
            return
    _pauses.PAUSES.install()
    chunks.following = following
    # The SDK has parsed none of the body yet: its first chunk is the first event of the
    # latest read (the headers' read, when the first events came with them).
    chunks.read_seen, chunks.k = following.arrivals.reads, -1
    following.watch()
    chunks.cpu_at = (process_time(), thread_time(), perf_counter())
    if call.settings.arrivals == "always":
        chunks.busy = True
    with _lock:
        concurrent = [c for c in _open if c.call.is_async] if call.is_async else []
        _open.add(chunks)
    if concurrent:
        chunks.busy = True
        for other in concurrent:
            busy(other)


def precise_sync(chunks: Any, fetch: Any) -> Any:
    """``fetch`` with the chunk it returns matched to its event on the wire (the wrapper is
    kept on ``chunks``: it holds it weakly, so no reference cycle keeps a stream alive)."""
    state = weakref.ref(chunks)

    def next_chunk() -> Any:
        owner = state()
        if owner is None:
            return fetch()
        _look_back(owner)
        chunk = fetch()
        _match(owner)
        return chunk

    return next_chunk


def precise_async(chunks: Any, fetch: Any) -> Any:
    """:func:`precise_sync` for async streams."""
    state = weakref.ref(chunks)

    async def next_chunk() -> Any:
        owner = state()
        if owner is None:
            return await fetch()
        _look_back(owner)
        chunk = await fetch()
        _match(owner)
        return chunk

    return next_chunk


def _look_back(chunks: Any) -> None:
    # The chunk handed over last has been observed by now: an output one is the last
    # output token so far.
    if chunks.outputs != chunks.counted:
        chunks.counted = chunks.outputs
        chunks.last_ref = chunks.ref


def _match(chunks: Any) -> None:
    following = chunks.following
    if following is None:
        chunks.ref = None
        return
    arrivals = following.arrivals
    reads = arrivals.reads
    if reads != chunks.read_seen:
        chunks.read_seen = reads
        k = chunks.k = 0
    else:
        k = chunks.k = chunks.k + 1
    offset = arrivals.latest_event(k)
    chunks.ref = ref = (arrivals, offset) if offset is not None else None
    if not chunks.chunks:
        chunks.first_chunk_ref = ref


def first_output(chunks: Any) -> None:
    """The first output token was handed over: keep taking arrival times only while the
    client may be late."""
    try:
        chunks.first_ref = ref = chunks.ref
        if chunks.following is None:
            return
        if not chunks.busy and ref is not None:
            arrival = ref[0].arrival(ref[1])
            if arrival is not None and chunks.t_first - arrival.t >= _LATE:
                chunks.busy = True
        if not chunks.busy:
            process, thread, wall = chunks.cpu_at
            elapsed = perf_counter() - wall
            others = (process_time() - process) - (thread_time() - thread)
            if elapsed > 0 and others / elapsed >= _BUSY_THREADS:
                chunks.busy = True
        if chunks.busy:
            chunks.following.watch()
            chunks.next = chunks.precise(chunks.plain_next)
        else:
            _stop(chunks)
    except Exception:  # noqa: BLE001
        internal_error("llm.wire")


def busy(chunks: Any) -> None:
    """The client may be late from now on: take arrival times for the rest of the stream."""
    try:
        if not chunks.call.wants_arrivals or (chunks.busy and chunks.following is not None):
            return
        chunks.busy = True
        if chunks.t_first is None:
            if chunks.following is not None:
                chunks.following.watch()
            return  # still in the first token's window: it continues past it
        following = chunks.following
        if following is None:
            call = chunks.call
            if not call.attempts:
                return
            attempt = call.attempts[-1]
            following = attempt.following = follow(attempt)
            if following is None:
                return
            chunks.following = following
            # Chunks the SDK already holds came from reads before the tap: until the next
            # tapped read, none is matched.
            chunks.read_seen = following.arrivals.reads
            chunks.k = 1 << 30
            chunks.ref = None
            chunks.next = chunks.precise(chunks.plain_next)
        following.watch()
    except Exception:  # noqa: BLE001
        internal_error("llm.wire")


def _stop(chunks: Any) -> None:
    # Outputs handed over from here on are not matched: none of the refs is the last one.
    chunks.ref = chunks.last_ref = None
    following, chunks.following = chunks.following, None
    if following is not None:
        for attempt in chunks.call.attempts:
            if attempt.following is following:
                attempt.stop_following()
        following.stop()
    _open.discard(chunks)


# The last pace seen per (provider, model): a stream read wholly after a pause (all of it
# coalesced) is dated back at the pace the same model's earlier streams showed.
_paces: dict[tuple[str, str], float] = {}


def _pace(call: Any, arrivals: Any, after: int) -> float | None:
    """The server's time between output events: seen on this stream, else on the same
    model's last stream, else from the output rate learned for it (about a token a chunk)."""
    key = (call.provider, call.model)
    pace = arrivals.pace(after)
    if pace is not None:
        if len(_paces) > 256:
            _paces.clear()
        _paces[key] = pace
        return pace
    if key in _paces:
        return _paces[key]
    output_tps = _rates.rates(call.provider, call.model)[1]
    return 1.0 / output_tps if output_tps else None


def _resolve(ref: Any, call: Any, first: Any, *, paced: bool) -> Arrival | None:
    """The arrival of the event at ``ref``, coalesced ones dated back at the pace of the
    output tokens (those from the first one, ``first``, on)."""
    if ref is None:
        return None
    arrivals, offset = ref
    after = first[1] - 1 if first is not None and first[0] is arrivals else -1
    return arrivals.arrival(offset, _pace(call, arrivals, after), paced=paced)


def finish(chunks: Any, call: Any) -> None:
    """The stream ended: its arrival marks onto ``call``, the tap removed."""
    try:
        following = chunks.following
        last_ref = None
        if following is not None:
            _look_back(chunks)
            last_ref = chunks.last_ref
            call.end_arrival = following.arrivals.last_byte()
        _stop(chunks)
        chunks.last_ref = last_ref
        first = chunks.first_ref
        call.first_arrival = _resolve(first, call, first, paced=True)
        first_chunk = _resolve(chunks.first_chunk_ref, call, first, paced=True)
        if first_chunk is not None and chunks.t_first_chunk is not None:
            chunks.t_first_chunk = min(first_chunk.t, chunks.t_first_chunk)
        if chunks.last_ref is not None and chunks.counted == chunks.outputs:
            # What follows the last token (finish reason, usage) is sent right after it.
            call.last_arrival = _resolve(chunks.last_ref, call, first, paced=False)
        chunks.first_ref = chunks.last_ref = chunks.ref = chunks.first_chunk_ref = None
    except Exception:  # noqa: BLE001
        internal_error("llm.wire")
