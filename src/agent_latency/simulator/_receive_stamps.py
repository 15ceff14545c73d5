"""When a request's bytes reached the server: the kernel's receive stamps of what it reads.

asyncio's transports read with ``recv``, which drops the stamp the kernel kept
(``SO_TIMESTAMPNS``); the transport's socket is put behind one whose ``recv`` is a
``recvmsg`` that keeps it.  Where that cannot be done (no such option, a transport of
another kind), a read is dated when it was made: late by however long the server took to
get to it.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from typing import Any

from .._realtime import realtime_offset

# SO_TIMESTAMPNS (asm-generic/socket.h): Linux only.
_SO_TIMESTAMPNS = 35 if sys.platform.startswith("linux") else None
_TIMESPEC = struct.Struct("=qq")
_CMSG_SPACE = 64


class StampedSocket:
    """A socket whose ``recv`` keeps the kernel's receive stamp of the newest byte taken
    (``arrived``, ``perf_counter`` seconds); everything else is the socket's own."""

    __slots__ = ("_offset", "_sock", "arrived")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._offset = realtime_offset()
        self.arrived: float | None = None

    def recv(self, size: int, flags: int = 0) -> bytes:
        data, ancillary, _flags, _address = self._sock.recvmsg(size, _CMSG_SPACE, flags)
        stamp = None
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(raw) >= 16:
                seconds, nanoseconds = _TIMESPEC.unpack_from(raw)
                stamp = seconds + nanoseconds / 1e9 - self._offset
        self.arrived = stamp if stamp is not None else time.perf_counter()
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def stamp_reads(transport: Any) -> StampedSocket | None:
    """Put ``transport``'s socket behind a :class:`StampedSocket` (asyncio's selector
    transports keep it as ``_sock`` and read it with ``recv``); None where it cannot be."""
    sock = getattr(transport, "_sock", None)
    if _SO_TIMESTAMPNS is None or type(sock) is not socket.socket:
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return None
    stamped = StampedSocket(sock)
    transport._sock = stamped
    return stamped
