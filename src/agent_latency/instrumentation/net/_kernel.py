"""What the Linux kernel knows of one TCP connection (``TCP_INFO``); None elsewhere."""

from __future__ import annotations

import socket
import struct
import sys
from typing import Any

_TCP_INFO = getattr(socket, "TCP_INFO", None) if sys.platform.startswith("linux") else None
# struct tcp_info offsets (linux/tcp.h): tcpi_last_data_recv (u32, ms), tcpi_rtt (u32, µs),
# tcpi_bytes_acked and tcpi_bytes_received (u64 each).
_LAST_DATA_RECV = 52
_RTT = 68
_BYTES = 120
_BYTES_END = 136


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


def socket_of(stream: Any) -> Any:
    """The socket under a network stream (httpcore's, anyio's, an asyncio transport), or
    None."""
    try:
        return stream.get_extra_info("socket")
    except Exception:  # noqa: BLE001 - any stream type may lack it
        return None
