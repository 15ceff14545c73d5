"""When the bytes of one response reached this host: arrival times from the wire.

A response's events (SSE events, the last byte of a body) are dated when their bytes arrived,
not when the client library handed them to the program: in between sit a garbage
collection, a busy event loop, another thread holding the GIL, or the SDK's first parse, and
those are the client's time, not the server's.

Two kinds of observation are kept per connection, each saying "TCP bytes up to ``cum`` had
arrived by ``t``":

- ``KERNEL``: the kernel's receive stamp (``SO_TIMESTAMPNS``) of the newest queued byte,
  read with ``MSG_PEEK`` by the reader just before it reads, or by the watcher thread
  (:mod:`._watcher`) while the reader is away.  Segments that arrived while nobody looked
  are coalesced by the kernel and carry the newest stamp only.
- ``READ``: the time a read took the bytes: the arrival when the reader was waiting for
  them, an upper bound otherwise.  Also the time a peek found bytes without a stamp: the
  kernel turns receive stamps on for the whole system only some time after the first
  socket asks (a deferred work item), and a segment that lands before then has none.

The reads themselves (:meth:`Arrivals.read`; the scan, :mod:`._event_ends`) say where each
event ends on the wire: the block's event separators (SSE's blank lines, NDJSON's line ends
where the response is one JSON object a line, or the end of each AWS event stream message,
by its length prefix), mapped from its plaintext to the TCP bytes it consumed (the same
bytes without TLS; in proportion with it, less what the reader's layers took off the socket
and hold undecrypted), and an owner's classifier says which events carry output.

A third kind of knowledge bounds them from below: the watcher's ticks (``quiet``), moments
at which it looked and nothing new had arrived.  While the reader is away and the GIL comes
free now and then (a client parsing in Python, a busy event loop), a tick every few
milliseconds shows that what came later arrived after it, however long the watcher then
waited for the GIL to stamp it.

An event's arrival is then the first observation that covers its last byte: exact
(``measured``) when it was the newest byte of a kernel observation; when several events
were coalesced into one observation, the earlier ones are dated back from the newest at the
pace the exact observations of the same connection show (``estimated``), never before the
previous observation or the last quiet tick before it; a read's time is ``read``.  Each
comes with its bound: how far from it the bytes may have arrived (earlier, or, for a date
guessed without this stream's own pace, later too).
"""

from __future__ import annotations

import fcntl
import termios
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from statistics import median
from time import perf_counter
from typing import Any

from ... import semconv
from ._event_ends import EventEnds
from ._kernel import (
    enable_timestamps,
    family_of,
    has_queued,
    last_transmitted,
    peek_queued,
    poller,
    tcp_bytes_acked,
    tcp_bytes_received,
    transmit_stamps,
    unacknowledged_bytes,
)

KERNEL = 0
READ = 1
# No transmit stamp's key (an unsigned 32-bit offset) is ever this.
_NO_KEY = -1

#: Where an arrival time came from.
MEASURED = semconv.ARRIVAL_MEASURED
ESTIMATED = semconv.ARRIVAL_ESTIMATED
AT_READ = semconv.ARRIVAL_READ

_INT = b"\0\0\0\0"
# Events per window whose mean interval is one sample of the pace.
_PACE_WINDOW = 8
# Bytes read and not scanned yet that are kept (beyond, events are not found: a stream this
# long is past its first token, and its last is found only while the tap stays).
_PENDING_CAP = 8 << 20
#: A request write longer than this goes out in two: all but its last this many bytes with
#: the transmit stamps off, then the rest with them on.  A stamp of bytes that left while
#: the same write still waits for room in the send buffer makes the socket poll as in error,
#: and the writer (CPython's socket calls, an event loop) spins on it until room comes; a
#: write this short is taken whole once there is any room, so none of its stamps lands
#: while it waits.  Its last byte, the one dated, is stamped either way.
STAMPED_TAIL = 4096

