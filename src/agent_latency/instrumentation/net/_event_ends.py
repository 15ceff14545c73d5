"""Where one response's events end on the wire: the blocks a connection's reads took (their
wire offsets and plaintext, kept by :class:`._arrivals.Arrivals`), scanned in the response's
framing (SSE's blank lines, NDJSON's lines, the AWS event stream's length-prefixed messages)
and mapped from plaintext to wire offsets in proportion, and which of those events carry
output (the owner's classifier).

The scan is lazy: a stream whose first token is all that is wanted is scanned no further,
and the events after it in the same block are counted in C, not scanned one by one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from ..protocols._framing import (
    BY_CONTENT_TYPE,
    EVENT_STREAM,
    MalformedResponse,
    StreamException,
    event_stream_message,
)
from ._exchange import parse_headers

# An event longer than this is not waited for whole (its bytes are cut, never an unbounded
# buffer).
_EVENT_CAP = 1 << 20

# The bytes at a counted region's end searched for ``[DONE]`` (its event, a chunked
# body's last size line and blank lines), and at its start for an ``event:`` name.
_DONE_TAIL = 64
_NAMED_HEAD = 512

#: A response's framing (``Arrivals.framing``): server-sent events, one JSON object a line, or
#: the AWS event stream's binary messages (:data:`EVENT_STREAM`).
SSE = "sse"
NDJSON = "ndjson"
# The response head's first bytes looked at for its content type, and the NDJSON types.
_HEAD_SNIFF = 4096
_NDJSON_TYPES = (b"application/x-ndjson", b"application/ndjson", b"application/jsonl",
                 b"application/x-jsonlines", b"application/json-seq")
_EVENT_STREAM_TYPES = tuple(kind.encode() for kind, framing in BY_CONTENT_TYPE.items()
                            if framing == EVENT_STREAM)
# A response head longer than this is not waited for (its body's messages are not found).
_HEAD_CAP = 64 * 1024


def _bytes_through(c0: int, c1: int, data: bytes, through: int) -> bytes:
    """The bytes of a block read (wire bytes ``c0`` to ``c1``) that lie at or before wire
    offset ``through``, in proportion as the reads map them."""
    if through >= c1 or c1 <= c0:
        return data
    if through <= c0:
        return b""
    return data[:-(-(through - c0) * len(data) // (c1 - c0))]  # (rounded up)


class EventEnds:
    """The event scan :class:`._arrivals.Arrivals` inherits: the wire offsets where events
    end (``ends``) and where those carrying output end (``outputs``), found in the blocks its
    reads append to ``_blocks``."""

    __slots__ = ("_blocks", "_counted", "_pending", "_scanner", "_scanning", "_unclassified",
                 "classify", "ends", "framing", "outputs")

    def _start_event_ends(self) -> None:
        """Nothing scanned yet (called by the owner's ``__init__``)."""
        # Wire offsets where each data event ends, in order, and (``classify(event bytes) ->
        # bool``, set by the owner) those of the events that carry output.  Both are found
        # lazily (:meth:`scan`): blocks read wait in ``_blocks`` until someone asks, so a
        # stream whose first token is all that is wanted is scanned no further.
        self.ends: list[int] = []
        self.outputs: list[int] = []
        self.classify: Any = None
        # :data:`SSE` or :data:`NDJSON`; None: told by the response head, when the tap read it.
        self.framing: str | None = None
        self._blocks: deque[tuple[int, int, bytes]] = deque()  # (wire start, end, bytes)
        self._pending = 0  # bytes in _blocks
        self._scanner = self._scan_blocks()
        # The SSE scanner's block and where in it the events not scanned yet start (the
        # bytes :meth:`_count_unscanned` counts events in), once it has taken one.
        self._scanning: tuple[int, int, bytes, int] | None = None
        # The last count: (``_scanning`` then, the offset counted through, the count); a
        # stream's first chunk and first token are dated from the same bytes.
        self._counted: tuple[Any, int, int] | None = None
        # Events found by a scan that wanted their ends only (``through``), not classified yet:
        # classified the first time a scan wants outputs (never, for a stream whose first
        # token is all that is wanted).
        self._unclassified: deque[tuple[int, bytes]] = deque()

    def scan(self, *, until_output: bool = False, through: int | None = None) -> None:
        """Find the events of the blocks read so far (all of them, or only up to the first
        output event when ``until_output``, or the first event ending at or past wire
        offset ``through``).

        A scan ``through`` an offset wants the events' ends only (how many events an
        observation's bytes hold): it leaves them unclassified, so that dating a first
        token coalesced with the rest of its stream costs no output search per event."""
        scanner = self._scanner
        classify = self.classify
        if through is not None:
            for item in scanner:
                if item is None:
                    return  # nothing more read yet
                offset = item[0]
                self.ends.append(offset)
                if classify is not None:
                    self._unclassified.append(item)
                if offset >= through:
                    return
            return
        if classify is not None:
            waiting = self._unclassified
            while waiting:
                offset, event = waiting.popleft()
                if classify(event):
                    self.outputs.append(offset)
                    if until_output:
                        return
        for item in scanner:
            if item is None:
                return  # nothing more read yet
            offset, event = item
            self.ends.append(offset)
            if classify is not None and classify(event):
                self.outputs.append(offset)
                if until_output:
                    return

    def first_output(self) -> int | None:
        """The wire offset where the first output event ends, or None."""
        if not self.outputs:
            self.scan(until_output=True)
        return self.outputs[0] if self.outputs else None

    def last_output(self) -> int | None:
        """The wire offset where the last output event read so far ends, or None."""
        self.scan()
        return self.outputs[-1] if self.outputs else None

    def _scan_blocks(self) -> Iterator[tuple[int, bytes] | None]:
        """``(wire offset just past the event, the event's bytes)`` for each complete event,
        in order across the blocks read; None whenever it has caught up with them.  The
        framing is the response's: NDJSON lines when ``framing`` says so or the response's
        head (read through the tap) names an NDJSON content type, else SSE events."""
        while not self._blocks:
            yield None
        framing = self.framing
        if framing is None:
            head = self._blocks[0][2][:_HEAD_SNIFF].lower()
            framing = SSE
            if head.startswith(b"http/1."):
                if any(kind in head for kind in _EVENT_STREAM_TYPES):
                    framing = EVENT_STREAM
                elif any(kind in head for kind in _NDJSON_TYPES):
                    framing = NDJSON
            self.framing = framing
        if framing == EVENT_STREAM:
            yield from self._scan_messages()
        else:
            yield from (self._scan_lines() if framing == NDJSON else self._scan_events())

    def _take_block(self) -> tuple[int, int, bytes, float] | None:
        """The oldest block read and not scanned: its wire start and end, its bytes and wire
        bytes per byte read; None when all are scanned."""
        if not self._blocks:
            return None
        c0, c1, data = self._blocks.popleft()
        self._pending -= len(data)
        return c0, c1, data, (c1 - c0) / len(data)

    def _scan_lines(self) -> Iterator[tuple[int, bytes] | None]:
        """NDJSON: each line that holds a JSON object is an event (the response head, the
        HTTP chunks' size lines and blank lines are not)."""
        partial = b""  # the line read so far
        while True:
            block = self._take_block()
            if block is None:
                yield None
                continue
            c0, c1, data, scale = block
            prev = 0
            pos = data.find(b"\n")
            while pos != -1:
                line = partial + data[prev:pos] if partial else data[prev:pos]
                partial = b""
                prev = pos + 1
                if line.lstrip()[:1] == b"{":
                    yield c0 + min(round(prev * scale), c1 - c0), line
                pos = data.find(b"\n", prev)
            partial = (partial + data[prev:])[-_EVENT_CAP:]

    def _scan_messages(self) -> Iterator[tuple[int, bytes] | None]:
        """The AWS event stream: each message (length-prefixed, both CRCs checked, read by
        the protocols' own :func:`event_stream_message`) in the body under the response head
        and a chunked transfer coding.  A broken message ends the search: the events before
        it keep their times, and the call's own framer reports the break."""
        # The response head read so far (None: passed, or not read through the tap), whether
        # the body is chunked, body bytes left in the current chunk, a chunk-size line read
        # so far, the bytes of a message not whole yet.
        head: bytes | None = b"" if self._blocks[0][2][:5].upper() == b"HTTP/" else None
        chunked = False
        chunk_left = 0
        line = b""
        held = b""
        while True:
            block = self._take_block()
            if block is None:
                yield None
                continue
            c0, c1, data, scale = block
            pos, size = 0, len(data)
            while pos < size:
                if head is not None:
                    joined = head + data[pos:]
                    end = joined.find(b"\r\n\r\n")
                    if end < 0:
                        if len(joined) > _HEAD_CAP:
                            return
                        head = joined
                        break
                    pos += end + 4 - len(head)
                    lines = joined[:end].split(b"\r\n")
                    if lines[0][9:10] == b"1":
                        head = b""  # 100 Continue and the like: the real head follows
                        continue
                    head = None
                    chunked = "chunked" in parse_headers(lines[1:]).get(
                        "transfer-encoding", "").lower()
                    continue
                if chunked and not chunk_left:
                    # A chunk-size line (the blank line ending the chunk before it, skipped).
                    joined = line + data[pos:]
                    end = joined.find(b"\r\n")
                    if end < 0:
                        line = joined[-_HEAD_SNIFF:]
                        break
                    pos += end + 2 - len(line)
                    line = b""
                    digits = joined[:end].split(b";", 1)[0].strip()
                    if digits:
                        try:
                            chunk_left = int(digits, 16)
                        except ValueError:
                            return
                        if not chunk_left:
                            return  # the last chunk
                    continue
                take = min(chunk_left, size - pos) if chunked else size - pos
                if chunked:
                    chunk_left -= take
                # The message ends found in this piece of the body, by the piece's bytes.
                base = len(held)
                buf = held + data[pos:pos + take] if held else data[pos:pos + take]
                start = 0
                while True:
                    try:
                        found = event_stream_message(buf, start)
                    except (MalformedResponse, StreamException):
                        return
                    if found is None:
                        break
                    start, event = found
                    yield c0 + min(round((pos + start - base) * scale), c1 - c0), event
                held = buf[start:]
                if len(held) > _EVENT_CAP:
                    return  # a message this long is not waited for: never an unbounded buffer
                pos += take

    def _scan_events(self) -> Iterator[tuple[int, bytes] | None]:
        """SSE: each event that carries data (not a keep-alive comment, ``ping`` or
        ``[DONE]``)."""
        has_data = skip = False
        last = partial = b""  # the previous block's last byte; the event read so far
        while True:
            block = self._take_block()
            if block is None:
                yield None
                continue
            c0, c1, data, scale = block
            prev = 0
            search = last + data
            shift = len(last)
            self._scanning = (c0, c1, data, 0)
            pos = search.find(b"\n\n")
            while pos != -1:
                end = pos + 2 - shift
                segment = data[prev:end] if end > 0 else b""
                # ``find``, not ``in``: bytes' ``in`` first tries its operand as an integer
                # and builds (then drops) a TypeError, about as dear as the search itself.
                has_data = has_data or segment.find(b"data:") >= 0
                skip = skip or segment.find(b"[DONE]") >= 0 or segment.find(b"event: ping") >= 0
                if has_data and not skip and end > 0:
                    self._scanning = (c0, c1, data, end)
                    yield c0 + min(round(end * scale), c1 - c0), partial + segment
                has_data = skip = False
                partial = b""
                prev = max(end, 0)
                pos = search.find(b"\n\n", pos + 2)
            self._scanning = (c0, c1, data, prev)
            rest = data[prev:]
            has_data = has_data or rest.find(b"data:") >= 0
            skip = skip or rest.find(b"[DONE]") >= 0 or rest.find(b"event: ping") >= 0
            last = data[-1:]
            # An event longer than the cap is not classified (its JSON is cut): not dated as
            # output, never an unbounded buffer.
            partial = (partial + rest)[-_EVENT_CAP:]

    def _count_unscanned(self, through: int) -> int | None:
        """How many SSE events not scanned yet end at or before wire offset ``through``,
        counted in C over the bytes read (their blank lines, less ``[DONE]`` and ``ping``
        events; a comment-only keep-alive among them counts as an event); None where the
        response is not SSE or its scan has not begun (then the events are scanned)."""
        scanning = self._scanning
        if scanning is None or self.framing != SSE:
            return None
        counted = self._counted
        if counted is not None and counted[0] is scanning and counted[1] == through:
            return counted[2]
        c0, c1, data, at = scanning
        pieces = [_bytes_through(c0, c1, data, through)[at:]]
        for b0, b1, held in self._blocks:
            if b0 >= through:
                break
            pieces.append(_bytes_through(b0, b1, held, through))
        region = b"".join(pieces)
        events = region.count(b"\n\n")
        # Only the short needle over all of it (a longer one is searched in C at a few
        # times its cost): ``[DONE]`` ends a stream, so it can only be at the region's end,
        # and pings come in streams whose events are named (each one's first line).
        if region.find(b"[DONE]", len(region) - _DONE_TAIL) >= 0:
            events -= 1
        if region.find(b"event:", 0, _NAMED_HEAD) >= 0:
            events -= region.count(b"event: ping")
        events = max(events, 0)
        self._counted = (scanning, through, events)
        return events
