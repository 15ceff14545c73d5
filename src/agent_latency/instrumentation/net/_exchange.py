"""One HTTP/1.1 exchange read from its bytes: the request as the recogniser sees it, and the
response parsed as it is read (status line, headers, a ``Content-Length`` or chunked body,
or a body that ends with the connection), handed to an :class:`Observer`.  The patches that
find exchanges on sockets and transports are ``_exchanges``'.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any, Protocol

from ..._log import internal_error
from ._attempt import Attempt

# Request and response bodies kept for the observer, at most (longer: None).
_BODY_CAP = 8 * 1024 * 1024


class Request:
    """A request being written: what the recogniser is shown."""

    __slots__ = ("headers", "host", "method", "path", "port", "secure", "t_start", "target")

    def __init__(self, method: str, target: str, headers: dict[str, str], host: str,
                 port: int, secure: bool, t_start: float) -> None:
        self.method = method
        self.target = target  # as written: path and query
        self.path = target.partition("?")[0]
        self.headers = headers  # names lower-cased
        self.host = host
        self.port = port
        self.secure = secure
        # When it started: its new connection's setup, else its first byte.
        self.t_start = t_start


class Observer(Protocol):
    """What the recogniser returns for a request it takes (an owner of the attempt)."""

    def add_attempt(self, attempt: Attempt) -> None:
        """The attempt that carries the request."""

    def header_lines(self) -> bytes:
        """Header lines (each ending ``\\r\\n``) to add to the request, or ``b""``."""

    def request_body(self, body: bytes | None) -> None:
        """The request's body, written in full (None: too long, or not delimited)."""

    def response_head(self, status: int, headers: dict[str, str], t: float) -> None:
        """The response's status and headers (names lower-cased) were read at ``t``."""

    def response_data(self, data: bytes, t: float) -> None:
        """Body bytes (de-chunked) read at ``t``."""

    def response_end(self, t: float, error: BaseException | None) -> None:
        """The response ended at ``t`` (its last byte read), or was cut (``error``)."""

    #: Set once the request's body showed it is none of the observer's business: the
    #: exchange is let go at once (its socket's reads cost nothing again).
    let_go: bool




class ResponseCut(ConnectionError):
    """The connection closed before the response ended."""


def parse_headers(lines: list[bytes]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return headers


# -- one exchange ---------------------------------------------------------------------------
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)


