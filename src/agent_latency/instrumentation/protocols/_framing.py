"""How a response stream is cut into events: server-sent events, newline-delimited JSON, and
the AWS event stream (binary frames).

Each framer is fed the body's bytes as they are read and returns the whole events they
complete, each as one ``bytes`` in the shape the protocols read: SSE as sent (its
``event:`` and ``data:`` lines), an NDJSON line as ``data: LINE``, an AWS event stream
message as ``event: TYPE`` and ``data: PAYLOAD`` lines (the payload's JSON, or the base64
``bytes`` of a Bedrock ``chunk`` decoded).  What is left at the end (a truncated frame, a line
that is not a JSON object) is a :class:`MalformedResponse`, reported on the call's span; the
host's own read of the bytes is never touched.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from typing import Protocol

# An event longer than this is not waited for whole (its bytes are dropped).
EVENT_CAP = 1 << 20

SSE = "sse"
NDJSON = "ndjson"
EVENT_STREAM = "aws-eventstream"

#: Framing by the response's ``Content-Type`` (its media type, lower-cased).
BY_CONTENT_TYPE = {"text/event-stream": SSE, "application/x-ndjson": NDJSON,
                   "application/jsonl": NDJSON, "application/json-seq": NDJSON,
                   "application/vnd.amazon.eventstream": EVENT_STREAM}


class MalformedResponse(ValueError):
    """A response's bytes do not follow its protocol's framing or are not JSON."""


class StreamException(Exception):
    """The server ended a stream with an exception message (an AWS event stream's
    ``:message-type: exception``, such as ``throttlingException``)."""


class Framer(Protocol):
    """Cuts a body into events as its bytes come."""

    #: The first problem seen (the stream is still passed on), or None.
    error: MalformedResponse | StreamException | None

    def feed(self, data: bytes) -> list[bytes]:
        """The events ``data`` completes, in order."""

    def close(self) -> None:
        """The body ended: bytes left over are a problem."""


class _Framer:
    """What every framer keeps: the bytes of an event not yet whole, the first problem."""

    __slots__ = ("error", "pending")

    def __init__(self) -> None:
        self.pending = b""
        self.error: MalformedResponse | StreamException | None = None


class SSEFramer(_Framer):
    """Server-sent events: blank-line separated blocks."""

    __slots__ = ()

    def feed(self, data: bytes) -> list[bytes]:
        buf = self.pending + data if self.pending else data
        if buf.find(b"\r") >= 0:  # (not ``in``: bytes' ``in`` raises and drops a TypeError)
            buf = buf.replace(b"\r\n", b"\n")
        events = []
        start = 0
        find = buf.find
        while True:
            end = find(b"\n\n", start)
            if end < 0:
                break
            events.append(buf[start:end])
            start = end + 2
        rest = buf[start:]
        self.pending = rest if len(rest) <= EVENT_CAP else b""
        return events

    def close(self) -> None:
        self.pending = b""


class NDJSONFramer(_Framer):
    """One JSON object a line (Ollama's streams): each line becomes ``data: LINE``."""

    __slots__ = ()

    def feed(self, data: bytes) -> list[bytes]:
        buf = self.pending + data if self.pending else data
        *lines, rest = buf.split(b"\n")
        self.pending = rest if len(rest) <= EVENT_CAP else b""
        events = []
        for line in lines:
            line = line.strip()
            if not line:
                continue
            if line[:1] != b"{" or line[-1:] != b"}":
                self._bad(line)
                continue
            events.append(b"data: " + line)
        return events

    def _bad(self, line: bytes) -> None:
        if self.error is None:
            # (its bytes are not quoted: they may be the model's output)
            self.error = MalformedResponse(
                f"an NDJSON line of {len(line)} bytes is not a JSON object")

    def close(self) -> None:
        rest, self.pending = self.pending.strip(), b""
        if rest:
            if rest[:1] == b"{" and rest[-1:] == b"}":
                return
            self._bad(rest)


# -- the AWS event stream ------------------------------------------------------------------------
# A message: total length (4 bytes, big-endian), headers length (4), the CRC32 of those 8
# bytes (4); the headers; the payload; the CRC32 of everything before it (4).
_PRELUDE = 12
_MIN_MESSAGE = 16
_MAX_MESSAGE = 24 * 1024 * 1024
# Header value types: 0 true, 1 false, 2 byte, 3 short, 4 int, 5 long, 6 bytes, 7 string,
# 8 timestamp, 9 uuid.  Only strings are kept; the others are skipped by their size.
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


def event_stream_headers(block: bytes) -> dict[str, str]:
    """An event stream message's string headers (``:event-type``, ``:message-type`` …)."""
    headers: dict[str, str] = {}
    i, n = 0, len(block)
    while i < n:
        size = block[i]
        name = block[i + 1:i + 1 + size].decode("utf-8", "replace")
        i += 1 + size
        kind = block[i]
        i += 1
        if kind in (6, 7):
            (length,) = struct.unpack_from(">H", block, i)
            if kind == 7:
                headers[name] = block[i + 2:i + 2 + length].decode("utf-8", "replace")
            i += 2 + length
        elif kind in _FIXED:
            i += _FIXED[kind]
        else:
            raise MalformedResponse(f"an event stream header has an unknown type {kind}")
    return headers


def event_stream_message(buf: bytes, start: int) -> tuple[int, bytes] | None:
    """The AWS event stream message at ``buf[start:]``, both CRCs checked: where it ends in
    ``buf`` and its event (``event: TYPE`` and ``data: PAYLOAD``); None while it is not
    whole.  Raises :class:`MalformedResponse` (a bad length or CRC, a cut header) or
    :class:`StreamException` (an exception message)."""
    if len(buf) - start < _PRELUDE:
        return None
    total, header_length = struct.unpack_from(">II", buf, start)
    if not _MIN_MESSAGE <= total <= _MAX_MESSAGE or header_length > total - _MIN_MESSAGE:
        raise MalformedResponse(f"an event stream frame has a bad length {total}")
    if zlib.crc32(buf[start:start + 8]) != struct.unpack_from(">I", buf, start + 8)[0]:
        raise MalformedResponse("an event stream frame's prelude CRC is wrong")
    if len(buf) - start < total:
        return None
    end = start + total
    if zlib.crc32(buf[start:end - 4]) != struct.unpack_from(">I", buf, end - 4)[0]:
        raise MalformedResponse("an event stream frame's message CRC is wrong")
    try:
        return end, _event(buf[start + _PRELUDE:start + _PRELUDE + header_length],
                           buf[start + _PRELUDE + header_length:end - 4])
    except (struct.error, IndexError):
        raise MalformedResponse("an event stream header is cut") from None


class EventStreamFramer(_Framer):
    """``application/vnd.amazon.eventstream``: binary messages, each checked (both CRCs)."""

    __slots__ = ()

    def feed(self, data: bytes) -> list[bytes]:
        buf = self.pending + data if self.pending else data
        events = []
        start = 0
        while self.error is None:
            try:
                found = event_stream_message(buf, start)
            except (MalformedResponse, StreamException) as exc:
                self.error = exc
                break
            if found is None:
                break
            start, event = found
            events.append(event)
        self.pending = b"" if self.error is not None else buf[start:]
        return events

    def close(self) -> None:
        rest, self.pending = self.pending, b""
        if rest and self.error is None:
            self.error = MalformedResponse(
                f"the event stream ended inside a frame ({len(rest)} bytes left)")


def _event(block: bytes, payload: bytes) -> bytes:
    headers = event_stream_headers(block)
    if headers.get(":message-type") == "exception":
        raise StreamException(
            f"the server sent {headers.get(':exception-type') or 'an exception'}")
    kind = (headers.get(":event-type") or headers.get(":exception-type")
            or headers.get(":message-type") or "")
    if kind == "chunk":
        # InvokeModelWithResponseStream: the model's own JSON, base64 in ``bytes``.
        try:
            inner = json.loads(payload).get("bytes")
            if isinstance(inner, str):
                payload = base64.b64decode(inner)
        except (ValueError, AttributeError, binascii.Error):
            raise MalformedResponse("a Bedrock chunk's payload is not base64 JSON") from None
    return b"event: " + kind.encode() + b"\ndata: " + payload


def framer_for(framing: str | None) -> Framer | None:
    """A new framer for ``framing`` (None: the body is one JSON document)."""
    if framing == SSE:
        return SSEFramer()
    if framing == NDJSON:
        return NDJSONFramer()
    if framing == EVENT_STREAM:
        return EventStreamFramer()
    return None


def framing_of(content_type: str) -> str | None:
    """The framing a ``Content-Type`` header names, or None."""
    return BY_CONTENT_TYPE.get(content_type.partition(";")[0].strip().lower())
