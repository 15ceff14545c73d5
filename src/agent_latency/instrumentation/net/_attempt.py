"""The marks of one HTTP attempt (one request sent, one response read), whatever client sent
it: httpx/httpx2 through httpcore's ``trace`` events, aiohttp's trace signals, urllib3's
connection methods, or a WebSocket message.

The round trip comes from the kernel (``TCP_INFO``'s smoothed RTT, Linux), else the TCP
connect time of this attempt, else the last RTT seen for the host, else 0; the source is
named on the span.
"""

from __future__ import annotations

from time import perf_counter, thread_time
from typing import Any

from ... import semconv
from ..._headers import header_values
from ._kernel import socket_of, tcp_info_close, tcp_info_rtt

RTT_TCP_INFO = semconv.RTT_SOURCE_TCP_INFO
RTT_CONNECT = semconv.RTT_SOURCE_CONNECT
RTT_LAST_SEEN = semconv.RTT_SOURCE_LAST_SEEN
RTT_NONE = semconv.RTT_SOURCE_NONE

# The last RTT seen per (host, port), for attempts whose socket the kernel cannot be asked.
_last_rtt: dict[tuple[str, int], float] = {}
# Bytes the kernel counted on each socket at the end of the last attempt seen on it (so an
# attempt on a pooled connection gets its own share); bounded.
_last_bytes: dict[int, tuple[int, int]] = {}

#: A response's request id, by the names servers give it (the first found wins).
_REQUEST_ID_HEADERS = (b"x-request-id", b"request-id")


