"""GET requests to trace backends, bounded: one deadline for the whole request, a size cap,
few redirects, and credentials only for the origin they were given for.

A backend is a server on the network and answers what it likes: a redirect to another host
(which must not receive ``PHOENIX_API_KEY``), a body trickling a byte every few seconds (a
per-read timeout never fires), gigabytes.  The settings, read when a source is opened:

* ``AGENT_LATENCY_BACKEND_TIMEOUT`` (seconds, default 30): connect, headers and body of one
  request together;
* ``AGENT_LATENCY_BACKEND_MAX_MB`` (MB of 10^6 bytes, default 256): the largest body read;
* ``AGENT_LATENCY_BACKEND_MAX_PAGES`` (default 10,000): pages of one paged listing;
* ``AGENT_LATENCY_BACKEND_TOTAL_TIMEOUT`` (seconds, default 300): every request to one
  source together (the pages of a listing, Tempo's trace after trace);
* ``AGENT_LATENCY_BACKEND_MAX_SPANS`` (default 1,000,000): spans a paged listing holds
  before its traces are whole (Phoenix's; about 1 kB of memory each).

Every failure is a :class:`~agent_latency.report._read.TraceFileError` of one line naming the
URL.  A URL's user and password (``https://user:secret@host``) are sent as HTTP basic
authentication and never shown: they are taken out of the URL before anything names it
(:func:`split_userinfo`), and :func:`redact_userinfo` hides any that a message still holds.
"""

from __future__ import annotations

import base64
import http.client
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

from .._env import env_int, env_number
from ._read import TraceFileError

TIMEOUT_ENV = "AGENT_LATENCY_BACKEND_TIMEOUT"
MAX_MB_ENV = "AGENT_LATENCY_BACKEND_MAX_MB"
MAX_PAGES_ENV = "AGENT_LATENCY_BACKEND_MAX_PAGES"
TOTAL_TIMEOUT_ENV = "AGENT_LATENCY_BACKEND_TOTAL_TIMEOUT"
MAX_SPANS_ENV = "AGENT_LATENCY_BACKEND_MAX_SPANS"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_MB = 256.0
DEFAULT_MAX_PAGES = 10_000
DEFAULT_TOTAL_TIMEOUT_S = 300.0
DEFAULT_MAX_SPANS = 1_000_000
MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Headers that carry credentials: sent to the origin they were given for, no other.
_CREDENTIALS = frozenset({"authorization", "cookie", "proxy-authorization"})
_BLOCK = 1 << 16
# The user and password part of a URL in a text: after "scheme://", up to the last "@"
# before the host.
# A URL's ``user:password@`` after its scheme's ``://``, or ``:/`` once a path normalised it
# (``http://me:pw@host`` taken for a file name is shown as ``http:/me:pw@host``).
_USERINFO = re.compile(r"(?<=[A-Za-z0-9+.-]:/)(/?)[^/?#\s@]*@")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one backend source may cost: seconds per request, bytes per body, pages, seconds
    for all its requests together (from when the limits are made), spans held."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_bytes: int = int(DEFAULT_MAX_MB * 1e6)
    max_pages: int = DEFAULT_MAX_PAGES
    total_s: float = DEFAULT_TOTAL_TIMEOUT_S
    max_spans: int = DEFAULT_MAX_SPANS
    started: float = field(default_factory=time.monotonic, compare=False)

    @classmethod
    def from_environment(cls) -> Limits:
        """The limits the environment sets (a bad value keeps the default, one warning);
        the total deadline runs from now."""
        return cls(env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S, maximum=86_400.0),
                   int(env_number(MAX_MB_ENV, DEFAULT_MAX_MB, maximum=1e6) * 1e6),
                   env_int(MAX_PAGES_ENV, DEFAULT_MAX_PAGES),
                   env_number(TOTAL_TIMEOUT_ENV, DEFAULT_TOTAL_TIMEOUT_S, maximum=864_000.0),
                   env_int(MAX_SPANS_ENV, DEFAULT_MAX_SPANS))

    @property
    def ends_at(self) -> float:
        """When every request to this source must be done (``time.monotonic``)."""
        return self.started + self.total_s

    def out_of_time(self) -> bool:
        """Whether the total deadline has passed."""
        return time.monotonic() >= self.ends_at


def split_userinfo(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its user and password, and the basic authentication header they
    make (none when the URL has none)."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, {}
    user, _, password = userinfo.partition(":")
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    header = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), {"Authorization": header}


def redact_userinfo(text: str) -> str:
    """``text`` with the user and password of every URL in it shown as ``***``."""
    return _USERINFO.sub(r"\1***@", text)


