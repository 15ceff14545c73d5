"""Socket-level network phases for any client: DNS, TCP connect and TLS handshake.

Patched once (reference counted): ``socket.getaddrinfo``, ``socket.socket.connect`` /
``connect_ex``, ``ssl.SSLSocket.do_handshake`` (sync clients: requests/urllib3, the
``websockets`` sync client, anything on the standard library) and the asyncio event loop's
``getaddrinfo``, ``sock_connect`` and ``_create_connection_transport`` (with TLS: the
handshake; aiohttp, the ``websockets`` asyncio client, anything on ``loop.create_connection``).

Each wrapper reads two context variables — the owner current while its client sends
(:data:`._context.CURRENT`, an LLM call, whose ``net`` collects them) and :data:`SINK` (a
connection's setup) — and, when neither is set, calls straight through: two
``ContextVar.get`` and one Python call added per socket operation.

A non-blocking ``connect`` (the event loop's first step of ``sock_connect``) is not timed by
the socket wrapper: the loop's wrapper times the whole wait.  The loop runs
``getaddrinfo`` in a worker thread that does not inherit the context, so DNS is never
counted twice either.
"""

from __future__ import annotations

import contextvars
import socket
import ssl
from time import perf_counter
from typing import Any

from ..._log import internal_error
from .._shared import SharedPatch
from ._context import CURRENT
from ._phases import NetPhases

#: Where socket-level durations go now (None: nothing records; the wrappers pass through).
SINK: contextvars.ContextVar[NetPhases | None] = contextvars.ContextVar(
    "agent_latency_net_sink", default=None)


# Each wrapper finds where it records inline (the owner's ``net``, else the sink): on the
# path where nothing records, a helper function would be one more call per socket operation.
_current = CURRENT.get
_recording = SINK.get


class Recording:
    """``with Recording(phases):`` socket operations inside add up in ``phases``."""

    __slots__ = ("_token", "phases")

    def __init__(self, phases: NetPhases) -> None:
        self.phases = phases

    def __enter__(self) -> NetPhases:
        self._token = SINK.set(self.phases)
        return self.phases

    def __exit__(self, *exc: Any) -> None:
        SINK.reset(self._token)


# -- sync ---------------------------------------------------------------------------------
_orig: dict[str, Any] = {}


def _getaddrinfo(*args: Any, **kwargs: Any) -> Any:
    owner = _current()
    sink = owner.net if owner is not None else _recording()
    if sink is None:
        return _orig["getaddrinfo"](*args, **kwargs)
    t = perf_counter()
    try:
        return _orig["getaddrinfo"](*args, **kwargs)
    finally:
        sink.resolved(t)


def _timed_connect(name: str) -> Any:
    def connect(self: Any, *args: Any, **kwargs: Any) -> Any:
        owner = _current()
        sink = owner.net if owner is not None else _recording()
        if sink is None or self.gettimeout() == 0.0:
            return _orig[name](self, *args, **kwargs)
        t = perf_counter()
        try:
            return _orig[name](self, *args, **kwargs)
        finally:
            sink.connected(t, self)
    connect.__name__ = name.rpartition(".")[2]
    return connect


def _do_handshake(self: Any, *args: Any, **kwargs: Any) -> Any:
    owner = _current()
    sink = owner.net if owner is not None else _recording()
    if sink is None:
        return _orig["do_handshake"](self, *args, **kwargs)
    t = perf_counter()
    try:
        return _orig["do_handshake"](self, *args, **kwargs)
    finally:
        sink.handshaken(t)


# -- asyncio --------------------------------------------------------------------------------
async def _loop_getaddrinfo(self: Any, *args: Any, **kwargs: Any) -> Any:
    owner = _current()
    sink = owner.net if owner is not None else _recording()
    if sink is None:
        return await _orig["loop.getaddrinfo"](self, *args, **kwargs)
    t = perf_counter()
    try:
        return await _orig["loop.getaddrinfo"](self, *args, **kwargs)
    finally:
        sink.resolved(t)


async def _loop_sock_connect(self: Any, sock: Any, address: Any) -> Any:
    owner = _current()
    sink = owner.net if owner is not None else _recording()
    if sink is None:
        return await _orig["loop.sock_connect"](self, sock, address)
    t = perf_counter()
    try:
        return await _orig["loop.sock_connect"](self, sock, address)
    finally:
        sink.connected(t, sock)


async def _loop_connection_transport(self: Any, sock: Any, protocol_factory: Any, ssl: Any,
                                     *args: Any, **kwargs: Any) -> Any:
    # With ``ssl`` the transport is returned once the TLS handshake is done.
    owner = _current()
    sink = owner.net if owner is not None else _recording()
    if sink is None or not ssl:
        return await _orig["loop._create_connection_transport"](
            self, sock, protocol_factory, ssl, *args, **kwargs)
    t = perf_counter()
    try:
        return await _orig["loop._create_connection_transport"](
            self, sock, protocol_factory, ssl, *args, **kwargs)
    finally:
        sink.handshaken(t)


def _targets() -> list[tuple[Any, str, str, Any]]:
    # asyncio is start-up time a program without it never pays.
    import asyncio.base_events
    import asyncio.selector_events

    base = asyncio.base_events.BaseEventLoop
    selector = asyncio.selector_events.BaseSelectorEventLoop
    return [
        (socket, "getaddrinfo", "getaddrinfo", _getaddrinfo),
        (socket.socket, "connect", "socket.connect", _timed_connect("socket.connect")),
        (socket.socket, "connect_ex", "socket.connect_ex", _timed_connect("socket.connect_ex")),
        (ssl.SSLSocket, "do_handshake", "do_handshake", _do_handshake),
        (base, "getaddrinfo", "loop.getaddrinfo", _loop_getaddrinfo),
        (selector, "sock_connect", "loop.sock_connect", _loop_sock_connect),
        (base, "_create_connection_transport", "loop._create_connection_transport",
         _loop_connection_transport),
    ]


# (owner, attribute, what its own __dict__ held: None when it was inherited)
_applied: list[tuple[Any, str, Any]] = []


def _apply() -> None:
    for owner, attribute, key, wrapper in _targets():
        original = getattr(owner, attribute, None)  # ``socket.socket.connect`` is inherited
        if original is None:
            continue
        try:
            _orig[key] = original
            own = owner.__dict__.get(attribute)
            setattr(owner, attribute, wrapper)
            _applied.append((owner, attribute, own))
        except (TypeError, AttributeError):
            internal_error("sockets.apply")


def _remove() -> None:
    while _applied:
        owner, attribute, own = _applied.pop()
        if own is None:
            delattr(owner, attribute)
        else:
            setattr(owner, attribute, own)


#: The socket patches (reference counted: the first user applies it, the last removes it).
PATCH = SharedPatch(_apply, _remove)
