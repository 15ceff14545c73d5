"""Read stored spans: OTLP/JSON files, one export request per line or one document.

Files are read line by line, never whole (a pretty-printed single document excepted): the
report's memory is bounded by the largest trace, not by the file.  ``iter_traces`` hands
out each trace's spans once the last line holding them has been read, found by a first
pass that only scans lines for ``"traceId"`` (a regular expression, no JSON parsing).
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._times import TimeCheck

AttributeFilter = Callable[[str, Any], bool] | Collection[str]
"""Which attributes to keep on a read span: ``(key, value) -> keep?``, or the set of keys to
keep (faster: the values of the others are never decoded)."""

ByteCounter = Callable[[int], None]
"""Called with the size of each line read (both passes): a progress display's feed."""


class TraceFileError(ValueError):
    """A trace file that cannot be read at all (missing, empty, not OTLP/JSON)."""


@dataclass(slots=True)
class StoredSpan:
    """One span as stored: ids in hex, times in integer nanoseconds, plain attributes."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str = "UNSET"
    #: The ``service.name`` of the span's resource, or a Jaeger process's ("" when none).
    service: str = ""


@dataclass(slots=True)
class ReadResult:
    """The spans read and one message per line that could not be used."""

    spans: list[StoredSpan]
    problems: list[str]


def read_spans(path: str | Path) -> ReadResult:
    """Every span in an OTLP/JSON file, all attributes kept; malformed lines are reported
    and skipped.  Holds the whole file's spans: the report streams with ``iter_traces``."""
    reader = _Reader([Path(path)], None)
    spans = [span for _, _, batch in reader.documents() for span in batch]
    reader.check_found_any()
    return ReadResult(spans, reader.problems)


def iter_traces(paths: Iterable[str | Path], problems: list[str], *,
                keep: AttributeFilter | None = None,
                on_bytes: ByteCounter | None = None) -> Iterator[list[StoredSpan]]:
    """The spans of each trace in ``paths`` (read in order, as one stream), a trace at a
    time, as soon as the last line holding its spans has been read.

    Memory: the spans of the traces not yet complete, with only the attributes ``keep``
    accepts.  Problems (malformed lines, …) are appended to ``problems`` as they are met
    (a caller may stop at the first).  ``on_bytes`` sees each line's size, on both passes.
    Raises ``TraceFileError`` when a file is missing or holds nothing readable at all.
    """
    reader = _Reader([Path(p) for p in paths], keep, problems, on_bytes)
    scan = reader.scan()
    pending: dict[str, list[StoredSpan]] = {}
    yield from complete_traces(reader.documents(), scan, pending)
    reader.check_found_any()
    yield from pending.values()


def complete_traces(documents: Iterable[tuple[int, str, list[StoredSpan]]], scan: Scan,
                    pending: dict[str, list[StoredSpan]], start: int = 0,
                    ) -> Iterator[list[StoredSpan]]:
    """Each trace of ``documents`` whose lines all lie at or after line ``start``, once its
    last line has been read; the spans of the others (begun before ``start``, ending after
    the documents read, or not found by the scan) are left in ``pending``, by trace id."""
    last_line, first_line = scan.last, scan.first
    for index, _, batch in documents:
        touched = set()
        for span in batch:
            spans = pending.get(span.trace_id)
            if spans is None:
                spans = pending[span.trace_id] = []
            spans.append(span)
            touched.add(span.trace_id)
        for trace_id in touched:
            last = last_line.get(trace_id)
            # Not found by the scan (an escaped id, a line appended since): kept to the end.
            if last is not None and last <= index and first_line[trace_id] >= start:
                yield pending.pop(trace_id)


@dataclass(slots=True)
class Cut:
    """Where a line starts: its index across the files, the file's position in the list,
    the byte offset in that file and the line's number in it (from 1)."""

    index: int
    file: int
    offset: int
    number: int


@dataclass(slots=True)
class Scan:
    """What the first pass finds: the first and last line index naming each trace id, and
    how many lines of each file (by its position in the list) it read."""

    first: dict[str, int]
    last: dict[str, int]
    lines: dict[int, int]


