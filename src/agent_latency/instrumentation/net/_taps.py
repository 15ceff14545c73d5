"""Taps on one connection's reads while its arrival times are wanted: the client library's own
read, replaced on that one stream object (never on the class), and put back after.

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
from collections.abc import Callable
from time import perf_counter
from typing import Any

from ..._log import internal_error
from ._arrivals import Arrivals

Untap = Callable[[], None]


def _wait_readable(fd: int, timeout: float | None) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    try:
        return bool(poller.poll(None if timeout is None else max(timeout, 0.0) * 1000.0))
    except InterruptedError:
        return False


def _ssl_pending(stream: Any) -> bool:
    sock = getattr(stream, "_sock", None)
    pending = getattr(sock, "pending", None)
    try:
        return bool(pending()) if pending is not None else False
    except (OSError, ValueError):
        return False


def _sync_tap(stream: Any, arrivals: Arrivals) -> Untap:
    original = type(stream).read

    def read(max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            queued = arrivals.observe() or _ssl_pending(stream)
            if not queued:
                started = perf_counter()
                if _wait_readable(arrivals.fd, timeout):
                    arrivals.observe()
                if timeout is not None:
                    # What the wait used comes off the read's own timeout (at least 1 ms, so
                    # a timeout is still raised by the library, not by us).
                    timeout = max(timeout - (perf_counter() - started), 0.001)
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        data = original(stream, max_bytes, timeout)
        try:
            arrivals.read(data, perf_counter())
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        return data

    stream.read = read
    return lambda: _untap(stream)


def _async_tap(stream: Any, arrivals: Arrivals) -> Untap:
    original = type(stream).read

    async def read(max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            arrivals.observe()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        data = await original(stream, max_bytes, timeout)
        try:
            arrivals.read(data, perf_counter())
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        return data

    stream.read = read
    return lambda: _untap(stream)


def _untap(stream: Any) -> None:
    try:
        stream.__dict__.pop("read", None)
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
    if "read" in getattr(stream, "__dict__", {}):
        return None
    if inspect.iscoroutinefunction(cls.read):
        return _async_tap(stream, arrivals)
    return _sync_tap(stream, arrivals)