class Attempt:
    """The marks of one HTTP attempt, in ``perf_counter`` seconds.

    The clients' adapters call its public methods as the attempt goes: ``connect_started``
    / ``connected`` (a new connection), ``tls_started`` / ``tls_done``, ``send_started`` /
    ``sent`` (first and last request byte), ``headers``, ``body_done``, ``closed``, then
    ``got_response`` or ``failed``.
    """

    __slots__ = ("bytes_received", "bytes_sent", "connect", "cpu_sent", "dns", "dns_base",
                 "error", "following", "holder", "hook", "host", "net", "on_closed", "port",
                 "request_id", "response", "reused", "rtt", "rtt_source", "secure", "sock",
                 "status", "stream",
                 "t_body_done", "t_closed", "t_connect", "t_headers", "t_received", "t_return",
                 "t_send", "t_sent", "t_start", "t_tls", "tls", "tls_base")

    def __init__(self, host: str, port: int, on_closed: Any = None) -> None:
        self.t_start = perf_counter()
        self.host = host
        self.port = port
        self.on_closed = on_closed
        self.connect = 0.0
        self.tls = 0.0
        # Name resolution, from the socket layer when it recorded into ``net`` (the
        # owner's): httpcore counts it inside ``connect_tcp``.  ``*_base``: ``net``'s totals
        # when this attempt's connection started.
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
        self.stream: Any = None  # the client library's network stream (httpcore's), if known
        # What keeps the stream (httpcore's HTTP/1.1 connection, in ``_network_stream``): its
        # reads are tapped there (``_taps``).
        self.holder: Any = None
        self.following: Any = None  # arrival times being taken on it (``_follow``)
        # The client library's trace callback that is ours alone (httpcore's): lifted while
        # the marks it would give come from the taps (``_httpcore``).
        self.hook: Any = None
        self.rtt = 0.0
        self.rtt_source = RTT_NONE
        self.status = 0
        self.error: BaseException | None = None
        self.response: Any = None
        self.request_id: str | None = None

    # -- a new connection -----------------------------------------------------------------
    def connect_started(self, t: float) -> None:
        """A new connection is being opened (DNS and TCP connect follow)."""
        self.t_connect = t
        self.reused = False
        net = self.net
        if net is not None:
            self.dns_base = net.dns
            self.tls_base = net.tls

    def connected(self, t: float, sock: Any) -> None:
        """The TCP connection is open (DNS inside, split out from the socket layer's
        figures when it recorded them)."""
        self.connect = t - self.t_connect
        self.sock = sock
        net = self.net
        if net is not None:
            dns = net.dns - self.dns_base
            if 0.0 < dns <= self.connect:
                self.dns = dns
                self.connect -= dns

    def connected_with_tls(self, t: float) -> None:
        """The connection is open, its DNS, TCP connect and TLS handshake all inside
        (aiohttp's connection signals): split by the socket layer's figures."""
        total = t - self.t_connect
        net = self.net
        dns = tls = 0.0
        if net is not None:
            dns = max(net.dns - self.dns_base, 0.0)
            tls = max(net.tls - self.tls_base, 0.0)
            if net.last_sock is not None:
                self.sock = net.last_sock
        if dns + tls > total:
            dns = tls = 0.0
        self.dns, self.tls = dns, tls
        self.connect = total - dns - tls

    def tls_started(self, t: float) -> None:
        """The TLS handshake started."""
        self.t_tls = t

    def tls_done(self, t: float) -> None:
        """The TLS handshake ended."""
        self.tls = t - self.t_tls

    # -- the exchange ------------------------------------------------------------------------
    def send_started(self, t: float) -> None:
        """The first request byte is being written."""
        if self.t_send is None:
            self.t_send = t

    def sent(self, t: float) -> None:
        """The last request byte was written."""
        self.t_sent = t
        self.cpu_sent = thread_time()

    def headers(self, t: float) -> None:
        """The response headers were read."""
        self.t_headers = t

    def body_done(self, t: float) -> None:
        """The response body was read to its end (or its reading failed)."""
        self.t_body_done = t

    def closed(self, t: float) -> None:
        """The response was closed: the connection is still open here, so the kernel is
        asked when its last bytes came and how many it carried."""
        if self.t_closed is not None:
            return
        self.t_closed = t
        since, acked, received = tcp_info_close(self.sock)
        if since is not None:
            self.t_received = t - since
        if acked is not None and received is not None:
            self._count_bytes(acked, received)
        if self.t_body_done is None:
            self.t_body_done = t
        on_closed = self.on_closed
        if on_closed is not None:
            on_closed(self, t)

    def _count_bytes(self, acked: int, received: int) -> None:
        key = id(self.sock)
        before = (0, 0) if not self.reused else _last_bytes.get(key)
        if len(_last_bytes) > 256:
            _last_bytes.clear()
        _last_bytes[key] = (acked, received)
        if before is not None:
            self.bytes_sent = max(acked - before[0], 0)
            self.bytes_received = max(received - before[1], 0)

    # -- around the client's send ------------------------------------------------------------
    def got_response(self, response: Any, t: float | None = None) -> None:
        """The client returned ``response`` (an httpx/httpx2 response): status, request id,
        the socket, the round trip."""
        self.t_return = perf_counter() if t is None else t
        self.response = response
        self.status = int(getattr(response, "status_code", 0) or 0)
        headers = response.headers
        request_id, other_name = header_values(headers, _REQUEST_ID_HEADERS)
        self.request_id = request_id or other_name
        if self.t_headers is None:
            self.t_headers = self.t_return
        if self.stream is None:
            self.stream = response.extensions.get("network_stream")
        if self.sock is None and self.stream is not None:
            self.sock = socket_of(self.stream)
        self.measure_rtt()

    def measure_rtt(self) -> None:
        """The round trip of this attempt's connection, with its source."""
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

    def stop_following(self) -> None:
        """Stop taking arrival times on this attempt's connection."""
        following, self.following = self.following, None
        if following is not None:
            following.stop()
            self.wire_sent(following.arrivals.t_sent, following.arrivals.last_out)

    def wire_sent(self, t: float | None, last: bool = False) -> None:
        """The kernel's stamp of the request's last byte leaving: ``t_sent`` is moved to it
        when the writer's own mark is later (the GIL or the scheduler delayed the writer),
        and also when it is earlier if the stamp is known to be the last byte's (``last``:
        nothing of the request was left in the send queue when it was taken): a writer
        returns once the kernel holds its bytes, which a slow uplink sends later."""
        if t is None or self.t_sent is None or (t >= self.t_sent and not last):
            return
        self.t_sent = max(t, self.t_start)
        if self.t_send is not None and self.t_send > self.t_sent:
            self.t_send = self.t_sent

    def failed(self, exc: BaseException) -> None:
        """The attempt raised ``exc`` (nothing came back, or not in full)."""
        self.t_return = perf_counter()
        self.error = exc
