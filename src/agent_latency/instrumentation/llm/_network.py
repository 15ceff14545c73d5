"""Network phases of one HTTP attempt: httpcore's ``trace`` extension, kernel RTT, send patch.

Every request sent by an ``httpx``/``httpx2`` client while an LLM call is current (see
:data:`CURRENT`) gets our ``trace`` callback, chained with one the user set.  httpcore and
httpcore2 call it with ``connection.connect_tcp.*``, ``connection.start_tls.*``,
``http11|http2.send_request_headers.*`` … events, which give the attempt's marks without any
socket patching.  Async clients need an ``async def`` callback, sync clients a plain one.

The round trip comes from the kernel (``TCP_INFO``'s smoothed RTT, Linux), else the TCP
connect time of this attempt, else the last RTT seen for the host, else 0; the source is
named on the span.
"""

from __future__ import annotations

import contextvars
import socket
import struct
import sys
from time import perf_counter, thread_time
from typing import Any

from opentelemetry import propagate

from ... import semconv
from ..._log import FAULTS, fault, internal_error
from .._shared import SharedPatch

#: The LLM call whose HTTP attempts are being sent right now (set only inside SDK methods).
CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("agent_latency_llm_call",
                                                              default=None)

RTT_TCP_INFO = semconv.RTT_SOURCE_TCP_INFO
RTT_CONNECT = semconv.RTT_SOURCE_CONNECT
RTT_LAST_SEEN = semconv.RTT_SOURCE_LAST_SEEN
RTT_NONE = semconv.RTT_SOURCE_NONE

_TCP_INFO = getattr(socket, "TCP_INFO", None) if sys.platform.startswith("linux") else None
_last_rtt: dict[tuple[str, int], float] = {}


def _tcp_info_field(sock: Any, offset: int) -> int | None:
    """One ``u32`` of the kernel's ``struct tcp_info`` for ``sock`` (Linux), or None."""
    if _TCP_INFO is None or sock is None:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 104)
    except (OSError, AttributeError, TypeError, ValueError):
        return None
    if len(raw) < offset + 4:
        return None
    return int(struct.unpack_from("=I", raw, offset)[0])


def tcp_info_rtt(sock: Any) -> float | None:
    """The kernel's smoothed RTT of ``sock`` in seconds (``tcpi_rtt``), or None."""
    rtt_us = _tcp_info_field(sock, 68)
    return rtt_us / 1e6 if rtt_us else None


def tcp_last_data_received(sock: Any) -> float | None:
    """Seconds since ``sock`` last received data (``tcpi_last_data_recv``, in jiffies: 1–10
    ms resolution), or None."""
    since_ms = _tcp_info_field(sock, 52)
    return since_ms / 1e3 if since_ms is not None else None


# Bytes the kernel counted on each socket at the end of the last attempt seen on it (so an
# attempt on a pooled connection gets its own share); bounded.
_last_bytes: dict[int, tuple[int, int]] = {}


def tcp_info_close(sock: Any) -> tuple[float | None, int | None, int | None]:
    """``(seconds since the last data received, bytes acked, bytes received)`` of ``sock``
    from one ``TCP_INFO`` read (Linux), each None when unknown."""
    if _TCP_INFO is None or sock is None:
        return None, None, None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 136)
    except (OSError, AttributeError, TypeError, ValueError):
        return None, None, None
    since = struct.unpack_from("=I", raw, 52)[0] / 1e3 if len(raw) >= 56 else None
    if len(raw) < 136:
        return since, None, None
    acked, received = struct.unpack_from("=QQ", raw, 120)
    return since, int(acked), int(received)


def _socket_of(stream: Any) -> Any:
    try:
        return stream.get_extra_info("socket")
    except Exception:  # noqa: BLE001 - any stream type may lack it
        return None


