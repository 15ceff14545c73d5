"""The openai SDK's Responses API over a persistent WebSocket (``client.responses.connect()``,
openai 3.x, sync and async).

- **The connection's setup** (``ResponsesConnectionManager.__enter__`` / ``enter``, the async
  ``__aenter__``): a ``connection.setup`` span of its own, under the span current when the
  program opened it (so it is charged once, to the task that opened it), with DNS, TCP
  connect and TLS from the socket layer (:mod:`._sockets`), the WebSocket upgrade (from the
  last socket operation to the end: the upgrade request's round trip) and the client's own
  work before and between them (``agent_latency.net.client``, budget other).
- **One call per** ``response.create`` sent on the connection (``conn.response.create(…)``
  or ``conn.send({"type": "response.create", …})``): a ``chat {model}`` span under the span
  current when it was sent.  The first byte written and the last are the marks around
  the SDK's ``send_raw``; each received message is dated when its bytes came back
  (``recv_bytes``), before the SDK parses it (openai 3.x spends ~0.4 s of CPU on a
  ``response.completed``: that is the call's ``client_tail``, not network).  The call ends
  at its final event (``response.completed`` / ``.incomplete`` / ``.failed``, or an
  ``error`` event), when the connection closes, or when the receive fails.  Responses sent
  before the previous one was read to its end wait in line: events go to the oldest call
  not finished.
- **The phases** are the HTTP path's, computed by the same code: upload, one RTT (the
  kernel's smoothed RTT of the connection's socket), prefill, output generation, the wire
  tail and the client's tail; connect/TLS are 0 (the setup span has them).  The first call
  on a connection says ``connection_reused`` false, later ones true, with the handshake
  round trips they avoided.

Responses run one after another per connection (the API's rule); events are given to the
oldest call not finished, so two lanes in flight at once (``stream_id``) would be mixed up.
Reconnects (``on_reconnecting``) are not separate setup spans: their time lands in the call
that was waiting.  Messages queued with the manager's ``send`` before the connection opened
are sent without a call of ours.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from time import perf_counter, thread_time
from typing import Any

from ... import semconv
from ..._log import internal_error
from ..net import (
    AT_READ,
    CURRENT,
    RTT_NONE,
    Arrival,
    Attempt,
    ConnectionSetup,
    MessageArrivals,
    date_messages,
    websocket_socket,
)
from ..protocols import Endpoint
from ._call import LLMCall, Settings
from ._invoke import start_call

_STATE = "_agent_latency_ws"
_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_CREATE = "response.create"


class WebSocketResponseError(Exception):
    """An ``error`` event the server sent for a response on the WebSocket."""


class ConnectionState:
    """What we keep on one open ``ResponsesConnection``."""

    __slots__ = ("calls", "dated", "host", "nets", "port", "raw_bytes", "secure", "sock",
                 "t_message", "t_raw_sent", "t_raw_start", "used")

    def __init__(self, host: str | None, port: int | None, secure: bool, sock: Any,
                 dated: MessageArrivals | None = None) -> None:
        self.host = host
        self.dated = dated  # when each message came off the socket (None: when recv took it)
        self.port = port
        self.secure = secure
        self.sock = sock
        self.calls: deque[LLMCall] = deque()
        self.nets: dict[int, _CallNet] = {}  # id(call) -> its message counts
        self.used = False
        self.t_message = 0.0  # when the last received message's bytes came back
        self.t_raw_start: float | None = None
        self.t_raw_sent: float | None = None
        self.raw_bytes = 0  # the size of the last message written


class _CallNet:
    """Per-call WebSocket counts, kept beside the call (its slots are the core's)."""

    __slots__ = ("bytes_received", "bytes_sent", "received", "sent")

    def __init__(self) -> None:
        self.sent = self.received = self.bytes_sent = self.bytes_received = 0


# -- the connection's setup ----------------------------------------------------------------
def _server_of(manager: Any) -> tuple[str | None, int | None, bool]:
    try:
        url = manager._prepare_url()
        secure = url.scheme in ("wss", "https")
        return url.host, url.port or (443 if secure else 80), secure
    except Exception:  # noqa: BLE001 - a private helper of the SDK
        return None, None, False


class _Setup:
    """One connection's setup: timed around the manager's enter."""

    __slots__ = ("setup",)

    def __init__(self, settings: Settings, manager: Any) -> None:
        host, port, secure = _server_of(manager)
        self.setup = ConnectionSetup(settings.tracer(), host, port, secure)

    @property
    def recording(self) -> Any:
        return self.setup.recording

    def done(self, connection: Any, error: BaseException | None) -> None:
        setup = self.setup
        setup.done(error)
        if connection is None or error is not None:
            return
        try:
            ws = getattr(connection, "_connection", None)
            sock = websocket_socket(ws, setup.phases)
            setattr(connection, _STATE, ConnectionState(setup.host, setup.port, setup.secure,
                                                        sock, date_messages(ws)))
        except Exception:  # noqa: BLE001
            internal_error("websocket.setup")


def enter_wrapper(settings: Settings) -> Any:
    """``ResponsesConnectionManager.__enter__`` / ``enter``: the setup span."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if not settings.active:
            return wrapped(*args, **kwargs)
        setup = _Setup(settings, instance)
        try:
            with setup.recording:
                connection = wrapped(*args, **kwargs)
        except BaseException as exc:
            setup.done(None, exc)
            raise
        setup.done(connection, None)
        return connection

    return wrapper


def async_enter_wrapper(settings: Settings) -> Any:
    """``AsyncResponsesConnectionManager.__aenter__`` / ``enter``: the setup span."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        if not settings.active:
            return wrapped(*args, **kwargs)
        return _async_enter(settings, wrapped, instance, args, kwargs)

    return wrapper


async def _async_enter(settings: Settings, wrapped: Any, instance: Any, args: Any,
                       kwargs: Any) -> Any:
    setup = _Setup(settings, instance)
    try:
        with setup.recording:
            connection = await wrapped(*args, **kwargs)
    except BaseException as exc:
        setup.done(None, exc)
        raise
    setup.done(connection, None)
    return connection


# -- one call per response.create ------------------------------------------------------------
def _event_type(event: Any) -> Any:
    if isinstance(event, Mapping):
        return event.get("type")
    return getattr(event, "type", None)


def _request_of(event: Any) -> Mapping[str, Any]:
    if isinstance(event, Mapping):
        return event
    return {key: getattr(event, key, None)
            for key in ("model", "max_output_tokens", "temperature", "input", "instructions")}


def _start(endpoint: Endpoint, settings: Settings, state: ConnectionState,
           event: Any) -> LLMCall | None:
    if CURRENT.get() is not None or _event_type(event) != _CREATE:
        return None
    # An earlier response not read to its end stays first in line: its remaining events
    # come (and are read) before this one's.
    call = start_call(endpoint, settings, _request_of(event), streaming=True,
                      server=(state.host, state.port))
    if call is None:
        return None
    state.t_raw_start = state.t_raw_sent = None
    state.raw_bytes = 0
    return call


def _sent(state: ConnectionState, call: LLMCall) -> None:
    attempt = Attempt(state.host or "", state.port or 0)
    attempt.t_start = call.t_call
    attempt.t_send = state.t_raw_start if state.t_raw_start is not None else call.t_call
    attempt.t_sent = state.t_raw_sent if state.t_raw_sent is not None else perf_counter()
    attempt.reused = state.used
    attempt.secure = state.secure
    attempt.sock = state.sock
    attempt.status = 200
    if not call.is_async:
        attempt.cpu_sent = thread_time()
    state.used = True
    call.attempts.append(attempt)
    call.defer()
    state.calls.append(call)
    net = state.nets[id(call)] = _CallNet()
    net.sent = 1
    net.bytes_sent = state.raw_bytes


def _begin(endpoint: Endpoint, settings: Settings, instance: Any, args: Any, kwargs: Any,
           *, is_async: bool) -> tuple[ConnectionState, LLMCall] | None:
    """The call a ``send`` starts (a ``response.create`` on an instrumented connection)."""
    state = getattr(instance, _STATE, None)
    if state is None or not settings.active:
        return None
    try:
        call = _start(endpoint, settings, state, args[0] if args else kwargs.get("event"))
    except Exception:  # noqa: BLE001
        internal_error("websocket.send")
        return None
    if call is None:
        return None
    call.is_async = is_async
    return state, call


def _after_send(state: ConnectionState, call: LLMCall) -> None:
    try:
        _sent(state, call)
    except Exception:  # noqa: BLE001
        internal_error("websocket.sent")


def send_wrapper(endpoint: Endpoint, settings: Settings) -> Any:
    """``ResponsesConnection.send``: a ``response.create`` starts a call."""

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        begun = _begin(endpoint, settings, instance, args, kwargs, is_async=False)
        if begun is None:
            return wrapped(*args, **kwargs)
        state, call = begun
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            call.finish(None, exc)
            raise
        _after_send(state, call)
        return result

    return wrapper


def async_send_wrapper(endpoint: Endpoint, settings: Settings) -> Any:
    """``AsyncResponsesConnection.send``: as :func:`send_wrapper`."""

    async def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        begun = _begin(endpoint, settings, instance, args, kwargs, is_async=True)
        if begun is None:
            return await wrapped(*args, **kwargs)
        state, call = begun
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            call.finish(None, exc)
            raise
        _after_send(state, call)
        return result

    return wrapper


def _raw_data_length(args: Any, kwargs: Any) -> int:
    data = args[0] if args else kwargs.get("data")
    return len(data) if isinstance(data, (bytes, str)) else 0


def send_raw_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``WebSocketConnectionBase.send_raw``: the first and last byte of a message written."""
    state = getattr(instance, _STATE, None)
    if state is None:
        return wrapped(*args, **kwargs)
    state.t_raw_start = perf_counter()
    try:
        return wrapped(*args, **kwargs)
    finally:
        state.t_raw_sent = perf_counter()
        _count_sent(state, _raw_data_length(args, kwargs))


async def async_send_raw_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``AsyncWebSocketConnectionBase.send_raw``: as :func:`send_raw_wrapper`."""
    state = getattr(instance, _STATE, None)
    if state is None:
        return await wrapped(*args, **kwargs)
    state.t_raw_start = perf_counter()
    try:
        return await wrapped(*args, **kwargs)
    finally:
        state.t_raw_sent = perf_counter()
        _count_sent(state, _raw_data_length(args, kwargs))


def _count_sent(state: ConnectionState, size: int) -> None:
    # A response.create's own size is taken by its call once sent; a later message (a
    # response.steer) counts in the newest call running.
    state.raw_bytes = size
    if state.calls:
        net = state.nets.get(id(state.calls[-1]))
        if net is not None:
            net.bytes_sent += size


# -- receiving ----------------------------------------------------------------------------------
def _received_bytes(state: ConnectionState, message: Any) -> None:
    dated = state.dated
    t = dated.take() if dated is not None else None
    state.t_message = perf_counter() if t is None else t
    if state.calls:
        net = state.nets.get(id(state.calls[0]))
        if net is not None:
            net.received += 1
            net.bytes_received += len(message) if isinstance(message, (bytes, str)) else 0


def recv_bytes_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``ResponsesConnection.recv_bytes``: when each message's bytes came back."""
    message = wrapped(*args, **kwargs)
    state = getattr(instance, _STATE, None)
    if state is not None:
        _received_bytes(state, message)
    return message


async def async_recv_bytes_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``AsyncResponsesConnection.recv_bytes``: as :func:`recv_bytes_wrapper`."""
    message = await wrapped(*args, **kwargs)
    state = getattr(instance, _STATE, None)
    if state is not None:
        _received_bytes(state, message)
    return message


def _observe(state: ConnectionState, event: Any, cpu: float | None) -> None:
    """One parsed event, for the oldest call not finished.

    Messages are dated when websockets' reader took them off the socket (``state.dated``):
    a client busy parsing (openai builds its event models on first use, ~40 ms) reads later
    messages late, and that lag overlaps the server's time, so it is booked nowhere.  Where
    they cannot be dated, ``cpu`` (sync connections: the thread's CPU time inside this
    ``recv``) until the first output token is taken as the client's own work instead."""
    if not state.calls:
        return
    call = state.calls[0]
    dated = state.dated is not None
    if cpu is not None and call.t_first is None and not dated:
        call.first_cpu += cpu
    t_arrived = state.t_message or perf_counter()
    t_parsed = perf_counter()
    n = call.chunks
    call.chunks = n + 1
    call.t_chunk = t_parsed
    if not n:
        call.t_first_chunk = t_arrived
        call.first_chunk = event
    kind = getattr(event, "type", None)
    observe = call.endpoint.observe
    if observe is not None and observe(call, event):
        if call.t_first is None:
            call.t_first = t_arrived
            if dated:
                call.first_arrival = Arrival(t_arrived, AT_READ, 0.0)
            elif cpu is not None:
                call.cpu_first = thread_time()
        call.t_last = t_arrived
        if dated:
            call.last_arrival = Arrival(t_arrived, AT_READ, 0.0)
        call.outputs += 1
    if kind in _FINAL:
        call.attempts[-1].t_received = t_arrived
        _end(state, call, None, t_end=t_parsed)
    elif kind == "error":
        error = getattr(event, "error", None)
        message = getattr(error, "message", None) or str(kind)
        call.attempts[-1].t_received = t_arrived
        _end(state, call, WebSocketResponseError(message), t_end=t_parsed)


def _end(state: ConnectionState, call: LLMCall, error: BaseException | None, *,
         t_end: float | None = None, abandoned: bool = False) -> None:
    try:
        state.calls.remove(call)
    except ValueError:
        pass
    net = state.nets.pop(id(call), None)
    try:
        attempt = call.attempts[-1] if call.attempts else None
        if attempt is not None and attempt.rtt_source == RTT_NONE:
            attempt.measure_rtt()  # the kernel's smoothed RTT, now that replies came
        attrs: dict[str, Any] = {semconv.LLM_TRANSPORT: semconv.TRANSPORT_WEBSOCKET}
        if attempt is not None:
            attrs[semconv.LLM_ROUND_TRIPS_AVOIDED] = (
                (2 if state.secure else 1) if attempt.reused else 0)
        if net is not None:
            attrs[semconv.LLM_WS_MESSAGES_SENT] = net.sent
            attrs[semconv.LLM_WS_MESSAGES_RECEIVED] = net.received
            attrs[semconv.LLM_BYTES_SENT] = net.bytes_sent
            attrs[semconv.LLM_BYTES_RECEIVED] = net.bytes_received
        call.span.set_attributes(attrs)
    except Exception:  # noqa: BLE001
        internal_error("websocket.end")
    if abandoned:
        marks = [t for t in (call.t_chunk, call.t_return) if t is not None]
        call.finish(max(marks) if marks else None)
    else:
        call.finish(t_end, error)


def _end_all(state: ConnectionState, error: BaseException | None) -> None:
    while state.calls:
        call = state.calls[0]
        if error is None:
            _end(state, call, None, abandoned=True)
        else:
            _end(state, call, error)


def recv_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``ResponsesConnection.recv`` (and its iterator): events given to their call."""
    state = getattr(instance, _STATE, None)
    if state is None:
        return wrapped(*args, **kwargs)
    cpu = thread_time()
    try:
        event = wrapped(*args, **kwargs)
    except BaseException as exc:
        _end_all(state, exc)
        raise
    try:
        _observe(state, event, thread_time() - cpu)
    except Exception:  # noqa: BLE001
        internal_error("websocket.recv")
    return event


async def async_recv_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``AsyncResponsesConnection.recv``: as :func:`recv_wrapper`."""
    state = getattr(instance, _STATE, None)
    if state is None:
        return await wrapped(*args, **kwargs)
    try:
        event = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _end_all(state, exc)
        raise
    try:
        _observe(state, event, None)
    except Exception:  # noqa: BLE001
        internal_error("websocket.recv")
    return event


def close_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``WebSocketConnectionBase.close`` (sync and async): calls still open end at their
    last event."""
    state = getattr(instance, _STATE, None)
    if state is not None:
        try:
            _end_all(state, None)
        except Exception:  # noqa: BLE001
            internal_error("websocket.close")
    return wrapped(*args, **kwargs)


_MODULE = "openai.resources.responses.responses"
_BASE = "openai._websocket_connection"


def targets(endpoint: Endpoint, settings: Settings) -> list[tuple[str, str, Any]]:
    """The patch table for ``client.responses.connect()`` (absent before openai 3)."""
    enter, aenter = enter_wrapper(settings), async_enter_wrapper(settings)
    return [
        (_MODULE, "ResponsesConnectionManager.__enter__", enter),
        (_MODULE, "ResponsesConnectionManager.enter", enter),
        (_MODULE, "AsyncResponsesConnectionManager.__aenter__", aenter),
        (_MODULE, "AsyncResponsesConnectionManager.enter", aenter),
        (_MODULE, "ResponsesConnection.send", send_wrapper(endpoint, settings)),
        (_MODULE, "AsyncResponsesConnection.send", async_send_wrapper(endpoint, settings)),
        (_MODULE, "ResponsesConnection.recv", recv_wrapper),
        (_MODULE, "AsyncResponsesConnection.recv", async_recv_wrapper),
        (_MODULE, "ResponsesConnection.recv_bytes", recv_bytes_wrapper),
        (_MODULE, "AsyncResponsesConnection.recv_bytes", async_recv_bytes_wrapper),
        (_BASE, "WebSocketConnectionBase.send_raw", send_raw_wrapper),
        (_BASE, "AsyncWebSocketConnectionBase.send_raw", async_send_raw_wrapper),
        (_BASE, "WebSocketConnectionBase.close", close_wrapper),
        (_BASE, "AsyncWebSocketConnectionBase.close", close_wrapper),
    ]
