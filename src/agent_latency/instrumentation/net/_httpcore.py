"""httpx and httpx2: each request sent while an owner is current (:data:`._context.CURRENT`)
gets our httpcore ``trace`` callback, chained with one the program set, and a W3C
``traceparent``; its HTTP/1.1 connection (httpcore's ``HTTP11Connection``) gives the stream
whose reads arrival times are taken on.

httpcore and httpcore2 call the callback with ``connection.connect_tcp.*``,
``connection.start_tls.*``, ``http11|http2.send_request_headers.*`` … events, which give the
attempt's marks without any socket patching.  Async clients need an ``async def`` callback,
sync clients a plain one.  ``Client.send`` / ``AsyncClient.send`` of both libraries are
wrapped once (reference counted across the instrumentors that need it).

Where arrival times are taken on an HTTP/1.1 connection (its reads and writes tapped), the
callback is lifted off the request for the exchange itself: the events of sending, reading
and closing (ten a request, three Python calls each) would only repeat marks that the
connection's ``handle_request`` wrapper, the taps' writes and its ``_response_closed``
wrapper take anyway; a new connection's connect and TLS events still reach it.
"""

from __future__ import annotations

import importlib
from time import perf_counter
from typing import Any

from opentelemetry.instrumentation.utils import unwrap
from wrapt import wrap_function_wrapper

from ..._inject import inject
from ..._log import FAULTS, fault, internal_error
from .._shared import SharedPatch
from ._attempt import Attempt
from ._context import CURRENT
from ._follow import follow
from ._kernel import socket_of
from ._methods import is_stand_in, stood_for


def _connected(attempt: Attempt, t: float, info: Any) -> None:
    stream = info.get("return_value")
    attempt.stream = stream
    attempt.connected(t, socket_of(stream))


def _tls_done(attempt: Attempt, t: float, info: Any) -> None:
    # The TLS stream replaces the plain one (a sync client's socket object is detached
    # from its descriptor by ``wrap_socket``): read and asked through the new one.
    stream = info.get("return_value")
    if stream is not None:
        attempt.stream = stream
        sock = socket_of(stream)
        if sock is not None:
            attempt.sock = sock
    attempt.tls_done(t)


# event name -> the attempt's method it marks, called with the event's time (an unbound
# method, not a lambda around a bound one: one Python call per event, ten per request)
_MARKS: dict[str, Any] = {
    "connection.connect_tcp.started": Attempt.connect_started,
    "connection.connect_unix_socket.started": Attempt.connect_started,
    "connection.start_tls.started": Attempt.tls_started,
}
# event name -> what it marks from the event's info too: (attempt, t, info) -> None
_HANDLERS: dict[str, Any] = {
    "connection.connect_tcp.complete": _connected,
    "connection.connect_unix_socket.complete": _connected,
    "connection.start_tls.complete": _tls_done,
}
for _proto in ("http11", "http2"):
    _MARKS.update({
        f"{_proto}.send_request_headers.started": Attempt.send_started,
        f"{_proto}.send_request_body.complete": Attempt.sent,
        f"{_proto}.receive_response_headers.complete": Attempt.headers,
        f"{_proto}.receive_response_body.complete": Attempt.body_done,
        f"{_proto}.receive_response_body.failed": Attempt.body_done,
        f"{_proto}.response_closed.started": Attempt.closed,
        f"{_proto}.response_closed.complete": Attempt.closed,
        f"{_proto}.response_closed.failed": Attempt.closed,
    })


def _event(attempt: Attempt, name: str, info: Any) -> None:
    t = perf_counter()
    mark = _MARKS.get(name)
    if mark is not None:
        mark(attempt, t)
        return
    handler = _HANDLERS.get(name)
    if handler is not None:
        handler(attempt, t, info)


def _sync_trace(attempt: Attempt, user: Any) -> Any:
    marks, handlers = _MARKS, _HANDLERS

    def trace(name: str, info: Any) -> None:
        try:
            if FAULTS:
                fault("network.trace")
            # _event, inlined: the sync client's hot path (ten events per request)
            t = perf_counter()
            mark = marks.get(name)
            if mark is not None:
                mark(attempt, t)
            else:
                handler = handlers.get(name)
                if handler is not None:
                    handler(attempt, t, info)
        except Exception:  # noqa: BLE001
            internal_error("network.trace")
        if user is not None:
            user(name, info)
    return trace


def _async_trace(attempt: Attempt, user: Any) -> Any:
    async def trace(name: str, info: Any) -> None:
        try:
            if FAULTS:
                fault("network.atrace")
            _event(attempt, name, info)
        except Exception:  # noqa: BLE001
            internal_error("network.atrace")
        if user is not None:
            await user(name, info)
    return trace