class Attempt:
    """The marks of one HTTP attempt (one ``send``), in ``perf_counter`` seconds."""

    __slots__ = ("bytes_received", "bytes_sent", "connect", "cpu_sent", "dns", "dns_base",
                 "error", "host", "net", "port", "tls_base", "request_id", "response", "reused",
                 "rtt", "rtt_source", "secure", "sock", "status", "t_body_done", "t_closed",
                 "t_connect", "t_headers", "t_received", "t_return", "t_send", "t_sent",
                 "t_start", "t_tls", "tls", "on_closed")

    def __init__(self, host: str, port: int, on_closed: Any = None) -> None:
        self.t_start = perf_counter()
        self.host = host
        self.port = port
        self.on_closed = on_closed
        self.connect = 0.0
        self.tls = 0.0
        # Name resolution, from the socket layer (``_sockets``) when it recorded into ``net``
        # (the call's): httpcore counts it inside ``connect_tcp``.
        self.dns = self.dns_base = self.tls_base = 0.0
        self.net: Any = None
        self.secure = False
        self.bytes_sent: int | None = None  # from the kernel's counters (TCP_INFO)
        self.bytes_received: int | None = None
        self.t_connect = self.t_tls = 0.0
        self.t_send: float | None = None
        self.t_sent: float | None = None
        self.t_headers: float | None = None
        self.t_body_done: float | None = None
        self.t_closed: float | None = None
        self.t_return: float | None = None
        # The response's last bytes, from the kernel as the response closes.
        self.t_received: float | None = None
        self.cpu_sent: float | None = None  # the sending thread's CPU clock at t_sent
        self.reused = True
        self.sock: Any = None
        self.rtt = 0.0
        self.rtt_source = RTT_NONE
        self.status = 0
        self.error: BaseException | None = None
        self.response: Any = None
        self.request_id: str | None = None

    # -- trace events ----------------------------------------------------------------
    def event(self, name: str, info: Any) -> None:
        t = perf_counter()
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, t, info)

    def _send_started(self, t: float, info: Any) -> None:
        if self.t_send is None:
            self.t_send = t

    def _sent(self, t: float, info: Any) -> None:
        self.t_sent = t
        self.cpu_sent = thread_time()

    def _headers(self, t: float, info: Any) -> None:
        self.t_headers = t

    def _body_done(self, t: float, info: Any) -> None:
        self.t_body_done = t

    def _closed(self, t: float, info: Any) -> None:
        if self.t_closed is None:
            self.t_closed = t
            # The connection is still open here: ask the kernel when its last bytes came,
            # and how many it carried.
            since, acked, received = tcp_info_close(self.sock)
            if since is not None:
                self.t_received = t - since
            if acked is not None and received is not None:
                self._count_bytes(acked, received)
            if self.t_body_done is None:
                self.t_body_done = t
            cb = self.on_closed
            if cb is not None:
                cb(self, t)

    def _count_bytes(self, acked: int, received: int) -> None:
        key = id(self.sock)
        before = (0, 0) if not self.reused else _last_bytes.get(key)
        if len(_last_bytes) > 256:
            _last_bytes.clear()
        _last_bytes[key] = (acked, received)
        if before is not None:
            self.bytes_sent = max(acked - before[0], 0)
            self.bytes_received = max(received - before[1], 0)

    def _connect_started(self, t: float, info: Any) -> None:
        self.t_connect = t
        self.reused = False
        if self.net is not None:
            self.dns_base = self.net.dns

    def _connected(self, t: float, info: Any) -> None:
        self.connect = t - self.t_connect
        self.sock = _socket_of(info.get("return_value"))
        if self.net is not None:
            dns = self.net.dns - self.dns_base
            if 0.0 < dns <= self.connect:
                self.dns = dns
                self.connect -= dns

    def _tls_started(self, t: float, info: Any) -> None:
        self.t_tls = t

    def _tls_done(self, t: float, info: Any) -> None:
        self.tls = t - self.t_tls

    def sync_trace(self, user: Any) -> Any:
        def trace(name: str, info: Any) -> None:
            try:
                if FAULTS:
                    fault("network.trace")
                self.event(name, info)
            except Exception:  # noqa: BLE001
                internal_error("network.trace")
            if user is not None:
                user(name, info)
        return trace

    def async_trace(self, user: Any) -> Any:
        async def trace(name: str, info: Any) -> None:
            try:
                if FAULTS:
                    fault("network.atrace")
                self.event(name, info)
            except Exception:  # noqa: BLE001
                internal_error("network.atrace")
            if user is not None:
                await user(name, info)
        return trace

    # -- around send ---------------------------------------------------------------
    def got_response(self, response: Any) -> None:
        self.t_return = perf_counter()
        self.response = response
        self.status = int(getattr(response, "status_code", 0) or 0)
        headers = response.headers
        self.request_id = headers.get("x-request-id") or headers.get("request-id")
        if self.t_headers is None:
            self.t_headers = self.t_return
        if self.sock is None:
            stream = response.extensions.get("network_stream")
            if stream is not None:
                self.sock = _socket_of(stream)
        self._measure_rtt()

    def _measure_rtt(self) -> None:
        key = (self.host, self.port)
        rtt = tcp_info_rtt(self.sock)
        if rtt is not None:
            self.rtt, self.rtt_source = rtt, RTT_TCP_INFO
        elif not self.reused and self.connect > 0:
            self.rtt, self.rtt_source = self.connect, RTT_CONNECT
        elif key in _last_rtt:
            self.rtt, self.rtt_source = _last_rtt[key], RTT_LAST_SEEN
            return
        else:
            return
        _last_rtt[key] = self.rtt

    def failed(self, exc: BaseException) -> None:
        self.t_return = perf_counter()
        self.error = exc


