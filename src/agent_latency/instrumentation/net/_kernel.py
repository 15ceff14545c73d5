"""What the Linux kernel knows of one TCP connection (``TCP_INFO``); None elsewhere."""

from __future__ import annotations

import _socket
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..._realtime import realtime_offset

try:
    import fcntl
except ImportError:  # not on Windows
    fcntl = None  # type: ignore[assignment]

_TCP_INFO = getattr(socket, "TCP_INFO", None) if sys.platform.startswith("linux") else None
# struct tcp_info offsets (linux/tcp.h): tcpi_last_data_sent and tcpi_last_data_recv (u32
# each, ms, counted in the kernel's jiffies: 1-10 ms apart), tcpi_rtt (u32, µs),
# tcpi_bytes_acked and tcpi_bytes_received (u64 each), tcpi_data_segs_out (u32, Linux 4.6+).
_LAST_DATA_SENT = 44
_LAST_DATA_RECV = 52
_RTT = 68
_BYTES = 120
_BYTES_END = 136
_DATA_SEGS_OUT = 156


def tcp_info_rtt(sock: Any) -> float | None:
    """The kernel's smoothed RTT of ``sock`` in seconds (``tcpi_rtt``), or None."""
    if _TCP_INFO is None or sock is None:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 104)
    except (OSError, AttributeError, TypeError, ValueError):
        return None
    if len(raw) < _RTT + 4:
        return None
    rtt_us = struct.unpack_from("=I", raw, _RTT)[0]
    return rtt_us / 1e6 if rtt_us else None


def tcp_info_close(sock: Any) -> tuple[float | None, int | None, int | None]:
    """``(seconds since the last data received, bytes acked, bytes received)`` of ``sock``
    from one ``TCP_INFO`` read, each None when unknown."""
    if _TCP_INFO is None or sock is None:
        return None, None, None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _BYTES_END)
    except (OSError, AttributeError, TypeError, ValueError):
        return None, None, None
    since = (struct.unpack_from("=I", raw, _LAST_DATA_RECV)[0] / 1e3
             if len(raw) >= _LAST_DATA_RECV + 4 else None)
    if len(raw) < _BYTES_END:
        return since, None, None
    acked, received = struct.unpack_from("=QQ", raw, _BYTES)
    return since, int(acked), int(received)


def _kernel_tick() -> float:
    # The coarse monotonic clock ticks with the kernel's jiffies (Linux's
    # CLOCK_MONOTONIC_COARSE, 6): 4 ms where HZ is 250, 1 ms at 1000, 10 ms at 100.
    try:
        return time.clock_getres(6) if _TCP_INFO is not None else 0.01
    except (OSError, AttributeError, ValueError):
        return 0.01


#: The kernel's clock tick, in which ``TCP_INFO``'s times since an event are counted.
KERNEL_TICK = _kernel_tick()


def tcp_info_last_data(sock: Any) -> tuple[float, float] | None:
    """``(seconds since the last data sent, seconds since the last data received)`` of
    ``sock``, from one ``TCP_INFO`` read, or None when unknown.  Both are counted in the
    kernel's ticks (:data:`KERNEL_TICK`), so each is that coarse."""
    last = _last_data(sock)
    return None if last is None else (last[0] / 1e3, last[1] / 1e3)


def socket_of(stream: Any) -> Any:
    """The socket under a network stream (httpcore's, anyio's, an asyncio transport), or
    None."""
    try:
        return stream.get_extra_info("socket")
    except Exception:  # noqa: BLE001 - any stream type may lack it
        return None


# -- arrival times: the kernel's receive timestamps ------------------------------------------
# SO_TIMESTAMPNS (Linux; Python < 3.12 lacks the name): each received segment is stamped
# with the CLOCK_REALTIME time it reached this host, given to ``recvmsg`` as a control message.
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35) if _TCP_INFO is not None else None
_CMSG_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_PEEK = getattr(socket, "MSG_PEEK", 0) | getattr(socket, "MSG_DONTWAIT", 0)
# The most a peek copies (into a buffer of the thread's own, never allocated per peek): the
# newest segment's stamp comes with the last queued byte.
_PEEK_MAX = 1 << 18
_TIMESPEC = struct.Struct("=qq")
_SOL_SOCKET = int(socket.SOL_SOCKET)
_buffers = threading.local()