def _optional_fast_loads() -> Callable[[bytes], Any] | None:
    """``orjson.loads`` when orjson is installed (it is not a dependency of ours; other
    packages often bring it) and not turned off with ``AGENT_LATENCY_REPORT_JSON=stdlib``.

    Why: parsing is half of a report's CPU and orjson parses these lines 2.3 times as fast
    (benchmarks/bench_report_read.py).  Results are the standard library's: any line orjson
    rejects (malformed, nested past its 1,024 levels, NaN literals, integers past 64 bits)
    is parsed again by ``json.loads``, which accepts it or words the error as always.
    """
    if os.environ.get("AGENT_LATENCY_REPORT_JSON", "").strip().lower() == "stdlib":
        return None
    try:
        # Optional: the standard library's json is the fallback.
        from orjson import loads
    except ImportError:
        return None
    return loads


_fast_loads = _optional_fast_loads()

# A span's or a link's trace id in a raw line: a link's only delays its trace, harmlessly.
_TRACE_ID = re.compile(rb'"traceId"\s*:\s*"([^"\\]*)"')
_BLOCK = 1 << 18  # a first-pass read; about three times this is held at once


class _Reader:
    """Lines of several files as one stream, numbered across files, parsed one at a time."""

    __slots__ = ("_paths", "_keep", "problems", "documents_read", "_on_bytes", "_times")

    def __init__(self, paths: list[Path], keep: AttributeFilter | None,
                 problems: list[str] | None = None,
                 on_bytes: ByteCounter | None = None) -> None:
        self._paths = paths
        self._keep = keep
        self.problems: list[str] = [] if problems is None else problems
        self.documents_read = 0
        self._on_bytes = on_bytes
        self._times = TimeCheck(self.problems)

    def _open(self, path: Path) -> Any:
        try:
            return path.open("rb")
        except FileNotFoundError:
            raise TraceFileError(f"{path}: no such file (run an instrumented program first, "
                                 "or name the file to read)") from None
        except OSError as exc:
            raise TraceFileError(f"{path}: cannot read: {exc}") from None

    def _lines(self, start: Cut | None = None,
               stop: int | None = None) -> Iterator[tuple[int, Path, int, bytes]]:
        """``(index across files, file, line number in it, raw line)``, from the line
        ``start`` (default: the first) to the line before index ``stop`` (default: the
        end)."""
        index = start.index if start is not None else 0
        on_bytes = self._on_bytes
        for file_no in range(start.file if start is not None else 0, len(self._paths)):
            path = self._paths[file_no]
            with self._open(path) as lines:
                number = 1
                if start is not None and file_no == start.file:
                    lines.seek(start.offset)
                    number = start.number
                try:
                    for number, line in enumerate(lines, number):  # noqa: B020
                        if stop is not None and index >= stop:
                            return
                        if on_bytes is not None:
                            on_bytes(len(line))
                        yield index, path, number, line
                        index += 1
                except OSError as exc:
                    raise TraceFileError(f"{path}: cannot read: {exc}") from None

    def scan(self, start: Cut | None = None, end: tuple[int, int] | None = None) -> Scan:
        """First pass: the first and last line naming each trace id, counted from ``start``
        (a line start; default: the stream's first line) up to ``end`` (``(file, byte
        offset)`` of a line start, exclusive; default: the stream's end), and the number of
        lines of each file in that stretch.

        Reads blocks of whole lines (256 KiB at a time) and finds each line's distinct trace
        ids within the block (no copy per line): the pass costs little beside the parse.
        """
        first: dict[bytes, int] = {}
        last: dict[bytes, int] = {}
        lines: dict[int, int] = {}
        index = start.index if start is not None else 0
        on_bytes = self._on_bytes
        findall = _TRACE_ID.findall
        first_file = start.file if start is not None else 0
        last_file = end[0] if end is not None else len(self._paths) - 1
        for file_no in range(first_file, min(last_file, len(self._paths) - 1) + 1):
            path = self._paths[file_no]
            file_start = index
            with self._open(path) as f:
                if start is not None and file_no == start.file:
                    f.seek(start.offset)
                left = end[1] - f.tell() if end is not None and file_no == end[0] else -1
                pending: list[bytes] = []
                while True:
                    try:
                        chunk = f.read(_BLOCK if left < 0 else min(_BLOCK, left))
                    except OSError as exc:
                        raise TraceFileError(f"{path}: cannot read: {exc}") from None
                    if left > 0:
                        left -= len(chunk)
                    if on_bytes is not None and chunk:
                        on_bytes(len(chunk))
                    line_end = chunk.rfind(b"\n") + 1 if chunk else -1
                    if line_end == 0:  # no line ends in this chunk: keep it for the next
                        pending.append(chunk)
                        continue
                    if chunk:
                        pending.append(chunk[:line_end])
                        rest = chunk[line_end:]
                    else:  # the end: what is left is a last line without a newline
                        rest = b""
                    block = b"".join(pending)
                    pending = [rest] if rest else []
                    # Per line: its distinct trace ids (a line holds a batch of spans of
                    # a few traces), found by the regex engine within the line's bounds.
                    pos = 0
                    end_of_block = len(block)
                    while pos < end_of_block:
                        newline = block.find(b"\n", pos)
                        line_stop = end_of_block if newline < 0 else newline
                        for trace_id in set(findall(block, pos, line_stop)):
                            if trace_id not in first:
                                first[trace_id] = index
                            last[trace_id] = index
                        if newline < 0:
                            break
                        index += 1
                        pos = newline + 1
                    if not chunk:
                        if block and not block.endswith(b"\n"):
                            index += 1
                        break
            lines[file_no] = index - file_start
        return Scan({_text(t): line for t, line in first.items()},
                    {_text(t): line for t, line in last.items()}, lines)

    def line_start_after(self, file_no: int, offset: int) -> tuple[int, int] | None:
        """``(file, offset)`` of the first line starting at or after ``offset`` of file
        ``file_no`` (possibly in a later file), or ``None`` at the stream's end."""
        for number in range(file_no, len(self._paths)):
            with self._open(self._paths[number]) as f:
                if number == file_no and offset > 0:
                    f.seek(offset - 1)
                    f.readline()  # the rest of the line the offset falls in
                if f.read(1):
                    return number, f.tell() - 1
        return None

    def documents(self, start: Cut | None = None,
                  stop: int | None = None) -> Iterator[tuple[int, str, list[StoredSpan]]]:
        """``(line index, where, spans)`` per export request; a pretty-printed document (a
        file whose first two lines are not JSON on their own) is read whole, at index -1.
        ``start`` and ``stop``: only those lines (as :meth:`_lines`), each parsed alone."""
        first_two: list[tuple[int, Path, int, bytes]] = []
        lines = self._lines(start, stop)
        for item in lines if start is None and stop is None else ():
            if item[3].strip():
                first_two.append(item)
                if len(first_two) == 2:
                    break
        if first_two and all(not_json(item[3]) for item in first_two) and first_two[
                0][3].lstrip().startswith(b"{"):
            whole = self._whole_document(first_two[0][1])
            if whole is not None:
                yield whole
                # Any further file goes on line by line (the generator reads ``whole_path``
                # later: not ``first_two``, emptied below).
                whole_path = first_two[0][1]
                lines = (item for item in lines if item[1] != whole_path)
                first_two = []
        for index, path, number, line in _chain(first_two, lines):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            doc = self._parse(line, where)
            if doc is not None:
                spans = self._spans(doc, where, path, f"line {number}")
                if spans is not None:
                    yield index, where, spans

    def _whole_document(self, path: Path) -> tuple[int, str, list[StoredSpan]] | None:
        with self._open(path) as f:
            text = f.read()
        try:
            doc = json.loads(text)
        except RecursionError:
            self.problems.append(f"{path}: nested too deeply; skipped")
            return -1, str(path), []
        except ValueError:
            return None  # not one document: read line by line
        spans = self._spans(doc, str(path), path)
        return (-1, str(path), spans) if spans is not None else (-1, str(path), [])

    def _parse(self, line: bytes, where: str) -> Any:
        if _fast_loads is not None:
            try:
                return _fast_loads(line)
            except ValueError:
                pass  # the standard library decides, and words the error as always
        try:
            return json.loads(line)
        except json.JSONDecodeError as exc:
            # Some of json's messages end in "at" already ("Unterminated string starting at").
            said = exc.msg.removesuffix(" at")
            self.problems.append(f"{where}: malformed JSON ({said} at column {exc.colno}); "
                                 "line skipped")
        except RecursionError:
            self.problems.append(f"{where}: nested too deeply; skipped")
        except UnicodeDecodeError:
            self.problems.append(f"{where}: not UTF-8; line skipped")
        except ValueError as exc:  # a number json cannot hold (an integer of 5,000 digits)
            self.problems.append(f"{where}: unreadable JSON ({exc}); line skipped")
        return None

    def _spans(self, doc: Any, where: str, path: Path, at: str = "") -> list[StoredSpan] | None:
        try:
            spans = list(_spans_of(doc, self._keep))
        except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError) as exc:
            self.problems.append(f"{where}: not an OTLP/JSON trace export "
                                 f"({type(exc).__name__}: {exc}); skipped")
            return None
        except RecursionError:
            self.problems.append(f"{where}: nested too deeply; skipped")
            return None
        self.documents_read += 1
        return self._times.keep(spans, str(path), at)

    def check_found_any(self) -> None:
        """Raise when every non-empty line was unreadable."""
        check_found_any(self._paths, self.documents_read, self.problems)


