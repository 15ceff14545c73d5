"""HTTP attempts sent with aiohttp while an owner (an LLM call) is current: litellm's
``acompletion`` (its httpx transport runs on aiohttp), google-genai's async client, anything
on a ``ClientSession``.

aiohttp's own ``TraceConfig`` signals give the marks httpcore's trace events give on the
httpx path; each ``ClientSession`` made after instrumenting gets ours (its ``__init__`` is
wrapped).  The callbacks run in the task that sends the request, so the owner current
there (:data:`._context.CURRENT`) is the one the attempt belongs to; when none is, each
signal costs one ``ContextVar.get``.

- ``request_start``: the attempt starts; ``traceparent`` is injected into its headers.
- ``connection_create_start`` / ``_end``: a new connection (DNS, TCP connect and TLS inside;
  the socket layer, :mod:`._sockets`, splits them); ``connection_reuseconn``: a pooled one.
- ``request_headers_sent`` / ``request_chunk_sent``: the first and last request bytes
  handed to the transport.
- ``request_end``: the response headers; the socket (``TCP_INFO``'s RTT) from the
  response's connection.

Arrival times: ``ClientRequest.send`` (wrapped too; one ``ContextVar.get`` outside an
owner) is handed the attempt's connection before the request is written; when the owner
wants arrival times, its protocol's ``data_received`` is tapped there (:mod:`._follow`), so
the response's bytes, its last byte included, are dated from the wire as on the httpx path.
Without them a stream's last bytes are not dated (aiohttp has no per-connection close signal
that httpcore's ``response_closed`` would be): its tail stays network.
"""

from __future__ import annotations

import sys
from time import perf_counter
from typing import Any

from ..._inject import inject
from ..._log import internal_error
from .._imports import when_imported
from .._shared import SharedPatch
from ._attempt import Attempt
from ._context import CURRENT
from ._follow import follow

_KEY = "agent_latency_attempt"


def _attempt_of(ctx: Any) -> Attempt | None:
    return getattr(ctx, _KEY, None)


async def _request_start(session: Any, ctx: Any, params: Any) -> None:
    owner = CURRENT.get()
    if owner is None:
        return
    try:
        url = params.url
        secure = url.scheme in ("https", "wss")
        attempts = owner.attempts
        last = attempts[-1] if attempts else None
        if last is not None and last.t_send is None and last.t_return is None:
            # httpx's ``send`` on an aiohttp transport (litellm): the same attempt, whose
            # marks httpcore's trace events will never give.
            attempt = last
        else:
            attempt = Attempt(url.host or "", url.port or (443 if secure else 80))
            attempt.net = owner.net
            owner.add_attempt(attempt)
        attempt.secure = secure
        setattr(ctx, _KEY, attempt)
        if owner.propagate:
            inject(params.headers, owner.context)
    except Exception:  # noqa: BLE001
        internal_error("aiohttp.request_start")


async def _connection_create_start(session: Any, ctx: Any, params: Any) -> None:
    attempt = _attempt_of(ctx)
    if attempt is not None:
        attempt.connect_started(perf_counter())


async def _connection_create_end(session: Any, ctx: Any, params: Any) -> None:
    attempt = _attempt_of(ctx)
    if attempt is not None:
        attempt.connected_with_tls(perf_counter())


async def _connection_reuse(session: Any, ctx: Any, params: Any) -> None:
    attempt = _attempt_of(ctx)
    if attempt is not None:
        attempt.reused = True


def _stamps_taken(attempt: Attempt) -> None:
    """The kernel's transmit stamps of what was just written, taken off the socket's error
    queue (left there, they would make the event loop see the socket in error, and spin)."""
    following = attempt.following
    if following is not None:
        try:
            following.arrivals.sent()
        except Exception:  # noqa: BLE001
            internal_error("aiohttp.sent")


async def _headers_sent(session: Any, ctx: Any, params: Any) -> None:
    attempt = _attempt_of(ctx)
    if attempt is not None:
        attempt.t_send = attempt.t_sent = perf_counter()
        _stamps_taken(attempt)


async def _chunk_sent(session: Any, ctx: Any, params: Any) -> None:
    attempt = _attempt_of(ctx)
    if attempt is not None:
        attempt.t_sent = perf_counter()
        _stamps_taken(attempt)


async def _request_end(session: Any, ctx: Any, params: Any) -> None:
    attempt = _attempt_of(ctx)
    if attempt is None:
        return
    try:
        attempt.t_headers = attempt.t_return = perf_counter()
        response = params.response
        attempt.status = int(response.status)
        headers = response.headers
        attempt.request_id = headers.get("x-request-id") or headers.get("request-id")
        connection = getattr(response, "connection", None)
        transport = getattr(connection, "transport", None)
        if transport is not None:
            attempt.sock = transport.get_extra_info("socket")
        attempt.measure_rtt()
    except Exception:  # noqa: BLE001
        internal_error("aiohttp.request_end")