_HANDLERS: dict[str, Any] = {
    "connection.connect_tcp.started": Attempt._connect_started,
    "connection.connect_unix_socket.started": Attempt._connect_started,
    "connection.connect_tcp.complete": Attempt._connected,
    "connection.connect_unix_socket.complete": Attempt._connected,
    "connection.start_tls.started": Attempt._tls_started,
    "connection.start_tls.complete": Attempt._tls_done,
}
for _proto in ("http11", "http2"):
    _HANDLERS.update({
        f"{_proto}.send_request_headers.started": Attempt._send_started,
        f"{_proto}.send_request_body.complete": Attempt._sent,
        f"{_proto}.receive_response_headers.complete": Attempt._headers,
        f"{_proto}.receive_response_body.complete": Attempt._body_done,
        f"{_proto}.receive_response_body.failed": Attempt._body_done,
        f"{_proto}.response_closed.started": Attempt._closed,
        f"{_proto}.response_closed.complete": Attempt._closed,
        f"{_proto}.response_closed.failed": Attempt._closed,
    })


def _prepare(call: Any, request: Any, is_async: bool) -> Attempt | None:
    try:
        if FAULTS:
            fault("network.prepare")
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        attempt = Attempt(url.host, port)
        attempt.secure = url.scheme == "https"
        attempt.net = call.net
        call.add_attempt(attempt)
        ext = request.extensions
        user = ext.get("trace")
        ext["trace"] = attempt.async_trace(user) if is_async else attempt.sync_trace(user)
        if call.propagate:
            propagate.inject(request.headers, context=call.context)
        return attempt
    except Exception:  # noqa: BLE001
        internal_error("network.prepare")
        return None


def _request_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("request")


def send_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``Client.send`` of httpx/httpx2: trace the attempt when an LLM call is current."""
    call = CURRENT.get()
    if call is None:
        return wrapped(*args, **kwargs)
    attempt = _prepare(call, _request_of(args, kwargs), False)
    try:
        response = wrapped(*args, **kwargs)
    except BaseException as exc:
        if attempt is not None:
            attempt.failed(exc)
        raise
    return _got_response(attempt, response)


def _got_response(attempt: Attempt | None, response: Any) -> Any:
    if attempt is not None:
        try:
            if FAULTS:
                fault("network.got_response")
            attempt.got_response(response)
        except Exception:  # noqa: BLE001
            internal_error("network.got_response")
    return response


async def async_send_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``AsyncClient.send`` of httpx/httpx2: as :func:`send_wrapper`, with an async trace."""
    call = CURRENT.get()
    if call is None:
        return await wrapped(*args, **kwargs)
    attempt = _prepare(call, _request_of(args, kwargs), True)
    try:
        response = await wrapped(*args, **kwargs)
    except BaseException as exc:
        if attempt is not None:
            attempt.failed(exc)
        raise
    return _got_response(attempt, response)


# -- the send patch, shared by the httpx, openai and anthropic instrumentors ----------------
_TARGETS = (("httpx", "Client", False), ("httpx", "AsyncClient", True),
            ("httpx2", "Client", False), ("httpx2", "AsyncClient", True))
_patched: list[tuple[Any, str]] = []


def _apply() -> None:
    import importlib

    from wrapt import wrap_function_wrapper

    for module_name, cls_name, is_async in _TARGETS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, cls_name, None)
        if cls is None:
            continue
        wrap_function_wrapper(cls, "send", async_send_wrapper if is_async else send_wrapper)
        _patched.append((cls, "send"))


def _remove() -> None:
    from opentelemetry.instrumentation.utils import unwrap

    while _patched:
        cls, name = _patched.pop()
        unwrap(cls, name)


# ``send`` of every installed httpx flavour, reference counted across our instrumentors.
_send_patch = SharedPatch(_apply, _remove)
acquire = _send_patch.acquire
release = _send_patch.release


def patched() -> bool:
    """Whether the send patch is in place."""
    return _send_patch.active


