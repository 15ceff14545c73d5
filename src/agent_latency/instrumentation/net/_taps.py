"""Taps on one connection's reads while its arrival times are wanted: the client library's own
read, replaced for that one stream object by a stand-in put where its owner keeps it (never
on the class, nor on the object: see :mod:`._methods`), and the object put back after.

- The request's writes (``write``): the kernel stamps what it transmits until the response
  is read, so the request's last byte is dated when it left, not when the writing thread got
  the GIL back.
- httpcore / httpcore2 sync streams (``SyncStream.read``: the plain or TLS socket's
  ``recv``; the stand-in in the HTTP/1.1 connection's ``_network_stream``): before reading,
  the receive queue is looked at; when nothing waits, the tap waits for the socket itself
  (``poll``, without the GIL) and looks again as soon as bytes come, so the kernel's stamp
  of the first segment is kept even when another thread holds the GIL when it lands.
- httpcore / httpcore2 async streams (anyio; the stream's stand-in as the sync one's, its
  protocol's in the transport, through ``set_protocol``): the queue is looked at before each
  read; anyio pauses the transport between reads, so bytes that come while the task is busy
  wait in the kernel, where the watcher stamps them.
- aiohttp's connection protocol (``ResponseHandler.data_received``; the stand-in in its
  transport, through ``set_protocol``): the event loop hands
  it the bytes (decrypted, under TLS) as soon as it takes them off the socket, before the
  response's reader sees them; bytes that come while the loop is busy wait in the kernel,
  where the watcher stamps them.
- urllib3 / ``http.client`` responses (the raw ``socket.SocketIO`` under the response's
  buffered file: the plain or TLS socket's ``recv_into``; its class swapped while tapped,
  since the buffered file's ``raw`` cannot be replaced): as httpcore's sync streams, the
  queue looked at before each read and the socket waited for without the GIL.

- An exchange the wire layer recognised on a socket or an event loop's transport
  (:mod:`._exchanges`): its reads are ours already; as urllib3's when on a socket, the bytes
  as the loop hands them over when on a transport.

A stream type we do not know is not tapped, nor an httpcore stream whose connection is not
known (HTTP/2's): its owner keeps the hand-over times.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Callable
from time import perf_counter, thread_time
from typing import Any

from ..._log import internal_error
from ._arrivals import STAMPED_TAIL, Arrivals
from ._exchange import Exchange
from ._methods import (
    Undo,
    is_replaced,
    is_stand_in,
    replace_methods,
    restore_methods,
    stand_in_attribute,
    stand_in_protocol,
)
from ._watcher import WATCHER

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
        if not arrivals.sent():  # POLLERR: a transmit stamp, not data
            return True  # a real error: the library's read reports it


def _unstamped_head(arrivals: Arrivals, buffer: Any) -> tuple[Any, Any]:
    """A request write split for the transmit stamps: the head to write with them off
    (None when it goes whole) and the rest (see ``STAMPED_TAIL``)."""
    try:
        return arrivals.split_write(buffer)
    except Exception:  # noqa: BLE001
        internal_error("net.tap")
        return None, buffer


def _ssl_pending(stream: Any) -> bool:
    return _decrypted_waiting(getattr(stream, "_sock", None))


def _decrypted_waiting(sock: Any) -> bool:
    """Whether OpenSSL holds decrypted bytes of ``sock`` not read yet (a read returns at
    once, whatever the kernel's queue)."""
    pending = getattr(sock, "pending", None)
    try:
        return bool(pending()) if pending is not None else False
    except (OSError, ValueError):
        return False


#: The attribute of an httpcore HTTP/1.1 connection that holds its stream.
_STREAM_ATTRIBUTE = "_network_stream"


def _sync_tap(stream: Any, arrivals: Arrivals, holder: Any) -> Untap | None:
    cls = type(stream)
    original_read, original_write = cls.read, cls.write

    def write(buffer: bytes, timeout: float | None = None) -> None:
        size = len(buffer)
        if not size:  # (h11's end of a sized body: nothing goes out, nothing to stamp)
            return original_write(stream, buffer, timeout)
        if size > STAMPED_TAIL:
            head, buffer = _unstamped_head(arrivals, buffer)
            if head is not None:
                original_write(stream, head, timeout)
        try:
            arrivals.sending()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        original_write(stream, buffer, timeout)
        arrivals.t_written, arrivals.cpu_written = perf_counter(), thread_time()
        try:
            arrivals.wrote(len(buffer))
        except Exception:  # noqa: BLE001
            internal_error("net.tap")

    def read(max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            arrivals.done_sending(waits=True)
            # (OpenSSL's buffer asked only under TLS: two calls a read less in plain HTTP)
            queued = arrivals.observe() or (arrivals.tls and _ssl_pending(stream))
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

    undo = stand_in_attribute(holder, _STREAM_ATTRIBUTE, {"read": read, "write": write})
    if undo is None:
        return None
    return lambda: _untap(arrivals, undo)


def _loop_transport(stream: Any) -> Any:
    """The asyncio transport under httpcore's async stream (anyio's socket stream's, plain or
    under its TLS stream), whose protocol's ``data_received`` the event loop calls as it
    takes bytes off the socket."""
    inner = getattr(stream, "_stream", None)
    inner = getattr(inner, "transport_stream", inner)
    return getattr(inner, "_transport", None)


def _loop_tap(transport: Any, arrivals: Arrivals) -> tuple[Any, Undo | None]:
    """The transport's protocol, and how to untap its ``data_received`` (None: not tapped)."""
    try:
        protocol = transport.get_protocol()
        original = type(protocol).data_received
    except AttributeError:
        return None, None

    def data_received(data: bytes) -> None:
        try:
            arrivals.taken(perf_counter())
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        original(protocol, data)

    return protocol, stand_in_protocol(transport, {"data_received": data_received})


def _async_tap(stream: Any, arrivals: Arrivals, holder: Any) -> Untap | None:
    cls = type(stream)
    original_read, original_write = cls.read, cls.write
    # The loop takes the bytes off the socket before the task reads them: that is when they
    # had arrived by (when the loop was idle, the arrival; the watcher stamps the others).
    transport = _loop_transport(stream)
    found, protocol_undo = (None, None) if transport is None else _loop_tap(transport, arrivals)
    # Under TLS the loop takes every queued byte at once and anyio's TLS stream hands them
    # over a record per read: the wire bytes a read consumed are the kernel's count less
    # what still waits above the socket (anyio's read queue, the ciphertext not decrypted).
    read_queue = getattr(found, "read_queue", None)
    tls_stream = getattr(stream, "_stream", None)
    read_bio = getattr(tls_stream, "_read_bio", None)
    waiting: Any = None
    if arrivals.tls and (read_queue is not None or read_bio is not None):
        def waiting() -> int:
            above = sum(map(len, read_queue)) if read_queue is not None else 0
            return above + (read_bio.pending if read_bio is not None else 0)

    async def write(buffer: bytes, timeout: float | None = None) -> None:
        size = len(buffer)
        if not size:  # (h11's end of a sized body: nothing goes out, nothing to stamp)
            return await original_write(stream, buffer, timeout)
        if size > STAMPED_TAIL:
            head, buffer = _unstamped_head(arrivals, buffer)
            if head is not None:
                await original_write(stream, head, timeout)
        try:
            arrivals.sending()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        await original_write(stream, buffer, timeout)
        arrivals.t_written, arrivals.cpu_written = perf_counter(), thread_time()
        try:
            arrivals.sent()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")

    async def read(max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            # Where the request's end is still in the send queue, the watcher takes its
            # stamp (the loop is not ours to wait on).
            arrivals.done_sending(watch=WATCHER.watch)
            arrivals.observe()
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        data = await original_read(stream, max_bytes, timeout)
        try:
            arrivals.read(data, perf_counter(), waiting() if waiting is not None else 0)
        except Exception:  # noqa: BLE001
            internal_error("net.tap")
        return data

    undo = stand_in_attribute(holder, _STREAM_ATTRIBUTE, {"read": read, "write": write})
    if undo is None:
        if protocol_undo is not None:
            protocol_undo()
        return None
    return lambda: _untap(arrivals, undo, protocol_undo)


def _protocol_tap(protocol: Any, arrivals: Arrivals) -> Untap | None:
    """aiohttp's ``ResponseHandler``: the loop calls ``data_received`` with the bytes it has
    just taken off the socket (the plaintext, under TLS)."""
    original = type(protocol).data_received

    def data_received(data: bytes) -> None:
        if data:  # (empty: aiohttp resuming its own decompression, nothing off the wire)
            try:
                arrivals.done_sending()  # the response is coming: the request is all out
                arrivals.read(data, perf_counter())
            except Exception:  # noqa: BLE001
                internal_error("net.tap")
        original(protocol, data)

    transport = getattr(protocol, "transport", None)
    undo = None if transport is None else stand_in_protocol(
        transport, {"data_received": data_received})
    if undo is None:
        return None
    return lambda: _untap(arrivals, undo)


#: What :func:`before_socket_read` returns when the socket's timeout was left alone.
UNSET: Any = object()


def before_socket_read(arrivals: Arrivals, sock: Any) -> Any:
    """Before a blocking read on ``sock`` (a plain or TLS socket): look at the receive queue
    and, when nothing waits, wait for the socket itself (without the GIL) and look again as
    soon as bytes come, so the kernel's stamp of the first segment is kept even when another
    thread holds the GIL when it lands.  Returns the socket's timeout to put back after the
    read (:data:`UNSET`: none): when the wait used it all, the read is given 1 ms, so the
    library raises its own timeout error now, not after a second full wait."""
    restore: Any = UNSET
    try:
        arrivals.done_sending(waits=True)
        if not (arrivals.observe() or _decrypted_waiting(sock)):
            timeout = sock.gettimeout()
            if timeout != 0.0:
                if _wait_readable(arrivals, timeout):
                    arrivals.observe()
                elif timeout is not None:
                    restore = timeout
                    sock.settimeout(0.001)
    except Exception:  # noqa: BLE001
        internal_error("net.tap")
    return restore


def _socketio_tap(raw: Any, arrivals: Arrivals) -> Untap | None:
    """``socket.SocketIO`` (the raw file ``http.client`` reads a response from)."""
    original = type(raw).readinto
    sock = raw._sock

    def readinto(buffer: Any) -> int | None:
        restore = before_socket_read(arrivals, sock)
        try:
            n = original(raw, buffer)
        finally:
            if restore is not UNSET:
                sock.settimeout(restore)
        if n:
            try:
                t = perf_counter()
                arrivals.read(bytes(memoryview(buffer)[:n]), t)
            except Exception:  # noqa: BLE001
                internal_error("net.tap")
        return n

    if not replace_methods(raw, {"readinto": readinto}):
        return None
    return lambda: _untap(arrivals, lambda: restore_methods(raw))


def _untap(arrivals: Arrivals, *undos: Undo | None) -> None:
    try:
        arrivals.stop_stamping()
    except Exception:  # noqa: BLE001
        internal_error("net.tap")
    for undo in undos:
        if undo is not None:
            try:
                undo()
            except Exception:  # noqa: BLE001
                internal_error("net.tap")


def _exchange_tap(exchange: Exchange, arrivals: Arrivals) -> Untap:
    """An exchange the wire layer recognised (:mod:`._exchanges`): its socket's reads (or its
    event loop protocol's ``data_received``) already pass through our hands, and feed the
    arrivals while they are set on it."""
    arrivals.tls = exchange.attempt.secure
    exchange.arrivals = arrivals

    def untap() -> None:
        exchange.arrivals = None
        _untap(arrivals)

    return untap


_HTTPCORE_STREAMS = frozenset({"SyncStream", "AnyIOStream"})


def tap(stream: Any, arrivals: Arrivals, holder: Any = None) -> Untap | None:
    """Tap ``stream``'s reads into ``arrivals``; returns how to undo it, or None when the
    stream's type is not one we know (or it is tapped already).  ``holder``: the httpcore
    connection whose ``_network_stream`` is ``stream`` (an httpcore stream is tapped there)."""
    cls = type(stream)
    if cls is Exchange:
        return _exchange_tap(stream, arrivals) if stream.arrivals is None else None
    module = getattr(cls, "__module__", "")
    if is_replaced(stream) or is_stand_in(stream):
        return None
    if cls.__name__ == "ResponseHandler" and module.startswith("aiohttp"):
        transport = getattr(stream, "transport", None)
        arrivals.tls = (transport is None
                        or transport.get_extra_info("sslcontext") is not None)
        return _protocol_tap(stream, arrivals)
    if cls is socket.SocketIO:
        if not hasattr(stream, "_sock"):
            return None
        arrivals.tls = isinstance(stream._sock, ssl.SSLSocket)
        return _socketio_tap(stream, arrivals)
    if cls.__name__ not in _HTTPCORE_STREAMS or not module.startswith(("httpcore", "httpcore2")):
        return None
    if not hasattr(cls, "write") or getattr(holder, _STREAM_ATTRIBUTE, None) is not stream:
        return None
    if cls.__name__ == "AnyIOStream":  # its read is a coroutine (SyncStream's is not)
        inner = getattr(stream, "_stream", None)
        arrivals.tls = hasattr(inner, "transport_stream")  # anyio's TLS stream
        return _async_tap(stream, arrivals, holder)
    arrivals.tls = isinstance(getattr(stream, "_sock", None), ssl.SSLSocket) or not hasattr(
        stream, "_sock")
    return _sync_tap(stream, arrivals, holder)