def _prepare(owner: Any, request: Any, is_async: bool) -> Attempt | None:
    try:
        if FAULTS:
            fault("network.prepare")
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        attempt = Attempt(url.host, port)
        attempt.secure = url.scheme == "https"
        attempt.net = owner.net
        owner.add_attempt(attempt)
        ext = request.extensions
        user = ext.get("trace")
        hook = _async_trace(attempt, user) if is_async else _sync_trace(attempt, user)
        ext["trace"] = hook
        if user is None:
            attempt.hook = hook
        if owner.propagate:
            inject(request.headers, owner.context)
        return attempt
    except Exception:  # noqa: BLE001
        internal_error("network.prepare")
        return None


def _request_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("request")


def _got_response(attempt: Attempt | None, response: Any) -> Any:
    if attempt is not None:
        try:
            if FAULTS:
                fault("network.got_response")
            attempt.got_response(response)
        except Exception:  # noqa: BLE001
            internal_error("network.got_response")
    return response


def send_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``Client.send`` of httpx/httpx2: trace the attempt when an owner is current."""
    owner = CURRENT.get()
    if owner is None:
        return wrapped(*args, **kwargs)
    attempt = _prepare(owner, _request_of(args, kwargs), False)
    try:
        response = wrapped(*args, **kwargs)
    except BaseException as exc:
        if attempt is not None:
            attempt.failed(exc)
        raise
    return _got_response(attempt, response)


async def async_send_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``AsyncClient.send`` of httpx/httpx2: as :func:`send_wrapper`, with an async trace."""
    owner = CURRENT.get()
    if owner is None:
        return await wrapped(*args, **kwargs)
    attempt = _prepare(owner, _request_of(args, kwargs), True)
    try:
        response = await wrapped(*args, **kwargs)
    except BaseException as exc:
        if attempt is not None:
            attempt.failed(exc)
        raise
    return _got_response(attempt, response)


#: Where a connection keeps the attempt whose hook is lifted, for its ``_response_closed``.
_LIFTED = "_agent_latency_attempt"


def _on_connection(owner: Any, connection: Any, args: Any, kwargs: Any) -> Any:
    """An HTTP/1.1 connection of httpcore takes the owner's current attempt: its stream is
    known now, before the response is read, pooled or new; arrival times start here.

    Where they do and the request's trace callback is ours alone, the callback is lifted
    off the request (returned: the request's extensions, to put it back where the
    exchange fails): the ten events of sending the request, reading the response and
    closing it (each three Python calls, all of a kept-alive request's) give marks this
    wrapper, the taps and the connection's ``_response_closed`` take anyway
    (:func:`_lifted_marks`, :func:`closed_wrapper`)."""
    try:
        attempts = owner.attempts
        if not attempts:
            return None
        attempt = attempts[-1]
        stream = getattr(connection, "_network_stream", None)
        if stream is not None:
            attempt.stream, attempt.holder = stream, connection
            sock = socket_of(stream)
            if sock is not None:
                attempt.sock = sock
        if owner.wants_arrivals and attempt.following is None:
            attempt.following = follow(attempt, owner.classify_event)
            if attempt.following is not None and owner.streaming:
                # Until the first token (the LLM layer stops it there unless the client is
                # late): a client at work between sending and its first read, as a process's
                # first call is, leaves the kernel only its newest bytes' stamp.
                attempt.following.watch(ticks=True)
        hook = attempt.hook
        if hook is None or attempt.following is None or attempt.t_send is not None:
            return None
        ext = (args[0] if args else kwargs["request"]).extensions
        if ext.get("trace") is not hook:
            return None
        setattr(connection, _LIFTED, attempt)
        del ext["trace"]
        return ext
    except Exception:  # noqa: BLE001
        internal_error("network.connection")
        return None


def _lifted_marks(owner: Any, connection: Any, ext: Any, t_send: float,
                  t_headers: float | None) -> None:
    """The marks the lifted hook would have given: the first request byte's at the
    wrapper's call (the headers are written first thing), the last's at the tap's last
    write, the response headers' at the wrapper's return.  Where the exchange failed, the
    hook goes back on the request (the pool may send it again on another connection) and
    the connection forgets the attempt (httpcore closed the response already, or, where it
    refused the request before sending, will close another's)."""
    try:
        attempt = owner.attempts[-1]
        following = attempt.following
        if following is not None and following.arrivals.t_written is not None:
            attempt.t_send = t_send
            attempt.t_sent = following.arrivals.t_written
            attempt.cpu_sent = following.arrivals.cpu_written
        if t_headers is not None:
            attempt.t_headers = t_headers
        else:
            ext["trace"] = attempt.hook
            _take_lifted(connection)
    except Exception:  # noqa: BLE001
        internal_error("network.connection")