def _queued(fd: int) -> int:
    """Bytes waiting in ``fd``'s receive queue (``FIONREAD``)."""
    try:
        return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, _INT), "little")
    except OSError:
        return 0


# Tries at a received count and a read of the queue (its length, or a peek at its newest
# stamp) from one instant, before the last pair is taken (or, for a peek, kept as a bound).
_SAME_INSTANT_TRIES = 4


def _received_and_taken(sock: Any, fd: int) -> tuple[int, int] | None:
    """``sock``'s received byte count and the bytes taken off it (the count less the queue's
    length) as of one instant, or None where the count is not kept.  Two system calls: a
    segment landing between them is in the queue and not in the count, and the bytes taken
    would come out short by its length.  The count is read again after the queue; a pair
    whose count did not move is from one instant."""
    received = tcp_bytes_received(sock)
    for _ in range(_SAME_INSTANT_TRIES):
        if received is None:
            return None
        queued = _queued(fd)
        again = tcp_bytes_received(sock)
        if again == received:
            break
        received = again
    return (received, received - queued) if received is not None else None


def _stamping_from(sock: Any) -> tuple[int | None, bool]:
    """Turn ``sock``'s transmit stamps on: the bytes acknowledged when they started (their
    keys count from the first byte not acknowledged then; None where the count is not
    kept) and whether they did.  An acknowledgement landing between the count and the
    start (the head of a long request, written with the stamps off, is still going out)
    would make every key lower than the counts say: the stamps are turned off and on
    again until the count read on both sides of the start did not move."""
    acked = tcp_bytes_acked(sock)
    if not transmit_stamps(sock, True):
        return acked, False
    for _ in range(_SAME_INSTANT_TRIES):
        again = tcp_bytes_acked(sock)
        if again == acked:
            return acked, True
        acked = again
        transmit_stamps(sock, False)  # (the key's base is taken anew when they come back on)
        if not transmit_stamps(sock, True):
            return None, False
    return None, True


class Arrival:
    """One arrival time: ``t`` (``perf_counter`` seconds), its ``source`` and its ``bound``
    (the bytes arrived no earlier than ``t - bound``)."""

    __slots__ = ("bound", "source", "t")

    def __init__(self, t: float, source: str, bound: float) -> None:
        self.t = t
        self.source = source
        self.bound = bound

    def __repr__(self) -> str:
        return f"Arrival({self.t:.6f}, {self.source}, ±{self.bound:.6f})"


