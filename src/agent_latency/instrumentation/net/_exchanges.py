"""HTTP/1.1 requests recognised where they are written on a socket, and their responses read
back off it: the wire as seen by clients that no higher layer sees (``http.client`` and
``urllib.request``, a client written on plain sockets such as the one dspy bundles).

- ``socket.socket.sendall`` and ``send`` (blocking sockets: httpcore writes with ``send``)
  and ``ssl.SSLSocket.sendall`` are patched.  A buffer that does
  not start with ``POST`` (nearly every write) is passed straight on: a slice, a compare
  and one Python call added.  One that does, while no owner is current
  (:data:`._context.CURRENT`: a higher layer has the request), has its request line and
  headers shown to the recogniser that a user registered (:func:`recognise_with`).
- A request the recogniser takes gets its :class:`Attempt` (a new connection's DNS, connect
  and TLS from the socket layer's :func:`._sockets.take_setup`), the header lines the
  recogniser asks for (``traceparent``) written right after the request line, and its
  socket moved to a subclass of the socket's own class (``__class__`` assignment: the same
  layout) whose ``sendall``, ``recv``, ``recv_into`` and ``close`` feed the exchange.  The
  socket is moved back when the response ends: every other socket's reads cost nothing.
- The response is parsed as it is read (``_exchange``: status line, headers, a
  ``Content-Length`` or chunked body, or a body that ends with the connection) and handed to
  the recogniser's :class:`Observer` as de-chunked bytes with the time the read returned.

- The event loop's transports (``asyncio`` streams and protocols, plain and TLS): their
  ``write`` is patched the same way; a recognised request's protocol gets a stand-in in the
  transport (``set_protocol``: ``_methods``) whose ``data_received`` and ``connection_lost``
  feed the exchange until the response ends.
  A buffered protocol (``asyncio.BufferedProtocol``) is not watched.

A client that writes its request with ``send`` on a TLS socket (httpcore over TLS) is not
recognised: ``SSLSocket.sendall`` writes through its own ``send``.
"""

from __future__ import annotations

import _socket
import asyncio
import socket
import ssl
from collections.abc import Callable
from time import perf_counter
from typing import Any

from ..._log import internal_error
from .._shared import SharedPatch
from ._attempt import Attempt
from ._context import CURRENT
from ._exchange import IN_FLIGHT as _exchanges
from ._exchange import Exchange, Observer, Request, ResponseCut, parse_headers
from ._methods import is_stand_in, stand_in_protocol
from ._sockets import PATCH as sockets_patch
from ._sockets import take_setup, want_setups
from ._taps import UNSET, before_socket_read

# A request head longer than this (in the first buffer written) is not looked at.
_HEAD_CAP = 16 * 1024
# Exchanges in flight at once, at most (the oldest is let go past it).
_IN_FLIGHT_CAP = 1024

#: ``recognise(request) -> Observer | None``.
Recogniser = Callable[[Request], "Observer | None"]
#: ``accepts(path) -> bool``: whether a request to this path may be one to recognise (asked
#: first, before the headers are read).
Accepts = Callable[[str], bool]
_recogniser: Recogniser | None = None
_accepts: Accepts | None = None

# -- sockets being watched ----------------------------------------------------------------
_watched_classes: dict[type, type] = {}
_orig: dict[str, Any] = {}
_wrappers: dict[str, Any] = {}


def _unwatch_socket(exchange: Exchange) -> None:
    """The socket's own class put back."""
    sock, cls = exchange.holder, exchange.saved
    if sock is not None and cls is not None and type(sock) is not cls:
        sock.__class__ = cls


def _true_send(base: type) -> Any:
    method = getattr(base, "send", None)
    return _orig["socket.send"] if method is _wrappers.get("socket.send") else method


def _true_sendall(base: type) -> Any:
    method = getattr(base, "sendall", None)
    for key in ("socket.sendall", "ssl.sendall"):
        if method is _wrappers.get(key):
            return _orig[key]
    return method


