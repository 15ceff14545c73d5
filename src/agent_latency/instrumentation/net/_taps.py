"""Taps on one connection's reads while its arrival times are wanted: the client library's own
read, replaced on that one stream object (never on the class), and put back after.

- The request's writes (``write``): the kernel stamps what it transmits until the response
  is read, so the request's last byte is dated when it left, not when the writing thread got
  the GIL back.
- httpcore / httpcore2 sync streams (``SyncStream.read``: the plain or TLS socket's
  ``recv``): before reading, the receive queue is looked at; when nothing waits, the tap
  waits for the socket itself (``poll``, without the GIL) and looks again as soon as bytes
  come, so the kernel's stamp of the first segment is kept even when another thread holds
  the GIL when it lands.
- httpcore / httpcore2 async streams (anyio): the queue is looked at before each read;
  anyio pauses the transport between reads, so bytes that come while the task is busy wait
  in the kernel, where the watcher stamps them.

A stream type we do not know is not tapped (its owner keeps the hand-over times).
"""

from __future__ import annotations

import inspect
import select
import ssl
from collections.abc import Callable
from time import perf_counter
from typing import Any

from ..._log import internal_error
from ._arrivals import Arrivals

Untap = Callable[[], None]


def _wait_readable(arrivals: Arrivals, timeout: float | None) -> bool:
    """Wait (without the GIL) until bytes are queued on the connection; transmit stamps
    landing in the error queue meanwhile are collected, not taken for bytes."""
    poller = select.poll()
    poller.register(arrivals.fd, select.POLLIN)
    deadline = None if timeout is None else perf_counter() + max(timeout, 0.0)
    while True:
        left = None if deadline is None else max(deadline - perf_counter(), 0.0) * 1000.0
        try:
            ready = poller.poll(left)
        except InterruptedError:
            continue
        if not ready:
            return False
        if ready[0][1] & select.POLLIN:
            return True
        arrivals.sent()  # POLLERR: a transmit stamp, not data
        if not arrivals.stamping:
            return True  # a real error: the library's read reports it


def _ssl_pending(stream: Any) -> bool:
    sock = getattr(stream, "_sock", None)
    pending = getattr(sock, "pending", None)
    try:
        return bool(pending()) if pending is not None else False
    except (OSError, ValueError):
        return False


def _sync_tap(stream: Any, arrivals: Arrivals) -> Untap:
    cls = type(stream)
    original_read, original_write = cls.read, cls.write

    def write(buffer: bytes, timeout: float | None = None) -> None:
        try:
            arrivals.sending()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        original_write(stream, buffer, timeout)
        try:
            arrivals.sent()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")

    def read(max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            arrivals.done_sending()
            queued = arrivals.observe() or _ssl_pending(stream)
            if not queued:
                started = perf_counter()
                if _wait_readable(arrivals, timeout):
                    arrivals.observe()
                if timeout is not None:
                    # What the wait used comes off the read's own timeout (at least 1 ms, so
                    # a timeout is still raised by the library, not by us).
                    timeout = max(timeout - (perf_counter() - started), 0.001)
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        data = original_read(stream, max_bytes, timeout)
        try:
            arrivals.read(data, perf_counter())
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        return data

    stream.read = read
    stream.write = write
    return lambda: _untap(stream, arrivals)


def _loop_protocol(stream: Any) -> Any:
    """anyio's asyncio protocol under httpcore's async stream (plain, or under its TLS
    stream), whose ``data_received`` the event loop calls as it takes bytes off the socket."""
    inner = getattr(stream, "_stream", None)
    inner = getattr(inner, "transport_stream", inner)
    protocol = getattr(inner, "_protocol", None)
    return protocol if hasattr(protocol, "data_received") else None


def _loop_tap(protocol: Any, arrivals: Arrivals) -> None:
    original = type(protocol).data_received

    def data_received(data: bytes) -> None:
        try:
            arrivals.taken(perf_counter())
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        original(protocol, data)

    protocol.data_received = data_received


def _async_tap(stream: Any, arrivals: Arrivals) -> Untap:
    cls = type(stream)
    original_read, original_write = cls.read, cls.write
    # The loop takes the bytes off the socket before the task reads them: that is when they
    # had arrived by (when the loop was idle, the arrival; the watcher stamps the others).
    protocol = _loop_protocol(stream)
    if protocol is not None and "data_received" not in getattr(protocol, "__dict__", {}):
        _loop_tap(protocol, arrivals)
    else:
        protocol = None

    async def write(buffer: bytes, timeout: float | None = None) -> None:
        try:
            arrivals.sending()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        await original_write(stream, buffer, timeout)
        try:
            arrivals.sent()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")

    async def read(max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            arrivals.done_sending()
            arrivals.observe()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        data = await original_read(stream, max_bytes, timeout)
        try:
            arrivals.read(data, perf_counter())
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        return data

    stream.read = read
    stream.write = write
    return lambda: _untap(stream, arrivals, protocol)


def _untap(stream: Any, arrivals: Arrivals, protocol: Any = None) -> None:
    try:
        arrivals.done_sending()
    except Exception:  # noqa: BLE001
        internal_error("net.tap")
    for obj, names in ((stream, ("read", "write")), (protocol, ("data_received",))):
        if obj is None:
            continue
        try:
            for name in names:
                obj.__dict__.pop(name, None)
        except AttributeError:
            pass


_HTTPCORE_STREAMS = frozenset({"SyncStream", "AnyIOStream"})


def tap(stream: Any, arrivals: Arrivals) -> Untap | None:
    """Tap ``stream``'s reads into ``arrivals``; returns how to undo it, or None when the
    stream's type is not one we know (or it is tapped already)."""
    cls = type(stream)
    module = getattr(cls, "__module__", "")
    if cls.__name__ not in _HTTPCORE_STREAMS or not module.startswith(("httpcore", "httpcore2")):
        return None
    if "read" in getattr(stream, "__dict__", {}) or not hasattr(cls, "write"):
        return None
    if inspect.iscoroutinefunction(cls.read):
        inner = getattr(stream, "_stream", None)
        arrivals.tls = hasattr(inner, "transport_stream")  # anyio's TLS stream
        return _async_tap(stream, arrivals)
    arrivals.tls = isinstance(getattr(stream, "_sock", None), ssl.SSLSocket) or not hasattr(
        stream, "_sock")
    return _sync_tap(stream, arrivals)