def get(url: str, headers: dict[str, str], limits: Limits) -> bytes:
    """The body of ``GET url`` (status 2xx), following up to :data:`MAX_REDIRECTS`
    redirects; credentials in ``headers`` go to ``url``'s origin only."""
    # This request's own bound, or less where the source's total deadline comes first.
    deadline = min(time.monotonic() + limits.timeout_s, limits.ends_at)
    origin = _origin(url)
    for _ in range(MAX_REDIRECTS + 1):
        same_origin = _origin(url) == origin
        sent = {k: v for k, v in headers.items()
                if same_origin or k.lower() not in _CREDENTIALS}
        status, location, body = _get_once(url, sent, deadline, limits)
        if status not in _REDIRECTS:
            return body
        target = urllib.parse.urljoin(url, location)
        if urllib.parse.urlsplit(target).scheme not in ("http", "https"):
            raise TraceFileError(f"{url}: redirected to {target!r}, not an http(s) URL")
        url = target
    raise TraceFileError(f"{url}: more than {MAX_REDIRECTS} redirects")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, (parts.hostname or "").lower(), port or default


def _get_once(url: str, headers: dict[str, str], deadline: float,
              limits: Limits) -> tuple[int, str, bytes]:
    """``(status, Location, body)`` of one request; a redirect's body is not read."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise TraceFileError(f"{url}: not a valid port") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TraceFileError(f"{url}: not an http(s) URL with a host")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection_type = (http.client.HTTPSConnection if parts.scheme == "https"
                       else http.client.HTTPConnection)
    connection = connection_type(parts.hostname, port,
                                 timeout=max(deadline - time.monotonic(), 0.001))
    cut = _Deadline()
    # Armed before connecting: a TLS handshake that trickles is cut too (the plain socket
    # is ``connection.sock`` until the handshake ends).  Once a response that closes the
    # connection begins, http.client forgets ``connection.sock``: the socket is kept here.
    connected: list[socket.socket] = []
    cut.arm(lambda: connection.sock or (connected[0] if connected else None), deadline)
    try:
        connection.connect()
        connected.append(connection.sock)
        connection.request("GET", target, headers={"Accept": "application/json", **headers})
        response = connection.getresponse()
        if response.status in _REDIRECTS:
            location = response.getheader("Location") or ""
            if not location:
                raise TraceFileError(f"{url}: HTTP {response.status} without a Location")
            return response.status, location, b""
        if response.status >= 300:
            text = response.read(300).decode("utf-8", "replace").strip()
            raise TraceFileError(f"{url}: HTTP {response.status} {response.reason}"
                                 + (f": {text}" if text else ""))
        body = _read_capped(response, url, limits.max_bytes)
        if cut.fired:  # the cut may have ended a body that had no length as if whole
            raise _too_slow(url, limits)
        return response.status, "", body
    except TraceFileError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if cut.fired or time.monotonic() >= deadline:
            raise _too_slow(url, limits) from None
        if isinstance(exc, http.client.HTTPException):  # a broken or cut answer
            raise TraceFileError(f"{url}: not an HTTP answer ({type(exc).__name__}: "
                                 f"{exc})") from None
        if isinstance(exc, ValueError):  # http.client's InvalidURL, a bad header value
            raise TraceFileError(f"{url}: not a URL that can be requested ({exc})") from None
        raise TraceFileError(f"{url}: cannot connect: {exc}") from None
    finally:
        cut.disarm()
        connection.close()


def _read_capped(response: http.client.HTTPResponse, url: str, max_bytes: int) -> bytes:
    declared = response.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > max_bytes:
        raise _too_big(url, max_bytes, f"{int(declared):,} bytes declared")
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(_BLOCK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise _too_big(url, max_bytes, "more was coming")
        chunks.append(chunk)


def _too_big(url: str, max_bytes: int, detail: str) -> TraceFileError:
    return TraceFileError(f"{url}: the answer is over {max_bytes / 1e6:g} MB ({detail}); "
                          f"narrow the query (a shorter time range, a lower &limit=) or "
                          f"raise {MAX_MB_ENV}")


def _too_slow(url: str, limits: Limits) -> TraceFileError:
    if limits.out_of_time():
        return TraceFileError(f"{url}: no whole answer within the {limits.total_s:g} s that "
                              f"all requests to this source get ({TOTAL_TIMEOUT_ENV})")
    return TraceFileError(f"{url}: no whole answer within {limits.timeout_s:g} s "
                          f"({TIMEOUT_ENV})")


class _Deadline:
    """Shuts a socket down at a deadline: a blocked read returns at once, however the
    server trickles (a socket timeout bounds each read, not the request)."""

    __slots__ = ("_timer", "fired")

    def __init__(self) -> None:
        self._timer: threading.Timer | None = None
        self.fired = False

    def arm(self, current: Callable[[], socket.socket | None], deadline: float) -> None:
        """At ``deadline``, shut down the socket ``current()`` returns then."""
        self._timer = threading.Timer(max(deadline - time.monotonic(), 0.0), self._cut,
                                      (current,))
        self._timer.daemon = True
        self._timer.start()

    def _cut(self, current: Callable[[], socket.socket | None]) -> None:
        self.fired = True
        sock = current()
        if sock is None:
            return  # still connecting: the connect's own timeout ends it
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()
