"""A persistent connection's setup (a WebSocket: DNS, TCP connect, TLS, the HTTP upgrade) as
one ``connection.setup`` span, charged once to the span current when it was opened.

DNS, connect and TLS come from the socket layer (:mod:`._sockets`) recording into the
setup's own :class:`NetPhases` while the client connects; the upgrade is the upgrade
request's round trip (from the kernel's last data sent to its last data received, where it
says; else from the last socket operation to the end); the client's own work
before, between and after them (building the request, first-use imports, starting a reader
thread, parsing the ``101``) is
``agent_latency.net.client`` (budget other).  Each complete message is dated when the
library's reader takes it off the socket (:func:`date_messages`), not when the client
library gets round to parsing it.
"""

from __future__ import annotations

import time
from collections import deque
from time import perf_counter
from typing import Any

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from ... import semconv
from ..._log import internal_error
from ._kernel import KERNEL_TICK, tcp_info_last_data
from ._phases import NetPhases
from ._sockets import Recording


class ConnectionSetup:
    """``with setup.recording:`` around the client's connect, then ``setup.done(error)``."""

    __slots__ = ("host", "phases", "port", "recording", "secure", "start_ns", "t_start",
                 "tracer")

    def __init__(self, tracer: Tracer, host: str | None, port: int | None,
                 secure: bool) -> None:
        self.tracer = tracer
        self.host, self.port, self.secure = host, port, secure
        self.phases = NetPhases()
        self.recording = Recording(self.phases)
        self.start_ns = time.time_ns()
        self.t_start = perf_counter()

    def done(self, error: BaseException | None) -> None:
        """The connect returned (or raised ``error``): the span, ended now."""
        try:
            t_end = perf_counter()
            duration = t_end - self.t_start
            phases = self.phases
            setup = phases.dns + phases.connect + phases.tls
            scale = min(1.0, duration / setup) if setup > 0 else 1.0
            upgrade = t_end - phases.t_last if phases.t_first is not None else duration
            exchange = _request_round_trip(phases.last_sock, upgrade)
            if exchange is not None:
                upgrade = exchange
            upgrade = min(max(upgrade, 0.0), max(duration - setup * scale, 0.0))
            attrs: dict[str, Any] = {
                semconv.COMPONENT: semconv.NETWORK_OVERHEAD,
                semconv.LLM_TRANSPORT: semconv.TRANSPORT_WEBSOCKET,
                semconv.NET_CLIENT: max(duration - setup * scale - upgrade, 0.0),
                semconv.LLM_DNS: phases.dns * scale,
                semconv.LLM_CONNECT: phases.connect * scale,
                semconv.LLM_TLS: phases.tls * scale,
                semconv.NET_UPGRADE: upgrade,
            }
            if self.host:
                attrs[semconv.SERVER_ADDRESS] = self.host
            if self.port:
                attrs[semconv.SERVER_PORT] = self.port
            span = self.tracer.start_span(semconv.SPAN_CONNECTION_SETUP, kind=SpanKind.CLIENT,
                                          attributes=attrs, start_time=self.start_ns)
            if error is not None:
                err_type = type(error).__qualname__
                span.set_attribute(semconv.ERROR_TYPE, err_type)
                span.set_status(Status(StatusCode.ERROR, str(error) or err_type))
            span.end(end_time=self.start_ns + round(duration * 1e9))
        except Exception:  # noqa: BLE001
            internal_error("websocket.setup")


def _request_round_trip(sock: Any, elapsed: float) -> float | None:
    """The upgrade request's round trip as the kernel saw it: from the last data the
    client sent (the request) to the last it received (the ``101``), or None unknown;
    ``elapsed``, the wall time since the last socket operation, bounds it.

    Without it the upgrade is everything after the connect, the client's own work
    included: building the request and a key, starting a reader thread, parsing the answer
    (5-15 ms of a 25 ms upgrade measured on a first call).  The kernel counts both in its
    ticks, so the difference is within a tick of the truth; the same tick for both (a
    local server) says less than one: half of it, or of ``elapsed`` if less.  Read right
    after the connect returned, nothing else was sent or received on it yet."""
    last = tcp_info_last_data(sock)
    if last is None:
        return None
    sent_ago, received_ago = last
    if sent_ago < received_ago:
        return None
    if sent_ago == received_ago:
        return min(elapsed, KERNEL_TICK) / 2
    return min(elapsed, sent_ago - received_ago)


def websocket_socket(ws: Any, phases: NetPhases) -> Any:
    """The socket under a ``websockets`` connection (sync: ``.socket``; asyncio: its
    transport's), else the last one the setup connected."""
    sock = getattr(ws, "socket", None)
    if sock is None:
        transport = getattr(ws, "transport", None)
        if transport is not None:
            try:
                sock = transport.get_extra_info("socket")
            except Exception:  # noqa: BLE001
                sock = None
    return sock if sock is not None else phases.last_sock


class MessageArrivals:
    """When each complete message of a ``websockets`` connection came off its socket, oldest
    first: the time websockets' reader (a thread of its own for the sync client, the event
    loop for the asyncio one) handed its last frame over, before anyone parsed it.

    The owner takes them in order (:meth:`take`) as the client receives the messages."""

    __slots__ = ("times",)

    def __init__(self) -> None:
        self.times: deque[float] = deque(maxlen=4096)

    def take(self) -> float | None:
        """The arrival of the oldest message not taken yet, or None."""
        times = self.times
        return times.popleft() if times else None


def date_messages(ws: Any) -> MessageArrivals | None:
    """Date the complete messages of the ``websockets`` connection ``ws`` as they arrive
    (its assembler's ``put``, replaced on that one object), or None when it has none."""
    assembler = getattr(ws, "recv_messages", None)
    original = getattr(assembler, "put", None)
    if original is None or "put" in getattr(assembler, "__dict__", {}):
        return None
    dated = MessageArrivals()
    times = dated.times

    def put(frame: Any) -> Any:
        result = original(frame)
        if getattr(frame, "fin", True):
            times.append(perf_counter())
        return result

    try:
        assembler.put = put  # type: ignore[union-attr]  # not None: ``original`` came from it
    except AttributeError:
        return None
    return dated