# How often the offset is read again: a clock step or an NTP slew moves it, and a step back
# (stamps converted early) cannot be seen in a stamp itself.  A read is a few microseconds.
RECHECK_S = 1.0


class Clock:
    """CLOCK_REALTIME nanoseconds to ``perf_counter`` seconds (CLOCK_MONOTONIC on Linux).

    The offset between the two clocks is read once and again every second
    (:data:`RECHECK_S`), and at once where a stamp converts to later than the moment it was
    read: the clock stepped forward.  The readers of the kernel's stamps convert inline
    (``checked``, ``offset``) and call :meth:`perf_checked` only for those two cases: a
    method call per stamp was a tenth of a look's cost.
    """

    __slots__ = ("checked", "offset")

    def __init__(self) -> None:
        self.checked = -1e18
        self.offset = 0.0

    def refresh(self, now: float) -> None:
        """Read the offset again (``now``: ``perf_counter()``)."""
        self.offset = realtime_offset()
        self.checked = now

    def perf_checked(self, realtime_s: float, now: float) -> float:
        """``realtime_s`` on the ``perf_counter`` clock, the offset read again first; never
        later than ``now`` (the ``perf_counter`` read after the stamp was taken)."""
        self.refresh(now)
        return min(realtime_s - self.offset, now)


CLOCK = Clock()


def enable_timestamps(sock: Any) -> bool:
    """Ask the kernel to stamp every segment ``sock`` receives; False where it cannot."""
    if _SO_TIMESTAMPNS is None or sock is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except (OSError, AttributeError, TypeError, ValueError):
        return False
    return True


# The C type's getter: a plain int, where ``socket.socket.family`` (a Python property)
# builds an ``AddressFamily`` enum member on every read.
_C_FAMILY = _socket.socket.family


def family_of(sock: Any) -> int:
    """``sock.family`` as an int (``AF_INET`` for an object without one)."""
    try:
        return _C_FAMILY.__get__(sock)
    except TypeError:  # not a C socket (gevent's wraps one)
        return getattr(sock, "family", socket.AF_INET)


# A socket object over the program's fd for one look is made of the C type, never a
# monkey-patched ``socket.socket`` (gevent's waits on its hub for a would-block
# ``MSG_DONTWAIT`` read, and an empty error queue would block the greenlet for ever).
_C_SOCKET = _socket.socket
_STREAM = int(socket.SOCK_STREAM)


# ``select.poll`` as the interpreter has it (gevent's monkey-patched one, a class of its own,
# waits on its hub even for a look that must not wait: then none is used).
_C_POLL: Any = select.poll if type(getattr(select, "poll", None)) is type(len) else None
_POLLIN = select.POLLIN if _C_POLL is not None else 0
_POLLERR = select.POLLERR if _C_POLL is not None else 0


def poller(fd: int) -> Any:
    """A poll object on ``fd`` (received bytes, the error queue) for looks before the reads
    below, or None where there is none: a non-blocking read of an empty queue raises, and
    the error built for it costs ~16,000 instructions (callgrind), a look ~1,000."""
    if _C_POLL is None:
        return None
    try:
        looks = _C_POLL()
        looks.register(fd, _POLLIN | _POLLERR)
    except (OSError, ValueError, TypeError):
        return None
    return looks


# What a look that failed answers: go ahead and read.  (RuntimeError: another thread's look
# on it is under way, the watcher's and the reader's: the read goes ahead, as without one;
# an error, the read says what.)
_GO_AHEAD = [(0, -1)]


def has_queued(looks: Any) -> bool:
    """Whether :func:`poller`'s ``looks`` finds received bytes waiting (or cannot tell: a
    failed look says go ahead and read)."""
    try:
        ready = looks.poll(0)
    except (OSError, ValueError, RuntimeError):
        return True
    return bool(ready) and bool(ready[0][1] & _POLLIN)