def _own_stream(response: Any) -> Any:
    """``response`` with httpcore's own stream in its ``network_stream`` extension where the
    connection had our tap's stand-in in its place when it made the response (the program
    may keep the extension after the tap is gone)."""
    try:
        ext = response.extensions
        stream = ext.get("network_stream")
        if is_stand_in(stream):
            ext["network_stream"] = stood_for(stream)
    except Exception:  # noqa: BLE001
        internal_error("network.connection")
    return response


def connection_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``HTTP11Connection.handle_request``: the attempt's connection."""
    owner = CURRENT.get()
    if owner is None:
        return wrapped(*args, **kwargs)
    ext = _on_connection(owner, instance, args, kwargs)
    if ext is None:
        return _own_stream(wrapped(*args, **kwargs))
    t_send = perf_counter()
    try:
        response = wrapped(*args, **kwargs)
    except BaseException:
        _lifted_marks(owner, instance, ext, t_send, None)
        raise
    _lifted_marks(owner, instance, ext, t_send, perf_counter())
    return _own_stream(response)


async def async_connection_wrapper(wrapped: Any, instance: Any, args: Any,
                                   kwargs: Any) -> Any:
    """``AsyncHTTP11Connection.handle_async_request``: as :func:`connection_wrapper`."""
    owner = CURRENT.get()
    if owner is None:
        return await wrapped(*args, **kwargs)
    ext = _on_connection(owner, instance, args, kwargs)
    if ext is None:
        return _own_stream(await wrapped(*args, **kwargs))
    t_send = perf_counter()
    try:
        response = await wrapped(*args, **kwargs)
    except BaseException:
        _lifted_marks(owner, instance, ext, t_send, None)
        raise
    _lifted_marks(owner, instance, ext, t_send, perf_counter())
    return _own_stream(response)


def _take_lifted(connection: Any) -> Any:
    """The attempt ``connection`` keeps (taken off it), or None.  An attribute set and
    deleted, never the object's ``__dict__``: asked for, that dict would be the connection's
    for good, and every later read of its attributes slower (see ``_methods``)."""
    attempt = getattr(connection, _LIFTED, None)
    if attempt is not None:
        try:
            delattr(connection, _LIFTED)
        except AttributeError:  # (taken by another thread meanwhile)
            return None
    return attempt


def _closing(connection: Any) -> None:
    attempt = _take_lifted(connection)
    if attempt is not None:
        try:
            # Before httpcore's own close: the connection is still open for the kernel's
            # counts (it closes it here when it cannot be kept alive).
            attempt.closed(perf_counter())
        except Exception:  # noqa: BLE001
            internal_error("network.closed")


def closed_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``HTTP11Connection._response_closed``: the close of a response whose hook is lifted
    (the response stream's close, or the exchange's failure)."""
    _closing(instance)
    return wrapped(*args, **kwargs)


async def async_closed_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``AsyncHTTP11Connection._response_closed``: as :func:`closed_wrapper`."""
    _closing(instance)
    return await wrapped(*args, **kwargs)


# (module, class, method, wrapper): the clients' ``send`` and httpcore's HTTP/1.1
# connections' exchanges and closes (HTTP/2 multiplexes several responses on one socket: its
# bytes are not dated).
_TARGETS = (
    *((library, cls, "send", wrapper) for library in ("httpx", "httpx2")
      for cls, wrapper in (("Client", send_wrapper), ("AsyncClient", async_send_wrapper))),
    *((f"{core}.{side}.http11", cls, method, wrapper) for core in ("httpcore", "httpcore2")
      for side, cls, method, wrapper in (
          ("_sync", "HTTP11Connection", "handle_request", connection_wrapper),
          ("_async", "AsyncHTTP11Connection", "handle_async_request", async_connection_wrapper),
          ("_sync", "HTTP11Connection", "_response_closed", closed_wrapper),
          ("_async", "AsyncHTTP11Connection", "_response_closed", async_closed_wrapper))),
)
_patched: list[tuple[Any, str]] = []


def _apply() -> None:
    for module_name, cls_name, method, wrapper in _TARGETS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, cls_name, None)
        if cls is None or not hasattr(cls, method):
            continue
        wrap_function_wrapper(cls, method, wrapper)
        _patched.append((cls, method))


def _remove() -> None:
    while _patched:
        cls, name = _patched.pop()
        unwrap(cls, name)


#: ``send`` of every installed httpx flavour (reference counted: the first user applies
#: it, the last removes it).
PATCH = SharedPatch(_apply, _remove)