async def _request_exception(session: Any, ctx: Any, params: Any) -> None:
    attempt = _attempt_of(ctx)
    if attempt is not None:
        attempt.failed(params.exception)


def _follow_connection(owner: Any, connection: Any) -> None:
    """The owner's current attempt is about to be sent on ``connection`` (aiohttp's
    ``Connection``): its protocol and socket, and arrival times from here on."""
    try:
        attempts = owner.attempts
        if not attempts or connection is None:
            return
        attempt = attempts[-1]
        protocol = connection.protocol
        transport = connection.transport
        if protocol is None or transport is None:
            return
        if attempt.following is not None:
            if attempt.stream is protocol:
                return
            # A redirect goes out on another connection: the response read is that one's.
            attempt.stop_following()
        sock = transport.get_extra_info("socket")
        attempt.stream = protocol
        if sock is not None:
            attempt.sock = sock
        following = attempt.following = follow(attempt, owner.classify_event)
        if following is not None and owner.streaming:
            # A stream's first token is watched for from here: a client that sends on its
            # first fetch (google-genai's async generator) may be busy with other tasks, or
            # its first parse, when it lands.  Its request leaves with the kernel's transmit
            # stamps on (the loop may be busy when aiohttp's chunk-sent signal runs); a
            # stamp that lands after the signal is taken off the error queue by the watcher
            # (left there, the loop would see the socket in error until the reply came).
            following.arrivals.sending()
            following.watch(ticks=True)
    except Exception:  # noqa: BLE001
        internal_error("aiohttp.connection")


async def send_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``ClientRequest.send(conn)``: the connection a request goes out on, before it is
    written (a new one or a pooled one)."""
    owner = CURRENT.get()
    if owner is not None and owner.wants_arrivals:
        _follow_connection(owner, args[0] if args else kwargs.get("conn"))
    return await wrapped(*args, **kwargs)


_config: Any = None


def trace_config() -> Any:
    """Our ``aiohttp.TraceConfig`` (one, shared by every session)."""
    global _config
    if _config is None:
        # Imported by the program already: made when its first session starts.
        import aiohttp

        config = aiohttp.TraceConfig()
        config.on_request_start.append(_request_start)
        config.on_connection_create_start.append(_connection_create_start)
        config.on_connection_create_end.append(_connection_create_end)
        config.on_connection_reuseconn.append(_connection_reuse)
        config.on_request_headers_sent.append(_headers_sent)
        config.on_request_chunk_sent.append(_chunk_sent)
        config.on_request_end.append(_request_end)
        config.on_request_exception.append(_request_exception)
        config.freeze()
        _config = config
    return _config


def _session_init(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    try:
        config = trace_config()
        configs = list(kwargs.get("trace_configs") or ())
        if config not in configs:
            configs.append(config)
        kwargs["trace_configs"] = configs
    except Exception:  # noqa: BLE001
        internal_error("aiohttp.session")
    return wrapped(*args, **kwargs)


_state: dict[str, Any] = {"wanted": False, "patched": None, "request": None}


def _patch_now(_module: Any = None) -> None:
    if not _state["wanted"] or _state["patched"] is not None:
        return
    try:
        # On aiohttp's import (the program's): wrapt's own import is start-up time.
        import aiohttp
        from wrapt import wrap_function_wrapper

        wrap_function_wrapper(aiohttp.ClientSession, "__init__", _session_init)
        _state["patched"] = aiohttp.ClientSession
        request_cls = getattr(aiohttp, "ClientRequest", None)
        if request_cls is not None and hasattr(request_cls, "send"):
            wrap_function_wrapper(request_cls, "send", send_wrapper)
            _state["request"] = request_cls
    except Exception:  # noqa: BLE001
        internal_error("aiohttp.patch")


def _apply() -> None:
    _state["wanted"] = True
    if "aiohttp" in sys.modules:
        _patch_now()
    else:
        when_imported("aiohttp", _patch_now)  # no import cost until the program imports it


def _remove() -> None:
    _state["wanted"] = False
    cls = _state["patched"]
    if cls is not None:
        # opentelemetry.instrumentation costs start-up time: only where a patch comes off.
        from opentelemetry.instrumentation.utils import unwrap

        unwrap(cls, "__init__")
        _state["patched"] = None
    request_cls = _state["request"]
    if request_cls is not None:
        # opentelemetry.instrumentation costs start-up time: only where a patch comes off.
        from opentelemetry.instrumentation.utils import unwrap

        unwrap(request_cls, "send")
        _state["request"] = None


#: The aiohttp patch (reference counted: the first user applies it, the last removes it).
PATCH = SharedPatch(_apply, _remove)