class Exchange:
    """One request and its response on one connection (a socket, or an event loop's
    transport)."""

    __slots__ = ("arrivals", "attempt", "body", "body_left", "chunk_left", "holder", "kept",
                 "observer", "pending", "saved", "sent", "state", "undo")

    def __init__(self, observer: Observer, attempt: Attempt) -> None:
        # What carries it (the socket or the transport, its key in ``_exchanges``), how it is
        # let go at the end (``undo(exchange)``) and what that puts back.
        self.holder: Any = None
        self.undo: Callable[[Exchange], None] | None = None
        self.saved: Any = None
        self.observer = observer
        self.attempt = attempt
        self.body: list[bytes] | None = []
        self.kept = 0  # request body bytes kept
        self.body_left: int | None = 0  # request body bytes still to be written; None: unknown
        self.sent = False
        self.state = _HEAD
        self.pending = b""
        self.chunk_left = 0
        # Arrival times taken on its reads while its owner wants them (``_taps``: an
        # ``Arrivals``), else None.
        self.arrivals: Any = None

    # -- the request ----------------------------------------------------------------------
    def wrote(self, data: Any) -> None:
        """Request body bytes written (after the head)."""
        size = memoryview(data).nbytes
        body = self.body
        if body is not None:
            self.kept += size
            if self.kept > _BODY_CAP:
                self.body = None
            else:
                body.append(bytes(data))
        if self.body_left is not None:
            self.body_left -= size

    def request_written(self, t: float) -> None:
        """A write returned at ``t``: when the body is all out, the request was sent."""
        self.attempt.sent(t)
        if self.body_left is not None and self.body_left <= 0 and not self.sent:
            self._request_done()

    def _request_done(self) -> None:
        self.sent = True
        body, self.body = self.body, None
        observer = self.observer
        try:
            observer.request_body(b"".join(body) if body is not None
                                  and self.body_left is not None else None)
        except Exception:  # noqa: BLE001
            internal_error("wire.request")
        if getattr(observer, "let_go", False):
            self.end(perf_counter(), None)

    # -- the response ------------------------------------------------------------------------
    def received(self, data: bytes, t: float) -> None:
        """Bytes read off the socket at ``t`` (``b""``: the peer closed)."""
        if not self.sent:
            self._request_done()
        if not data:
            if self.state == _UNTIL_CLOSE:
                self.end(t, None)
            elif self.state != _DONE:
                self.end(t, ResponseCut("the connection closed before the response ended"))
            return
        buf = self.pending + data if self.pending else data
        self.pending = b""
        observer = self.observer
        while buf and self.state != _DONE:
            state = self.state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    self.pending = buf
                    return
                head, buf = buf[:end], buf[end + 4:]
                self._head(head, t)
            elif state == _LENGTH:
                buf, done = self._body(buf, t)
                if done:
                    self.end(t, None)
            elif state == _UNTIL_CLOSE:
                observer.response_data(buf, t)
                return
            elif state == _CHUNK_SIZE:
                end = buf.find(b"\r\n")
                if end < 0:
                    self.pending = buf
                    return
                size = int(buf[:end].split(b";", 1)[0].strip() or b"0", 16)
                buf = buf[end + 2:]
                if size == 0:
                    self.state = _TRAILER
                else:
                    self.chunk_left = size
                    self.state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                buf, done = self._body(buf, t)
                if done:
                    self.state = _CHUNK_END
            elif state == _CHUNK_END:
                if len(buf) < 2:
                    self.pending = buf
                    return
                buf = buf[2:]
                self.state = _CHUNK_SIZE
            else:  # _TRAILER: the body is complete; trailers are not waited for
                self.end(t, None)
        if self.state == _TRAILER:
            self.end(t, None)

    def _body(self, buf: bytes, t: float) -> tuple[bytes, bool]:
        """Hand the observer the body bytes the current length or chunk still wants: the
        bytes left over, and whether it has all it wanted."""
        take = buf[:self.chunk_left]
        self.chunk_left -= len(take)
        self.observer.response_data(take, t)
        return buf[len(take):], self.chunk_left <= 0

    def _head(self, head: bytes, t: float) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(None, 2)
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if 100 <= status < 200:
            return  # 100 Continue and the like: the real head follows
        headers = parse_headers(lines[1:])
        attempt = self.attempt
        attempt.t_headers = attempt.t_return = t
        attempt.status = status
        attempt.request_id = headers.get("x-request-id") or headers.get("request-id")
        attempt.measure_rtt()
        self.observer.response_head(status, headers, t)
        if status in (204, 304):
            self.end(t, None)
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self.state = _CHUNK_SIZE
        elif "content-length" in headers:
            try:
                self.chunk_left = int(headers["content-length"])
            except ValueError:
                self.chunk_left = 0
            self.state = _LENGTH
            if self.chunk_left <= 0:
                self.end(t, None)
        else:
            self.state = _UNTIL_CLOSE

    @property
    def ended(self) -> bool:
        """Whether the response ended (or was cut)."""
        return self.state == _DONE

    def end(self, t: float, error: BaseException | None) -> None:
        """The response ended (or was cut): the observer is told, the socket let go."""
        if self.state == _DONE:
            return
        self.state = _DONE
        if IN_FLIGHT.get(id(self.holder)) is self:
            del IN_FLIGHT[id(self.holder)]
        undo, self.undo = self.undo, None
        if undo is not None:
            try:
                undo(self)
            except Exception:  # noqa: BLE001
                internal_error("wire.release")
        self.holder = self.saved = None
        attempt = self.attempt
        attempt.t_body_done = attempt.t_received = t
        if attempt.t_return is None:
            attempt.t_return = t
        if error is not None:
            attempt.failed(error)
        try:
            self.observer.response_end(t, error)
        except Exception:  # noqa: BLE001
            internal_error("wire.end")




#: The exchanges whose response is being read, by ``id()`` of the socket or protocol.
IN_FLIGHT: dict[int, Exchange] = {}