class Arrivals(EventEnds):
    """Observations of one connection's receive queue, and where its events end.

    Made for a connection whose owner wants arrival times; ``read`` is called by the tap
    around the client's reads, ``observe`` by the tap before a read and by the watcher.
    """

    __slots__ = ("__weakref__", "_acked_at_start", "_key", "_last_key", "_quiet_at", "_received",
                 "awaiting", "consumed", "cpu_written", "cum",
                 "family", "fd", "kind", "last_out", "looks", "plain", "quiet", "reads", "sock",
                 "stamping", "t", "t_sent", "t_start", "t_written", "ticked", "tls", "watched",
                 "written_since_take")

    def __init__(self, sock: Any) -> None:
        self.t_start = perf_counter()  # nothing read from now on arrived before it
        self.sock = sock
        self.fd = sock.fileno()
        self.family = family_of(sock)
        self.looks = poller(self.fd)  # a look before each read of a queue that may be empty
        enable_timestamps(sock)
        self.cum: list[int] = []
        self.t: list[float] = []
        self.kind: list[int] = []
        # Per observation, the last quiet tick before it (nothing beyond the previous
        # observation had arrived then), or 0.0.
        self.quiet: list[float] = []
        counts = _received_and_taken(sock, self.fd)
        received = counts[0] if counts is not None else None
        self.consumed = counts[1] if counts is not None else 0
        self._received = received  # the last count of bytes received seen
        self._quiet_at: tuple[float, int] | None = None  # (tick, bytes received by then)
        self.plain = 0
        self._start_event_ends()
        self.reads = 0
        # Whether the bytes read are decrypted from the wire's (else they are the wire's,
        # and a read's wire offsets need no system call).
        self.tls = True
        self.watched = False
        # Whether the watcher's quiet ticks are wanted (a stream's first token awaited).
        self.ticked = False
        # When the request's last byte left (the kernel's transmit stamp), while a request
        # is being written on the connection.
        self.t_sent: float | None = None
        # When the writer's last write returned, and its thread's CPU clock then (the tap's
        # marks: the writer's own view of the request's end).
        self.t_written: float | None = None
        self.cpu_written = 0.0
        self.stamping = False
        # Bytes written with the stamps on since they were last taken (``wrote``).
        self.written_since_take = 0
        # The newest stamp's key (OPT_ID: its last byte's offset from the first byte not
        # acknowledged when stamping started, ``_acked_at_start`` bytes into the connection).
        self._key: int | None = None
        self._acked_at_start: int | None = None
        # The request's last byte's, once the response is awaited (``_NO_KEY`` till then, and
        # where the kernel's counts cannot be read: no stamp's key equals it).
        self._last_key = _NO_KEY
        # The response is awaited (the request written); ``last_out``: the newest stamp is
        # the request's last byte's.
        self.awaiting = False
        self.last_out = False

    # -- the request ---------------------------------------------------------------------------
    def sending(self) -> None:
        """A request is about to be written: stamp what leaves until the response comes."""
        if not self.stamping:
            self._acked_at_start, self.stamping = _stamping_from(self.sock)
            self._key, self._last_key = None, _NO_KEY
            self.awaiting = self.last_out = False

    def split_write(self, data: Any) -> tuple[Any, Any]:
        """A request write split for the transmit stamps: ``(head, rest)``, the head to
        write with them off (they are turned off here; None when the write goes whole) and
        the rest, for which the writer's :meth:`sending` turns them back on: all but the
        last ``STAMPED_TAIL`` bytes of a longer write are the head."""
        view = memoryview(data)
        cut = view.nbytes - STAMPED_TAIL
        if cut <= 0:
            return None, data
        self.stop_stamping()
        self.t_sent = None  # an earlier write's: the stamp wanted is this one's last byte
        return view[:cut], view[cut:]

    def wrote(self, size: int) -> None:
        """A writer on a blocking socket (one that waits on nothing but its own socket, not
        an event loop's selector) wrote ``size`` bytes with the stamps on.  Their stamps are
        taken (:meth:`sent`) once the bytes written since the last take reach
        ``STAMPED_TAIL``: a stamp left in the error queue makes the socket poll as in error,
        which only a write waiting for room in the send buffer would spin on, and fewer
        bytes than that cannot fill one (the default holds 16 KiB).  Below it the reader
        takes them before it waits (:meth:`done_sending`), the newest the same: a plain
        request's headers and body are two writes, and each take is three system calls."""
        self.written_since_take += size
        if self.written_since_take >= STAMPED_TAIL:
            self.sent()

    def sent(self) -> bool:
        """Collect the transmit stamps queued so far (the newest: the last byte out).
        Returns whether there was one.  Once the response is awaited and the newest is the
        request's last byte's (``last_out``), stamping stops."""
        if not self.stamping:
            return False
        self.written_since_take = 0
        # (``_take_stamps`` inline: this runs after every write of a request)
        got = last_transmitted(self.fd, self.family, self.looks)
        if got is not None:
            self.t_sent, self._key = got
        if self._key == self._last_key:
            self.last_out = True
            self.stop_stamping(taken=True)
        return got is not None

    def done_sending(self, waits: bool = False,
                     watch: Callable[[Arrivals], None] | None = None) -> None:
        """The response is awaited: the request is written.  Until its last byte's stamp
        comes (a slow uplink, or a queue below TCP, sends it after the writer returned),
        stamping goes on where something takes the stamps off the error queue as they land:
        the reader's own wait (``waits``) or the watcher (``watch`` starts it on an event
        loop's connection nobody watches yet); left there, a stamp makes the socket poll
        as in error.  Otherwise, and at the reader's next read (the response has begun),
        it stops."""
        if not self.stamping:
            return
        if self.awaiting:
            self.stop_stamping()
            return
        self.awaiting = True
        self._last_key = self._last_byte_key()
        self.sent()
        if self.stamping and not (waits or self.watched):
            if watch is not None:
                watch(self)
            if not self.watched:
                self.stop_stamping()

    def stop_stamping(self, taken: bool = False) -> None:
        """Stamping stops (the stamps queued taken off the error queue; ``taken``: they
        were, a moment ago)."""
        if self.stamping:
            if not taken:
                self._take_stamps()
            transmit_stamps(self.sock, False)
            if not self.last_out:  # (with the last byte's in hand, no stamp is to come)
                self._take_stamps()  # one that landed while stamping was turned off
            self.stamping = False
            if self._key == self._last_key:
                self.last_out = True

    def _take_stamps(self) -> bool:
        """The stamps queued now, taken off the error queue (the newest kept)."""
        self.written_since_take = 0
        got = last_transmitted(self.fd, self.family, self.looks)
        if got is None:
            return False
        self.t_sent, self._key = got
        return True

    def _last_byte_key(self) -> int:
        """The key the request's last byte's stamp will carry (the offset of the last byte
        written), from the kernel's counts read as of one instant; ``_NO_KEY`` where they
        cannot be read, or kept moving."""
        if self._acked_at_start is None:
            return _NO_KEY
        # Their sum is the bytes written, the same at any instant once the writer is done;
        # read apart, an acknowledgement between the two (a slow uplink acknowledges as it
        # goes, and a thread taking the GIL between the calls holds it for milliseconds)
        # counts its bytes twice: the key comes out too high, never matched, and the
        # upload was booked as prefill.  A pair is from one instant where the acknowledged
        # count read on both sides of the queue's did not move.
        acked = tcp_bytes_acked(self.sock)
        for _ in range(_SAME_INSTANT_TRIES):
            unacknowledged = unacknowledged_bytes(self.fd)
            again = tcp_bytes_acked(self.sock)
            if acked is None or unacknowledged is None or again is None:
                return _NO_KEY
            if again == acked:
                return (acked - self._acked_at_start + unacknowledged - 1) & 0xFFFFFFFF
            acked = again
        return _NO_KEY

    # -- observations -------------------------------------------------------------------
    def observe(self) -> int:
        """Look at the receive queue: an observation when bytes wait there.  Returns how
        many wait."""
        looks = self.looks
        if looks is not None and not has_queued(looks):
            self._received = tcp_bytes_received(self.sock)  # no news for the ticks
            return 0
        # The count, the peek, the count again: the peek's stamp is its newest byte's, and
        # it is filed under the count only where no segment landed in between (else the
        # next token's stamp for this one).  Between them the peek's system call lets the
        # GIL go, and a thread busy in Python (the client parsing a first chunk) may take
        # the core as well as the GIL for milliseconds: CI dated first tokens a token
        # late, 10 ms at 100 tokens/s.  The look is made before all three: it lets the GIL
        # go too, for the switch interval (5 ms), and says nothing of when the bytes came.
        received = tcp_bytes_received(self.sock)
        got = peek_queued(self.fd, self.family)
        kind = KERNEL
        tries = _SAME_INSTANT_TRIES
        while got is not None and received is not None:
            again = tcp_bytes_received(self.sock)
            if again == received:
                break
            tries -= 1
            if not tries:
                # Still landing: the stamp is some later byte's, and the bytes counted
                # before the peek were there by then (a bound, not their arrival).
                kind = READ
                break
            received = again
            got = peek_queued(self.fd, self.family)
        if got is None:
            self._received = received  # all taken by the reader: no news for the ticks
            return 0
        size, t = got
        if received is not None:
            if t is not None:
                self._add(received, t, kind)
            else:
                # Queued with no stamp (they landed before the kernel turned stamps on):
                # they were there by now.  Left out, a watcher woken once for them (edge-
                # triggered) would never see them again.
                self._add(received, perf_counter(), READ)
        self._received = received
        return size

    def tick(self) -> None:
        """The watcher looked without an arrival to wake it: a quiet moment when nothing new
        had come, else an observation."""
        t = perf_counter()  # before the count: bytes counted later came after it, or at it
        received = tcp_bytes_received(self.sock)
        if received is None:
            return
        if received == self._received:
            self._quiet_at = (t, received)
        else:
            self.observe()

    def _add(self, cum: int, t: float, kind: int) -> None:
        cums = self.cum
        if cums and cum <= cums[-1]:
            return  # nothing newer than what is known
        quiet = self._quiet_at
        # A tick bounds this observation's bytes only if nothing it counted is uncovered:
        # bytes received but not in an observation yet may have come before the tick.
        covered = cums[-1] if cums else self.consumed
        cums.append(cum)
        self.t.append(t)
        self.kind.append(kind)
        self.quiet.append(quiet[0] if quiet is not None and quiet[1] <= covered else 0.0)

    # -- reads ---------------------------------------------------------------------------
    def taken(self, t: float) -> None:
        """An event loop took bytes off the socket at ``t`` (before the client reads them
        from its buffer): they had arrived by then."""
        counts = _received_and_taken(self.sock, self.fd)
        if counts is not None:
            self._received, taken = counts
            self._add(taken, t, READ)

    def read(self, data: bytes, t: float, above: int = 0) -> None:
        """The client took ``data`` (plaintext) at ``t``: the bytes it consumed had arrived
        by then, and its events end where the block's separators map to on the wire.
        ``above``: bytes taken off the socket that still wait above it, not decrypted yet
        (an event loop's TLS)."""
        c0 = self.consumed
        counts = _received_and_taken(self.sock, self.fd) if self.tls else None
        received = counts[0] if counts is not None else None
        c1 = counts[1] - above if counts is not None else c0 + len(data)
        if c1 < c0:
            c1 = c0
        self._add(c1, t, READ)
        if received is not None:
            self._received = received
        self.consumed = c1
        if data:
            self.plain += len(data)
            blocks = self._blocks
            if c1 == c0 and blocks and blocks[-1][1] == c0:
                # No wire bytes of its own: decrypted from what an earlier read took off the
                # socket (Python 3.10's asyncio TLS hands each record over in its own call),
                # so the two share that read's wire bytes in proportion.
                b0, b1, held = blocks.pop()
                blocks.append((b0, b1, held + data))
                self._pending += len(data)
            elif self._pending < _PENDING_CAP:
                blocks.append((c0, c1, data))
                self._pending += len(data)
        self.reads += 1

    # -- dating ------------------------------------------------------------------------------
    def pace(self, after: int = -1) -> float | None:
        """The time between events where the kernel stamped them one by one (the server's
        pace), counting only events that end after wire offset ``after`` (the ones before a
        stream's first token come at once, then wait for the prefill).

        The median, over windows of :data:`_PACE_WINDOW` events, of each window's mean: the
        median keeps out a stall and a burst (the closing events, sent at once), the means
        smooth a server's skewed intervals (an event loop's timer gives 9.1, 10.4 and 10.5 ms
        for 10 ms, or a late write and its catch-up): dating forty coalesced events back at
        the median interval's 10.3 ms put the first of them 12 ms early."""
        exact: list[tuple[int, float]] = []  # (event index, its arrival), of those scanned
        ends, cums = self.ends, self.cum
        for j, cum in enumerate(cums):
            if self.kind[j] != KERNEL or cum <= after:
                continue
            low = cums[j - 1] if j else -1
            last = bisect_right(ends, cum)
            if last - bisect_right(ends, low) == 1:
                exact.append((last - 1, self.t[j]))
        if len(exact) < 2:
            return None
        paces: list[float] = []
        k = 0
        for i1, t1 in exact:
            while k < len(exact) and exact[k][0] - i1 < _PACE_WINDOW:
                k += 1
            if k == len(exact):
                break
            i2, t2 = exact[k]
            if t2 > t1:
                paces.append((t2 - t1) / (i2 - i1))
        if not paces:
            # Fewer events than one window: the mean over all of them.
            (i1, t1), (i2, t2) = exact[0], exact[-1]
            return (t2 - t1) / (i2 - i1) if i2 > i1 and t2 > t1 else None
        return median(paces)

    def arrival(self, offset: int, pace: float | None = None, *,
                paced: bool = True, waited: bool = False,
                pace_seen: bool = True) -> Arrival | None:
        """When the byte at wire ``offset`` (an event's last byte) arrived, or None when no
        observation covers it.

        ``paced``: whether the events after it came at the server's pace (output tokens
        after an output token), or right after it (the closing events after the last
        token): only paced ones date a coalesced event back.  ``waited``: the event ends a
        wait of unknown length (a stream's first token, after its prefill); with no pace
        known it is then dated at the middle of its window, the least wrong guess wherever
        in the window the wait ended, where an even share would put a long prefill's end at
        the window's start.  ``pace_seen``: ``pace`` is this stream's own, seen on the wire;
        otherwise (another stream's, a learned rate, none) the date is a guess anywhere in
        its window, and its bound covers the window on both sides."""
        cums = self.cum
        j = bisect_left(cums, offset)
        if j == len(cums):
            return None
        t_obs = self.t[j]
        low = max(self.t[j - 1] if j else self.t_start, min(self.quiet[j], t_obs))
        ends = self.ends
        later = 0
        counted = None
        if ends and ends[-1] < cums[j]:
            # The events the observation's bytes hold after this one are counted, not
            # guessed: a scan that stopped at the first token left them (one block, read).
            # SSE's are counted in C (a stream read late is one block: its events one by one
            # in Python cost more than the SDK's own parse of them), others scanned.
            counted = self._count_unscanned(cums[j])
            if counted is None:
                self.scan(through=cums[j])
            else:
                later = counted
        later += bisect_right(ends, cums[j]) - bisect_right(ends, offset)
        if counted is None and ends and ends[-1] < cums[j] and len(ends) > 1:
            # Events not scanned (nobody needed them): as many as the bytes hold at the
            # scanned events' mean size.
            mean = (ends[-1] - ends[0]) / (len(ends) - 1)
            later += round((cums[j] - max(ends[-1], offset)) / mean) if mean > 0 else 0
        if self.kind[j] == KERNEL and later == 0:
            return Arrival(t_obs, MEASURED, 0.0)
        t = t_obs
        if later and paced:
            if pace is None:
                pace = self.pace()
            if pace is not None:
                t = t_obs - later * pace
            elif waited:
                t = low + (t_obs - low) / 2
            else:
                # No pace known: the coalesced events spread evenly over their window.
                inside = later + bisect_right(ends, offset) - bisect_right(
                    ends, cums[j - 1] if j else -1)
                t = low + (t_obs - low) * (inside - later) / inside
        t = max(t, low)
        source = AT_READ if self.kind[j] == READ and not (later and paced) else ESTIMATED
        bound = t - low
        if later and paced and not pace_seen:
            # Nothing on this stream says where in the window its bytes came (a pause as
            # long as the stream coalesced all of it): the window's both ends bound it.
            bound = max(bound, t_obs - t)
        return Arrival(t, source, max(bound, 0.0))

    def last_byte(self) -> Arrival | None:
        """When the last byte read so far arrived."""
        return self.arrival(self.consumed) if self.reads else None