def _watched_class(base: type[socket.socket]) -> type:
    cls = _watched_classes.get(base)
    if cls is not None:
        return cls
    real_sendall = _true_sendall(base)
    real_send = _true_send(base)
    real_recv, real_recv_into, real_close = base.recv, base.recv_into, base.close

    def sendall(self: Any, data: Any, flags: int = 0) -> Any:
        exchange = _exchanges.get(id(self))
        if exchange is None:
            return real_sendall(self, data, flags)
        if exchange.sent or _is_post(data):
            # A new request on the connection (the last response was not read to its end).
            exchange.end(perf_counter(), ResponseCut("a new request was written"))
            return _sendall_new(self, data, flags, real_sendall)
        try:
            exchange.wrote(data)
        except Exception:  # noqa: BLE001
            internal_error("wire.write")
        result = _sending(exchange, real_sendall, self, data, flags)
        exchange.request_written(perf_counter())
        return result

    def send(self: Any, data: Any, flags: int = 0) -> Any:
        exchange = _exchanges.get(id(self))
        if exchange is None:
            return real_send(self, data, flags)
        if exchange.sent or _is_post(data):
            exchange.end(perf_counter(), ResponseCut("a new request was written"))
            return _sendall_new(self, data, flags, real_sendall, real_send)
        n = _sending(exchange, real_send, self, data, flags, whole=False)
        try:
            exchange.wrote(memoryview(data)[:n])
        except Exception:  # noqa: BLE001
            internal_error("wire.write")
        exchange.request_written(perf_counter())
        return n

    def recv(self: Any, *args: Any, **kwargs: Any) -> Any:
        exchange = _exchanges.get(id(self))
        if exchange is None or exchange.arrivals is None or _peek(args, kwargs, 1):
            data = real_recv(self, *args, **kwargs)
        else:
            data = _dated_read(self, exchange.arrivals, real_recv, args, kwargs)
        if exchange is not None:
            _received(exchange, data)
        return data

    def recv_into(self: Any, buffer: Any, *args: Any, **kwargs: Any) -> Any:
        exchange = _exchanges.get(id(self))
        if exchange is None or exchange.arrivals is None or _peek(args, kwargs, 1):
            n = real_recv_into(self, buffer, *args, **kwargs)
        else:
            n = _dated_read(self, exchange.arrivals, real_recv_into, (buffer, *args), kwargs)
        if exchange is not None:
            _received(exchange, bytes(memoryview(buffer)[:n]))
        return n

    def close(self: Any) -> None:
        exchange = _exchanges.get(id(self))
        # A file from ``makefile`` keeps the connection open past ``close()`` (urllib
        # closes the socket as soon as the response head is read): it ends with the last.
        if exchange is not None and getattr(self, "_io_refs", 0) <= 0:
            exchange.end(perf_counter(), ResponseCut("the socket was closed"))
        real_close(self)

    cls = type(base.__name__, (base,), {
        "__slots__": (), "__module__": base.__module__, "__qualname__": base.__qualname__,
        "sendall": sendall, "recv": recv, "recv_into": recv_into, "close": close,
        # ``send`` only where ``sendall`` is the C one: ``SSLSocket.sendall`` and gevent's
        # write through their own ``send``, which must not count the same bytes twice.
        **({"send": send} if real_sendall is _socket.socket.sendall else {})})
    _watched_classes[base] = cls
    return cls


def _received(exchange: Exchange, data: bytes) -> None:
    """Bytes the program read off a recognised exchange's socket: dated (when its arrival
    times are taken) before the exchange parses them, so that an output event found in them
    finds its arrival recorded."""
    t = perf_counter()
    arrivals = exchange.arrivals
    try:
        if arrivals is not None:
            arrivals.read(data, t)
        exchange.received(data, t)
    except Exception:  # noqa: BLE001
        internal_error("wire.read")
        exchange.end(perf_counter(), None)


def _peek(args: Any, kwargs: Any, at: int) -> bool:
    """Whether a read's flags (positional at ``at``) ask for a peek (it takes nothing)."""
    flags = args[at] if len(args) > at else kwargs.get("flags", 0)
    return bool(flags & socket.MSG_PEEK) if isinstance(flags, int) else False


def _dated_read(sock: Any, arrivals: Any, read: Any, args: Any, kwargs: Any) -> Any:
    """A blocking read of a recognised exchange's socket while its arrival times are taken:
    the kernel's receive queue looked at (and waited for, without the GIL) first."""
    restore = before_socket_read(arrivals, sock)
    try:
        return read(sock, *args, **kwargs)
    finally:
        if restore is not UNSET:
            sock.settimeout(restore)


