"""The wire's clock for a stream: its first and last output tokens dated when their bytes
reached this host, not when the SDK handed them over.

Arrival times (the network layer's :func:`~..net.follow`) are taken while they matter, so
that a stream read by a client that keeps up costs nothing per chunk:

- from the request until the first output token has been handed over, always;
- for the rest of the stream when the client may be late: the first output token was handed
  over late (a first parse, a busy loop), other async streams were in flight on the same
  process (an event loop shared by parallel streams), a garbage collection paused the
  process during the stream, or other threads took the CPU while the first token was awaited
  (they hold the GIL when bytes come).

Which events carry output is read from the wire's own bytes (:mod:`._output_events`), so
whatever the client library does with them (an SDK's one chunk per event, litellm's wrapper
that drops empty chunks and merges others) the first output event is the first token, and
the last output event read while the tap was on, the last token.
"""

from __future__ import annotations

import threading
import weakref
from time import perf_counter, process_time, thread_time
from typing import Any

from ... import _pauses
from ..._log import internal_error
from ..net import Arrival, Arrivals, follow
from . import _rates

#: Other threads used at least this share of the CPU while a first token was awaited: they
#: may hold the GIL when the later tokens land.
_BUSY_THREADS = 0.2
#: The first output token was handed over at least this long after its bytes came: the
#: client is behind the wire (a first parse, a busy loop), and the rest of the stream too.
_LATE = 0.002

# Streams being read now, watched or not (weakly: a stream dropped unfinished leaves by
# itself): a collection or a new parallel stream may make any of them late.
_open: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


def _on_pause(start: float, end: float) -> None:
    for chunks in tuple(_open):
        busy(chunks)


_pauses.PAUSES.listeners.append(_on_pause)


def _following(call: Any) -> Any:
    """The call's final attempt's arrival times, started now if they were not."""
    if not call.attempts or not call.wants_arrivals:
        return None
    attempt = call.attempts[-1]
    following = attempt.following
    if following is None:
        following = attempt.following = follow(attempt, call.classify_event)
    return following


class StreamMarks:
    """What this module keeps of one stream read below any SDK (``requests``'
    ``iter_content``, a request recognised on the wire): the same fields an SDK stream's
    per-chunk state holds, for :func:`start`, :func:`first_output` and :func:`finish`."""

    __slots__ = ("__weakref__", "busy", "call", "cpu_at", "first_arrivals", "following",
                 "t_first", "t_first_chunk")

    def __init__(self, call: Any) -> None:
        self.call = call
        self.following: Any = None
        self.first_arrivals: Any = None
        self.busy: bool | None = False
        self.cpu_at: Any = None
        self.t_first: float | None = None  # the first output token's hand-over
        self.t_first_chunk: float | None = None

    def handed_over(self) -> None:
        """The call's first output token has been handed over (``call.t_first`` is set):
        arrival times go on only while the client may be late (once)."""
        if self.t_first is None and self.call.t_first is not None:
            self.t_first = self.call.t_first
            first_output(self)

    def end(self) -> None:
        """The stream ended: its arrival marks onto the call (its first chunk too)."""
        call = self.call
        self.t_first_chunk = call.t_first_chunk
        finish(self, call)
        call.t_first_chunk = self.t_first_chunk


def start(chunks: Any) -> None:
    """Take arrival times for ``chunks``' stream from now until its first output token."""
    call = chunks.call
    following = _following(call)
    if following is None:
        return
    _pauses.PAUSES.install()
    chunks.following = following
    chunks.first_arrivals = following.arrivals
    # Watched until the first token: an event loop may be busy with other tasks as it
    # lands, and a sync client may still be at work between sending and its first read (a
    # process's first call parses and imports for tenths of a second): the kernel's stamp of
    # a queue read late dates only its newest bytes.
    following.watch(ticks=True)
    chunks.cpu_at = (process_time(), thread_time(), perf_counter())
    mode = call.settings.arrivals
    if mode == "always":
        chunks.busy = True
    elif mode == "first":
        chunks.busy = None  # never escalated: the first token's window only
    with _lock:
        concurrent = [c for c in _open if c.call.is_async] if call.is_async else []
        _open.add(chunks)
    if concurrent and chunks.busy is not None:
        chunks.busy = True
        for other in concurrent:
            busy(other)