def peek_queued(fd: int, family: int) -> tuple[int, float | None] | None:
    """``(bytes queued, when the newest of them arrived)`` on the TCP socket ``fd``, without
    taking them (``MSG_PEEK``), or None when nothing is queued (or it cannot be asked).

    Segments that arrived while nobody read are coalesced by the kernel, and the merged one
    carries the newest stamp: the time is the newest arrival's, not the oldest's.  No look
    here (:func:`has_queued`, before the caller's count of bytes received): a look lets the
    GIL go, and another thread's hold on it then keeps the peek milliseconds after the count.
    """
    # (the socket object inline: this runs before every read of a watched stream, where a
    # Python call is a fifth of its cost)
    try:
        view = _C_SOCKET(family, _STREAM, 0, fd)
    except OSError:
        return None
    buffer = getattr(_buffers, "peek", None)
    if buffer is None:
        buffer = _buffers.peek = bytearray(_PEEK_MAX)
    try:
        size, ancillary, _flags, _address = view.recvmsg_into([buffer], _CMSG_SPACE, _PEEK)
    except OSError:  # BlockingIOError included: nothing queued
        return None
    finally:
        view.detach()  # the fd stays the program's: never closed here
    if not size:
        return None
    for level, kind, raw in ancillary:
        if level == _SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(raw) >= 16:
            seconds, nanoseconds = _TIMESPEC.unpack_from(raw)
            clock = CLOCK  # (the conversion inline: see ``Clock``)
            now = time.perf_counter()
            stamp = seconds + nanoseconds / 1e9
            arrived = stamp - clock.offset
            if arrived > now or now - clock.checked > RECHECK_S:
                arrived = clock.perf_checked(stamp, now)
            return size, arrived
    return size, None


def _tcp_info_field(offset: int, layout: str, doc: str,
                    whole: bool = False) -> Callable[[Any], Any]:
    """A reader of one ``struct tcp_info`` field of a socket, or with ``whole`` of the
    fields ``layout`` spans from ``offset`` as a tuple (None where it cannot be read); one
    Python call a read, the hot path's (up to nine a plain call: the level and the option
    are the closure's, and an unpacked ``Q`` or ``I`` is an int already)."""
    field = struct.Struct(layout)
    end = offset + field.size
    unpack_from = field.unpack_from
    level = socket.IPPROTO_TCP
    option = _TCP_INFO

    def read(sock: Any) -> Any:
        if sock is None:
            return None
        try:
            raw = sock.getsockopt(level, option, end)
        except (OSError, AttributeError, TypeError, ValueError):
            return None
        if len(raw) < end:
            return None
        return unpack_from(raw, offset) if whole else unpack_from(raw, offset)[0]

    def unknown(sock: Any) -> None:
        return None

    chosen = read if option is not None else unknown
    chosen.__doc__ = doc
    return chosen


tcp_bytes_acked = _tcp_info_field(
    _BYTES, "=Q", "Bytes of ``sock``'s the peer has acknowledged since it connected "
    "(``tcpi_bytes_acked``), or None.")
tcp_bytes_received = _tcp_info_field(
    _BYTES + 8, "=Q", "Bytes ``sock`` has received since it connected "
    "(``tcpi_bytes_received``), or None.")
_last_data = _tcp_info_field(
    _LAST_DATA_SENT, "=I4xI", "``(tcpi_last_data_sent, tcpi_last_data_recv)`` of ``sock`` "
    "in ms, or None.", whole=True)
data_segs_out = _tcp_info_field(
    _DATA_SEGS_OUT, "=I", "Data segments ``sock`` has sent since it connected "
    "(``tcpi_data_segs_out``, Linux 4.6+), or None.")


