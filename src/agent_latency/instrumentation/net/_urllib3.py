"""urllib3 (under ``requests``, and any program on it): the attempts sent while an owner is
current (:data:`._context.CURRENT`), with the same marks as the httpx path.

- ``HTTPConnectionPool.urlopen`` is one attempt; the socket layer (:mod:`._sockets`) gives
  DNS, TCP connect and TLS of a new connection.
- ``HTTPConnection.request`` returns when the last request byte is written (a plain-HTTP
  connection is opened inside it: the first byte follows the connection's setup).
- ``HTTPConnection.getresponse`` returns when the response headers are in; then the
  kernel's RTT of the socket.  When the owner wants arrival times, the response object
  ``http.client`` makes inside it (the connection's ``response_class``, replaced on that
  one connection for that one call) has its raw socket file tapped before the status line
  is read (:mod:`._follow`): the body's bytes, streamed or read inside ``getresponse``,
  are dated from the wire.

When no owner is current each wrapper costs one ``ContextVar.get``.
"""

from __future__ import annotations

import contextvars
from time import perf_counter
from typing import Any

from ..._log import internal_error
from ._arrivals import Arrivals
from ._attempt import Attempt
from ._context import CURRENT
from ._follow import follow
from ._phases import NetPhases


class _Sending:
    """One attempt inside ``urlopen`` and the owner's socket-level totals at its start."""

    __slots__ = ("arrivals", "attempt", "connect", "connects", "net", "owner")

    def __init__(self, attempt: Attempt, net: NetPhases, owner: Any) -> None:
        self.attempt = attempt
        # Made as the request is written, when the owner wants arrival times: its
        # transmit stamps; the response's tap takes it over.
        self.arrivals: Arrivals | None = None
        self.owner = owner
        self.net = net
        attempt.net = net
        attempt.dns_base, attempt.tls_base = net.dns, net.tls
        self.connect, self.connects = net.connect, net.connects

    def setup_done(self) -> None:
        """A connection opened inside this attempt: its DNS, connect and TLS."""
        net, attempt = self.net, self.attempt
        if net.connects > self.connects:
            attempt.reused = False
            attempt.dns = net.dns - attempt.dns_base
            attempt.connect = net.connect - self.connect
            attempt.tls = net.tls - attempt.tls_base
            if attempt.sock is None:
                attempt.sock = net.last_sock


#: The attempt being sent now (inside ``urlopen`` while an owner is current), with the
#: socket layer's totals when it started.
_ATTEMPT: contextvars.ContextVar[_Sending | None] = contextvars.ContextVar(
    "agent_latency_urllib3_attempt", default=None)



def urlopen_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``HTTPConnectionPool.urlopen``: one attempt of the current owner."""
    owner = CURRENT.get()
    if owner is None:
        return wrapped(*args, **kwargs)
    sending = token = None
    try:
        secure = getattr(instance, "scheme", "http") == "https"
        attempt = Attempt(str(instance.host), int(instance.port or (443 if secure else 80)))
        attempt.secure = secure
        sending = _Sending(attempt, owner.net, owner)
        owner.add_attempt(attempt)
        token = _ATTEMPT.set(sending)
    except Exception:  # noqa: BLE001
        internal_error("urllib3.urlopen")
    try:
        return wrapped(*args, **kwargs)
    except BaseException as exc:
        if sending is not None:
            sending.attempt.failed(exc)
        raise
    finally:
        if token is not None:
            _ATTEMPT.reset(token)
        if sending is not None:
            try:
                if sending.arrivals is not None and sending.attempt.following is None:
                    sending.arrivals.stop_stamping()  # no response was tapped
                sending.setup_done()
            except Exception:  # noqa: BLE001
                internal_error("urllib3.setup")


def request_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``HTTPConnection.request``: the first and last request byte."""
    sending = _ATTEMPT.get()
    if sending is None:
        return wrapped(*args, **kwargs)
    net = sending.net
    t_entry = perf_counter()
    before = net.dns + net.connect + net.tls
    try:
        return wrapped(*args, **kwargs)
    finally:
        attempt = sending.attempt
        attempt.sent(perf_counter())
        attempt.send_started(min(t_entry + (net.dns + net.connect + net.tls - before),
                                 attempt.t_sent or t_entry))