def first_output(chunks: Any) -> None:
    """The first output token was handed over: keep taking arrival times only while the
    client may be late."""
    try:
        following = chunks.following
        if following is None:
            return
        if chunks.busy is False:
            arrival = _first(following.arrivals, chunks.call)
            if arrival is not None and chunks.t_first - arrival.t >= _LATE:
                chunks.busy = True
        if chunks.busy is False:
            process, thread, wall = chunks.cpu_at
            elapsed = perf_counter() - wall
            others = (process_time() - process) - (thread_time() - thread)
            if elapsed > 0 and others / elapsed >= _BUSY_THREADS:
                chunks.busy = True
        if chunks.busy:
            following.watch(ticks=False)  # the prefill's wait is over: the pace dates now
        else:
            _stop(chunks)
    except Exception:  # noqa: BLE001
        internal_error("llm.wire")


def busy(chunks: Any) -> None:
    """The client may be late from now on: take arrival times for the rest of the stream."""
    try:
        if chunks.busy is None or (chunks.busy and chunks.following is not None):
            return
        chunks.busy = True
        following = chunks.following
        if following is None:
            if chunks.t_first is None:
                return  # its window was never opened (no tap here): nothing to resume
            following = _following(chunks.call)
            if following is None:
                return
            chunks.following = following
        following.watch()
    except Exception:  # noqa: BLE001
        internal_error("llm.wire")


def _stop(chunks: Any) -> None:
    following, chunks.following = chunks.following, None
    if following is not None:
        for attempt in chunks.call.attempts:
            if attempt.following is following:
                attempt.stop_following()
        following.stop()


# The last pace seen per (provider, model): a stream read wholly after a pause (all of it
# coalesced) is dated back at the pace the same model's earlier streams showed.
_paces: dict[tuple[str, str], float] = {}


def _pace(call: Any, arrivals: Arrivals, after: int) -> tuple[float | None, bool]:
    """The server's time between output events: seen on this stream, else on the same
    model's last stream, else from the output rate learned for it (about a token a chunk);
    and whether it was seen on this stream."""
    key = (call.provider, call.model)
    pace = arrivals.pace(after)
    if pace is not None:
        if len(_paces) > 256:
            _paces.clear()
        _paces[key] = pace
        return pace, True
    if key in _paces:
        return _paces[key], False
    output_tps = _rates.rates(call.provider, call.model)[1]
    return (1.0 / output_tps if output_tps else None), False


def _first(arrivals: Arrivals, call: Any) -> Arrival | None:
    offset = arrivals.first_output()
    if offset is None:
        return None
    pace, seen = _pace(call, arrivals, offset - 1)
    return arrivals.arrival(offset, pace, waited=True, pace_seen=seen)


def _first_chunk(chunks: Any, arrivals: Arrivals, first: Arrival | None) -> None:
    """Date the stream's first event from the wire too: the first token's own date where it
    is that event (Gemini's, or a client that sends no opening event), and never after it.
    Dated apart, a coalesced block's two estimates could put the first chunk after the first
    token it carried."""
    offset = arrivals.ends[0]
    if first is not None and arrivals.outputs and offset == arrivals.outputs[0]:
        t = first.t
    else:
        first_chunk = arrivals.arrival(offset)
        if first_chunk is None:
            return
        t = first_chunk.t if first is None else min(first_chunk.t, first.t)
    chunks.t_first_chunk = min(t, chunks.t_first_chunk)


def finish(chunks: Any, call: Any) -> None:
    """The stream ended: its arrival marks onto ``call``, the taps removed."""
    try:
        first_arrivals: Arrivals | None = chunks.first_arrivals
        following = chunks.following
        if following is not None:
            # Watched to the end: every event is wanted (the last token; the pace the first
            # token's estimate may need).
            following.arrivals.scan()
        if first_arrivals is not None:
            first = call.first_arrival = _first(first_arrivals, call)
            if first_arrivals.ends and chunks.t_first_chunk is not None:
                # (the first output was scanned for: every event before it is known)
                _first_chunk(chunks, first_arrivals, first)
        if following is not None:
            arrivals = following.arrivals
            call.end_arrival = arrivals.last_byte()
            last = arrivals.last_output()
            if last is not None:
                # The tap saw every byte from its start to the end: its last output event is
                # the stream's last token (what follows it, the finish reason and usage, is
                # sent right after, not at the server's pace).
                own_window = following.arrivals is first_arrivals
                after = arrivals.outputs[0] - 1 if own_window else -1
                call.last_arrival = arrivals.arrival(last, _pace(call, arrivals, after)[0],
                                                     paced=False)
        _stop(chunks)
        _open.discard(chunks)
        chunks.first_arrivals = None
    except Exception:  # noqa: BLE001
        internal_error("llm.wire")