# -- when the request's last byte left: the kernel's transmit stamps ----------------------------
# SO_TIMESTAMPING with software transmit stamps, one per send call (OPT_ID), no payload copied
# back (OPT_TSONLY); they wait in the socket's error queue until read.
_SO_TIMESTAMPING = 37 if _TCP_INFO is not None else None
_TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 7) | (1 << 11)
_MSG_ERRQUEUE = 0x2000
# A plain int: ``socket.MSG_DONTWAIT`` is an IntFlag, and ``|`` on it costs an enum call per
# read of the queue.
_DRAIN = _MSG_ERRQUEUE | int(getattr(socket, "MSG_DONTWAIT", 0))


def transmit_stamps(sock: Any, on: bool) -> bool:
    """Start (or stop) stamping what ``sock`` transmits; False where it cannot."""
    if _SO_TIMESTAMPING is None or sock is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPING, _TX_FLAGS if on else 0)
    except (OSError, AttributeError, TypeError, ValueError):
        return False
    return True


# SIOCOUTQ (linux/sockios.h, TIOCOUTQ): the bytes of a TCP socket's send queue, sent or not,
# that the peer has not acknowledged.
_SIOCOUTQ = 0x5411


def unacknowledged_bytes(fd: int) -> int | None:
    """Bytes written to ``fd`` that the peer has not acknowledged yet, or None."""
    if _SO_TIMESTAMPING is None or fcntl is None:
        return None
    try:
        return int.from_bytes(fcntl.ioctl(fd, _SIOCOUTQ, b"\0\0\0\0"), "little")
    except OSError:
        return None


# The extended error beside a transmit stamp (IP_RECVERR, IPV6_RECVERR): its ``ee_data``, the
# stamped send's key (OPT_ID): on TCP, the offset of its last byte from the first byte not
# acknowledged when stamping was turned on.
_RECVERR = ((socket.IPPROTO_IP, 11), (getattr(socket, "IPPROTO_IPV6", 41), 25))
_EE_DATA = struct.Struct("=I")
_EE_DATA_AT = 12


def last_transmitted(fd: int, family: int,
                     looks: Any = None) -> tuple[float, int | None] | None:
    """The newest transmit stamp waiting in ``fd``'s error queue (``perf_counter`` seconds)
    and its send's key (see ``_RECVERR``; None when absent), the queue emptied; None when
    there is none.  A stamp left there would make the socket poll as in error: every reader
    of a stamped socket drains it.  ``looks``: :func:`poller`'s for ``fd``, to read only
    while the queue holds something (else reads go on till one finds it empty)."""
    newest: int | None = None
    key: int | None = None
    view = None
    try:
        for _ in range(64):
            if looks is not None:  # (inline, as in peek_queued)
                try:
                    ready = looks.poll(0)
                except (OSError, ValueError, RuntimeError):
                    ready = _GO_AHEAD
                if not (ready and ready[0][1] & _POLLERR):
                    break
            if view is None:
                try:
                    view = _C_SOCKET(family, _STREAM, 0, fd)
                except OSError:
                    return None
            try:
                _data, ancillary, _flags, _address = view.recvmsg(
                    0, 512, _DRAIN)
            except OSError:
                break
            stamp, stamp_key = 0, None
            for level, kind, raw in ancillary:
                if level == _SOL_SOCKET and kind == _SO_TIMESTAMPING and len(raw) >= 16:
                    seconds, nanoseconds = _TIMESPEC.unpack_from(raw)
                    stamp = seconds * 1_000_000_000 + nanoseconds
                elif (level, kind) in _RECVERR and len(raw) >= _EE_DATA_AT + 4:
                    stamp_key = _EE_DATA.unpack_from(raw, _EE_DATA_AT)[0]
            if stamp and (newest is None or stamp >= newest):
                newest, key = stamp, stamp_key
    finally:
        if view is not None:
            view.detach()
    if newest is None:
        return None
    clock = CLOCK  # (the conversion inline: see ``Clock``)
    now = time.perf_counter()
    newest_s = newest / 1e9
    sent = newest_s - clock.offset
    if sent > now or now - clock.checked > RECHECK_S:
        sent = clock.perf_checked(newest_s, now)
    return sent, key