def check_found_any(paths: Iterable[Any], documents_read: int, problems: list[str]) -> None:
    """Raise :class:`TraceFileError` when no document of ``paths`` could be read and there
    were problems (every non-empty line unreadable)."""
    if not documents_read and problems:
        names = ", ".join(str(p) for p in paths)
        raise TraceFileError(f"{names}: no OTLP/JSON spans found ({problems[0]})")


def _text(trace_id: bytes) -> str:
    return trace_id.decode("ascii", "replace")


def _chain(first: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from first
    yield from rest


def not_json(line: bytes) -> bool:
    """Whether ``line`` is not one JSON document on its own."""
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return True
    return False


def _spans_of(doc: Any, keep: AttributeFilter | None) -> Iterator[StoredSpan]:
    keys = None if keep is None or callable(keep) else keep
    test = keep if callable(keep) else None
    value_of = _value
    # ``batches`` and ``instrumentationLibrarySpans``: Tempo's and older OTLP/JSON names.
    for rs in doc["resourceSpans"] if "resourceSpans" in doc else doc["batches"]:
        service = _service(rs.get("resource"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            for span in ss.get("spans", ()):
                if keys is not None:
                    # The common case for the report: only named keys, others not decoded.
                    # Most kept values are durations: take a double without a call.
                    attributes = {key: float(v["doubleValue"]) if "doubleValue" in v
                                  else value_of(v)
                                  for kv in span.get("attributes", ())
                                  if (key := kv["key"]) in keys
                                  for v in (kv.get("value") or {},)}
                else:
                    attributes = {}
                    for kv in span.get("attributes", ()):
                        value = value_of(kv.get("value", {}))
                        if test is None or test(kv["key"], value):
                            attributes[kv["key"]] = value
                status = span.get("status")
                yield StoredSpan(
                    # Hex as OTLP/JSON writes it; base64 (protobuf's JSON mapping, Tempo's
                    # API) converted.
                    trace_id if len(trace_id := span["traceId"]) == 32 else hex_id(trace_id, 16),
                    span_id if len(span_id := span["spanId"]) == 16 else hex_id(span_id, 8),
                    parent if len(parent := span.get("parentSpanId", "") or "") in (0, 16)
                    else hex_id(parent, 8),
                    span.get("name", ""), int(span["startTimeUnixNano"]),
                    int(span["endTimeUnixNano"]), attributes,
                    _status(status) if status else "UNSET", service)


def _service(resource: Any) -> str:
    if not resource:
        return ""
    for kv in resource.get("attributes", ()):
        if kv.get("key") == "service.name":
            return str(_value(kv.get("value", {})) or "")
    return ""


def hex_id(text: str, size: int) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lower-case hex.  OTLP/JSON writes hex;
    protobuf's JSON mapping, which Tempo's API follows, writes bytes as base64."""
    if len(text) == 2 * size or not text:
        return text  # hex already (the fast path: the local file's ids)
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return text
    return raw.hex() if len(raw) == size else text


def _value(value: dict[str, Any]) -> Any:
    # One AnyValue holds one member: take it rather than probing each kind in turn.
    for kind, raw in value.items():
        if kind == "stringValue":
            return raw
        convert = _CONVERT.get(kind)
        return convert(raw) if convert is not None else None
    return None


def int64(raw: Any) -> int:
    """An OTLP ``intValue`` (a string or a number) as an int; one outside int64 is not one
    (ValueError): the budget code divides by and into these."""
    value = int(raw)
    if not -(1 << 63) <= value < 1 << 63:
        raise ValueError(f"{str(raw)[:30]} is not a 64-bit integer")
    return value


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "intValue": int64,
    "doubleValue": float,
    "boolValue": bool,
    "arrayValue": lambda array: [_value(v) for v in array.get("values", ())],
}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_OK": "OK",
           "STATUS_CODE_ERROR": "ERROR"}


def _status(status: dict[str, Any]) -> str:
    return _STATUS.get(status.get("code", 0), "UNSET")