def send_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``HTTPConnection.send`` (``http.client``'s: each piece of the request), while the
    owner wants arrival times: written with the kernel's transmit stamps on (a long piece's
    head with them off: ``STAMPED_TAIL``), the stamps taken off the error queue after each
    piece, so the request's last byte is dated when it left."""
    sending = _ATTEMPT.get()
    if sending is None or kwargs or len(args) != 1:
        return wrapped(*args, **kwargs)
    data, head = args[0], None
    arrivals = sending.arrivals
    try:
        sock = instance.sock
        if (sending.owner.wants_arrivals and sock is not None
                and isinstance(data, (bytes, bytearray, memoryview))):
            if arrivals is None or arrivals.sock is not sock:
                arrivals = sending.arrivals = Arrivals(sock)
            head, data = arrivals.split_write(data)
        else:
            arrivals = None
    except Exception:  # noqa: BLE001
        internal_error("urllib3.send")
        arrivals = None
    if head is not None:
        wrapped(head)
    if arrivals is not None:
        try:
            arrivals.sending()
        except Exception:  # noqa: BLE001
            internal_error("urllib3.send")
    result = wrapped(data)
    if arrivals is not None:
        try:
            arrivals.sent()
        except Exception:  # noqa: BLE001
            internal_error("urllib3.send")
    return result


def _follow_response(connection: Any, sending: _Sending) -> bool:
    """Arrival times on the response ``connection`` is about to read: ``http.client`` makes
    it with the connection's ``response_class``, set here on the instance (taken off again
    after ``getresponse``), whose raw socket file is tapped before anything is read."""
    original = type(connection).response_class
    attempt = sending.attempt
    classify = sending.owner.classify_event

    def response_class(sock: Any, *args: Any, **kwargs: Any) -> Any:
        response = original(sock, *args, **kwargs)
        try:
            raw = getattr(getattr(response, "fp", None), "raw", None)
            if raw is not None and attempt.following is None:
                attempt.sock = sock
                attempt.stream = raw
                attempt.following = follow(attempt, classify, arrivals=sending.arrivals)
        except Exception:  # noqa: BLE001
            internal_error("urllib3.follow")
        return response

    connection.response_class = response_class
    return True


def getresponse_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``HTTPConnection.getresponse``: the response headers, the socket, the round trip."""
    sending = _ATTEMPT.get()
    if sending is None:
        return wrapped(*args, **kwargs)
    tapped = False
    try:
        if sending.owner.wants_arrivals and sending.attempt.following is None:
            tapped = _follow_response(instance, sending)
    except Exception:  # noqa: BLE001
        internal_error("urllib3.follow")
    try:
        response = wrapped(*args, **kwargs)
    finally:
        if tapped:
            # Deleted as an attribute: asked for, the connection's ``__dict__`` would be its own
            # from then on, and each later read of its attributes slower (``_methods``).
            try:
                del instance.response_class
            except AttributeError:
                pass
    try:
        attempt = sending.attempt
        attempt.t_headers = attempt.t_return = perf_counter()
        attempt.status = int(getattr(response, "status", 0) or 0)
        headers = response.headers
        attempt.request_id = headers.get("x-request-id") or headers.get("request-id")
        attempt.sock = getattr(instance, "sock", None) or attempt.sock
        attempt.measure_rtt()
    except Exception:  # noqa: BLE001
        internal_error("urllib3.getresponse")
    return response


#: ``(module, "Class.method", wrapper)``: urllib3's attempts.
TARGETS: list[tuple[str, str, Any]] = [
    ("urllib3.connectionpool", "HTTPConnectionPool.urlopen", urlopen_wrapper),
    ("urllib3.connection", "HTTPConnection.request", request_wrapper),
    ("urllib3.connection", "HTTPConnection.send", send_wrapper),
    ("urllib3.connection", "HTTPConnection.getresponse", getresponse_wrapper),
]
