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

While a user wants them (:func:`want_setups`: the wire's recogniser), the setup of a
connection opened with nothing recording is kept too, by file descriptor (:class:`Setup`),
for a request recognised on it as its first (:func:`take_setup`).

A non-blocking ``connect`` (the event loop's first step of ``sock_connect``) is not timed by
the socket wrapper: the loop's wrapper times the whole wait.  The loop runs
``getaddrinfo`` in a worker thread that does not inherit the context, so DNS is never
counted twice either.
"""

from __future__ import annotations

import contextvars
import socket
import ssl
from threading import get_ident
from time import perf_counter
from typing import Any

from ..._log import internal_error
from .._shared import SharedPatch
from ._context import CURRENT
from ._kernel import data_segs_out
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


# -- setups of connections nothing recorded --------------------------------------------------
class Setup:
    """How one connection opened while no owner or sink was current: kept (by file
    descriptor) for a request recognised on the wire as the connection's first."""

    __slots__ = ("connect", "dns", "segs_out", "t_start", "tls")

    def __init__(self, t_start: float, dns: float, connect: float) -> None:
        self.t_start = t_start
        self.dns = dns
        self.connect = connect
        self.tls = 0.0
        self.segs_out: int | None = None  # data segments sent when the setup ended


#: Whether setups are kept (a count of the users that want them: the wire's recogniser).
_setup_users = 0
_setups: dict[int, Setup] = {}
# The last name lookup of each thread, ``(start, end)``: a connect right after it on the same
# thread (``socket.create_connection``) resolved its name with it.
_lookups: dict[int, tuple[float, float]] = {}
_SETUPS_CAP = 256
# A lookup that ended this long before the connect started is not its own.
_LOOKUP_GAP = 0.05


def want_setups(on: bool) -> None:
    """Keep (or stop keeping) the setups of connections nothing records."""
    global _setup_users
    _setup_users = max(_setup_users + (1 if on else -1), 0)
    if not _setup_users:
        _setups.clear()
        _lookups.clear()


def take_setup(sock: Any) -> Setup | None:
    """The setup of ``sock``'s connection when nothing was sent on it since (its first
    request is being written), else None.  Taken once."""
    try:
        setup = _setups.pop(sock.fileno(), None)
    except (OSError, ValueError):
        return None
    if setup is None:
        return None
    # Data sent since the setup ended (none for a plain TCP connect; a TLS handshake's own,
    # counted when it ended): another request went first, the connection is not new here.
    sent = data_segs_out(sock)
    if sent is not None and sent != (setup.segs_out or 0):
        return None
    return setup


def _looked_up(t_start: float) -> None:
    if len(_lookups) > _SETUPS_CAP:
        _lookups.clear()
    _lookups[get_ident()] = (t_start, perf_counter())


def _connected(sock: Any, t_start: float, *, looked_up: bool = True) -> None:
    # ``looked_up``: a lookup just before on the same thread was this connection's (not on
    # an event loop, whose thread runs every task's lookups).
    now = perf_counter()
    lookup = _lookups.pop(get_ident(), None) if looked_up else None
    dns = 0.0
    if lookup is not None and 0.0 <= t_start - lookup[1] <= _LOOKUP_GAP:
        dns, t_start = lookup[1] - lookup[0], lookup[0]
    connect = now - t_start - dns
    setup = Setup(t_start, dns, connect)
    if len(_setups) > _SETUPS_CAP:
        _setups.clear()
    try:
        _setups[sock.fileno()] = setup
    except (OSError, ValueError):
        pass


def _handshaken(sock: Any, t_start: float) -> None:
    try:
        setup = _setups.get(sock.fileno())
    except (OSError, ValueError):
        return
    if setup is not None:
        setup.tls += perf_counter() - t_start
        setup.segs_out = data_segs_out(sock)


# -- sync ---------------------------------------------------------------------------------
_orig: dict[str, Any] = {}


def _getaddrinfo(*args: Any, **kwargs: Any) -> Any:
    owner = _current()
    sink = owner.net if owner is not None else _recording()
    if sink is None:
        if not _setup_users:
            return _orig["getaddrinfo"](*args, **kwargs)
        t = perf_counter()
        try:
            return _orig["getaddrinfo"](*args, **kwargs)
        finally:
            _looked_up(t)
    t = perf_counter()
    try:
        return _orig["getaddrinfo"](*args, **kwargs)
    finally:
        sink.resolved(t)


def _timed_connect(name: str) -> Any:
    def connect(self: Any, *args: Any, **kwargs: Any) -> Any:
        owner = _current()
        sink = owner.net if owner is not None else _recording()
        if sink is None:
            if not _setup_users or self.gettimeout() == 0.0:
                return _orig[name](self, *args, **kwargs)
            t = perf_counter()
            result = _orig[name](self, *args, **kwargs)
            if not result:  # connect_ex's error number; connect's None
                _connected(self, t)
            return result
        if self.gettimeout() == 0.0:
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
        if not _setup_users:
            return _orig["do_handshake"](self, *args, **kwargs)
        t = perf_counter()
        result = _orig["do_handshake"](self, *args, **kwargs)
        _handshaken(self, t)
        return result
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
        if not _setup_users:
            return await _orig["loop.sock_connect"](self, sock, address)
        t = perf_counter()
        result = await _orig["loop.sock_connect"](self, sock, address)
        _connected(sock, t, looked_up=False)
        return result
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
    if sink is None and _setup_users and ssl:
        t = perf_counter()
        result = await _orig["loop._create_connection_transport"](
            self, sock, protocol_factory, ssl, *args, **kwargs)
        _handshaken(sock, t)
        return result
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