def _sending(exchange: Exchange, write: Any, sock: Any, data: Any, flags: int,
             whole: bool = True) -> Any:
    """Request bytes written with the kernel's transmit stamps on, while arrival times are
    taken (the request's last byte is dated when it left, not when the writer got the GIL
    back).  A ``whole`` write (``sendall``) longer than ``STAMPED_TAIL`` sends its head with
    them off: a blocked ``sendall`` would spin on the stamps of its own first bytes."""
    arrivals = exchange.arrivals
    if arrivals is None:
        return write(sock, data, flags)
    head = None
    try:
        if whole:
            head, data = arrivals.split_write(data)
    except Exception:  # noqa: BLE001
        internal_error("wire.write")
    if head is not None:
        write(sock, head, flags)
    try:
        arrivals.sending()
    except Exception:  # noqa: BLE001
        internal_error("wire.write")
    result = write(sock, data, flags)
    try:
        arrivals.sent()
    except Exception:  # noqa: BLE001
        internal_error("wire.write")
    return result


# -- recognising a request ---------------------------------------------------------------------
def _is_post(data: Any) -> bool:
    try:
        return bool(data[:5] == b"POST ")
    except Exception:  # noqa: BLE001 - an object sendall would refuse anyway
        return False


def _server(sock: Any, headers: dict[str, str], secure: bool) -> tuple[str, int]:
    default = 443 if secure else 80
    host = headers.get("host", "")
    if host:
        if host.startswith("["):  # an IPv6 literal
            name, _, rest = host[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
        else:
            name, _, port = host.partition(":")
        return name, int(port) if port.isdigit() else default
    try:
        peer = sock.getpeername()
        return str(peer[0]), int(peer[1])
    except (OSError, IndexError, TypeError):
        return "", default


def _recognise(sock: Any, data: Any, secure: bool, watch: Callable[[], bool],
               unwatch: Callable[[], None]) -> tuple[Exchange, bytes] | None:
    """The exchange for a request head in ``data`` when the recogniser takes it, with the
    bytes to write in its place.  ``watch()`` (False: it cannot be) starts watching the
    connection's reads once the path is one to recognise; ``unwatch()`` undoes it when the
    recogniser says no."""
    recogniser, accepts = _recogniser, _accepts
    if recogniser is None or accepts is None:
        return None
    raw = data if isinstance(data, bytes) else bytes(data)
    line_end = raw.find(b"\r\n", 0, _HEAD_CAP)
    parts = raw[:line_end].split(b" ") if line_end > 0 else ()
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return None
    target = parts[1].decode("latin-1")
    if not accepts(target.partition("?")[0]):
        return None
    end = raw.find(b"\r\n\r\n", 0, _HEAD_CAP)
    if end < 0:
        return None
    lines = raw[:end].split(b"\r\n")
    headers = parse_headers(lines[1:])
    host, port = _server(sock, headers, secure)
    t = perf_counter()
    if not watch():
        return None
    setup = take_setup(sock)
    request = Request("POST", target, headers, host, port, secure,
                      setup.t_start if setup is not None else t)
    observer = None
    try:
        observer = recogniser(request)
    finally:
        if observer is None:
            unwatch()
    if observer is None:
        return None
    attempt = Attempt(host, port)
    attempt.secure = secure
    attempt.sock = sock
    if setup is not None:
        attempt.t_start = setup.t_start
        attempt.reused = False
        attempt.dns, attempt.connect, attempt.tls = setup.dns, setup.connect, setup.tls
    exchange = Exchange(observer, attempt)
    # Its reads are ours: arrival times are taken on them (``_follow``, ``_taps``).
    attempt.stream = exchange
    observer.add_attempt(attempt)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        exchange.body_left = None
    else:
        try:
            exchange.body_left = int(headers.get("content-length", "0"))
        except ValueError:
            exchange.body_left = None
    out = data
    lines_in = observer.header_lines()
    if lines_in:
        cut = raw.find(b"\r\n") + 2
        out = raw[:cut] + lines_in + raw[cut:]
    body = raw[end + 4:]
    if body:
        exchange.wrote(body)
    return exchange, out


def _sendall_new(sock: Any, data: Any, flags: int, real: Any, send: Any = None) -> Any:
    """A POST written on a socket with no exchange: recognised, or passed on.

    ``real`` writes it all (``sendall``); with ``send`` the program called ``send``: a
    request that is not recognised goes to ``send`` as it came, a recognised one (its head
    grown by our header lines) is written whole and counted as ``data`` written."""
    found = None
    cls = type(sock)

    def watch() -> bool:
        # Moved to the watching subclass of its own class; a class whose layout does not
        # allow it (a library's own socket type) is not recognised.
        try:
            sock.__class__ = _watched_class(cls)
        except TypeError:
            return False
        return True

    def unwatch() -> None:
        sock.__class__ = cls

    try:
        found = _recognise(sock, data, isinstance(sock, ssl.SSLSocket), watch, unwatch)
    except Exception:  # noqa: BLE001
        internal_error("wire.recognise")
        if type(sock) is not cls:
            unwatch()
    if found is None:
        return (send or real)(sock, data, flags)
    exchange, out = found
    exchange.saved, exchange.undo = cls, _unwatch_socket
    _hold(sock, exchange)
    exchange.attempt.send_started(perf_counter())
    try:
        result = _sending(exchange, real, sock, out, flags)
    except BaseException as exc:
        exchange.end(perf_counter(), exc)
        raise
    exchange.request_written(perf_counter())
    return memoryview(data).nbytes if send is not None else result


def _hold(holder: Any, exchange: Exchange) -> None:
    """``holder``'s reads and writes feed ``exchange`` from now on."""
    exchange.holder = holder
    _exchanges[id(holder)] = exchange
    if len(_exchanges) > _IN_FLIGHT_CAP:
        # A program that never reads its responses to the end: the oldest is let go.
        try:
            oldest = next(iter(_exchanges.values()))
        except RuntimeError:  # another thread changed it: next time
            return
        oldest.end(perf_counter(), None)


def _plain_wrapper(real: Any) -> Any:
    def sendall(self: Any, data: Any, flags: int = 0) -> Any:
        # Per write on every socket: one slice and a compare, unless it is a POST.
        try:
            post = data[:5] == b"POST "
        except Exception:  # noqa: BLE001 - sendall itself refuses it below
            post = False
        if not post or _current() is not None:
            return real(self, data, flags)
        return _sendall_new(self, data, flags, real)

    return sendall


def _send_wrapper(real: Any) -> Any:
    real_sendall = _orig["socket.sendall"]

    def send(self: Any, data: Any, flags: int = 0, *args: Any, **kwargs: Any) -> Any:
        # Per write on every plain socket: one slice and a compare, unless it is a POST
        # (httpcore writes with ``send``).  Non-blocking sockets are the event loop's: their
        # requests are recognised on the transport.  A socket class of its own (gevent's:
        # its ``sendall`` writes through this ``send``, with a ``timeout`` keyword) has its
        # requests recognised on ``sendall``, once.
        try:
            post = data[:5] == b"POST "
        except Exception:  # noqa: BLE001 - send itself refuses it below
            post = False
        if (not post or args or kwargs or _current() is not None
                or not isinstance(self, _socket.socket) or self.gettimeout() == 0.0):
            return real(self, data, flags, *args, **kwargs)
        return _sendall_new(self, data, flags, real_sendall, real)

    return send


def _ssl_wrapper(real: Any) -> Any:
    def sendall(self: Any, data: Any, flags: int = 0) -> Any:
        try:
            post = data[:5] == b"POST "
        except Exception:  # noqa: BLE001 - sendall itself refuses it below
            post = False
        if not post or _current() is not None or self._sslobj is None:
            # (without TLS yet, SSLSocket.sendall is the plain one: recognised there)
            return real(self, data, flags)
        return _sendall_new(self, data, flags, real)

    return sendall


# -- the event loop's transports -----------------------------------------------------------------
def _watch_protocol(transport: Any, protocol: Any, exchange: Exchange) -> bool:
    """The response's bytes as the event loop hands them to ``protocol``, through a stand-in
    in ``transport`` (never the protocol object or its class changed); False where the
    transport cannot take one."""
    delivered, lost = protocol.data_received, protocol.connection_lost

    def data_received(data: bytes) -> None:
        t = perf_counter()
        arrivals = exchange.arrivals
        if arrivals is not None and data:
            try:
                arrivals.read(data, t)  # as the loop took them off the socket
            except Exception:  # noqa: BLE001
                internal_error("wire.read")
        delivered(data)
        if not exchange.ended:
            try:
                exchange.received(data, t)
            except Exception:  # noqa: BLE001
                internal_error("wire.read")
                exchange.end(perf_counter(), None)

    def connection_lost(exc: BaseException | None) -> None:
        if not exchange.ended:
            try:
                exchange.received(b"", perf_counter())
            except Exception:  # noqa: BLE001
                internal_error("wire.read")
        lost(exc)

    undo = stand_in_protocol(transport, {"data_received": data_received,
                                         "connection_lost": connection_lost})
    if undo is None:
        return False
    # (at the exchange's end: the protocol back in its transport, in place of its stand-in)
    exchange.undo = lambda _exchange: undo()
    return True


def _write_new(transport: Any, data: Any, real: Any, secure: bool) -> Any:
    """A POST written on a transport with no exchange: recognised, or passed on."""
    found = None
    try:
        protocol = transport.get_protocol()
        # A buffered protocol reads into its own buffer: not watched (nor recognised), nor
        # one being watched already (its stand-in in the transport), nor one whose transport
        # cannot take a stand-in.
        if (not isinstance(protocol, asyncio.BufferedProtocol) and not is_stand_in(protocol)
                and hasattr(transport, "set_protocol")):
            found = _recognise(transport.get_extra_info("socket"), data, secure,
                               lambda: True, lambda: None)
    except Exception:  # noqa: BLE001
        internal_error("wire.recognise")
    if found is None:
        return real(transport, data)
    exchange, out = found
    if not _watch_protocol(transport, protocol, exchange):  # (refused after all: ends unread)
        exchange.end(perf_counter(), None)
        return real(transport, data)
    _hold(transport, exchange)
    exchange.attempt.send_started(perf_counter())
    try:
        result = real(transport, out)
    except BaseException as exc:
        exchange.end(perf_counter(), exc)
        raise
    exchange.request_written(perf_counter())
    return result


def _transport_wrapper(real: Any, secure: bool) -> Any:
    def write(self: Any, data: Any) -> Any:
        exchange = _exchanges.get(id(self)) if _exchanges else None
        if exchange is None:
            # Per write on every transport: one slice and a compare, unless it is a POST.
            try:
                post = data[:5] == b"POST "
            except Exception:  # noqa: BLE001 - write itself refuses it below
                post = False
            if not post or _current() is not None:
                return real(self, data)
            return _write_new(self, data, real, secure)
        if exchange.sent or _is_post(data):
            exchange.end(perf_counter(), ResponseCut("a new request was written"))
            return _write_new(self, data, real, secure)
        try:
            exchange.wrote(data)
        except Exception:  # noqa: BLE001
            internal_error("wire.write")
        result = real(self, data)
        exchange.request_written(perf_counter())
        return result

    return write


def _targets() -> list[tuple[str, Any, str, Any]]:
    """``(key, owner, method, make_wrapper(original))`` for each write patched."""
    # asyncio is start-up time a program without it never pays: patched when it is imported.
    import asyncio.selector_events
    import asyncio.sslproto

    return [
        ("socket.sendall", socket.socket, "sendall", _plain_wrapper),
        ("socket.send", socket.socket, "send", _send_wrapper),
        ("ssl.sendall", ssl.SSLSocket, "sendall", _ssl_wrapper),
        ("loop.write", getattr(asyncio.selector_events, "_SelectorSocketTransport", None),
         "write",
         lambda real: _transport_wrapper(real, False)),
        ("loop.ssl_write", getattr(asyncio.sslproto, "_SSLProtocolTransport", None),
         "write",
         lambda real: _transport_wrapper(real, True)),
    ]


_current = CURRENT.get


# (owner, attribute, what its own __dict__ held: None when it was inherited)
_applied: list[tuple[Any, str, Any]] = []


def _apply() -> None:
    for key, owner, name, make in _targets():
        original = getattr(owner, name, None) if owner is not None else None
        if original is None:
            continue
        _orig[key] = original
        _wrappers[key] = wrapper = make(original)
        _applied.append((owner, name, owner.__dict__.get(name)))
        setattr(owner, name, wrapper)
    sockets_patch.acquire()
    want_setups(True)


def _remove() -> None:
    want_setups(False)
    sockets_patch.release()
    while _applied:
        owner, name, own = _applied.pop()
        if own is None:
            delattr(owner, name)  # inherited (socket.socket.sendall is _socket.socket's)
        else:
            setattr(owner, name, own)
    for exchange in list(_exchanges.values()):
        exchange.end(perf_counter(), None)


#: The sendall patches (reference counted).
PATCH = SharedPatch(_apply, _remove)


def recognise_with(recogniser: Recogniser | None, accepts: Accepts | None = None) -> None:
    """Show each POST written while no owner is current, whose path ``accepts`` takes, to
    ``recogniser`` (None: to nobody)."""
    global _recogniser, _accepts
    _recogniser, _accepts = recogniser, accepts
