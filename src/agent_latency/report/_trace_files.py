"""Trace files: OTLP/JSON, OTLP/protobuf and the Collector file exporter's ``proto``
format, sniffed from their first bytes (see ``_sources`` for what a source may be)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ._read import AttributeFilter, StoredSpan, TraceFileError, iter_traces
from ._times import TimeCheck

FILE_FORMATS = ("otlp-json", "otlp-proto", "collector-proto")

#: An :data:`AttributeFilter` as :func:`keeper` makes it: always the function.
KeepFunction = Callable[[str, Any], bool]


def keeper(keep: Any) -> KeepFunction | None:
    """``keep`` (None, a filter, or a collection of keys) as a filter."""
    if keep is None or callable(keep):
        return keep
    keys = keep
    return lambda key, _value: key in keys


def read_files(paths: list[Path], forced: str | None, problems: list[str],
               keep: AttributeFilter | None) -> Iterator[list[StoredSpan]]:
    json_paths = [p for p in paths if (forced or sniff(p)) == "otlp-json"]
    yield from iter_traces(json_paths, problems, keep=keep) if json_paths else ()
    times = TimeCheck(problems)
    for path in paths:
        kind = forced or sniff(path)
        if kind == "otlp-proto":
            spans = list(_proto_spans(_read_whole(path), keeper(keep)))
            yield from group(times.keep(spans, str(path)))
        elif kind == "collector-proto":
            yield from _framed_traces(path, problems, keeper(keep), times)


def sniff(path: Path) -> str:
    """``otlp-json`` (text starting ``{``), ``otlp-proto`` (a message: its first byte is
    field 1's tag, 0x0A) or ``collector-proto`` (a length prefix: 0x00 for any frame under
    16 MiB)."""
    try:
        with path.open("rb") as f:
            head = f.read(64)
    except FileNotFoundError:
        raise TraceFileError(f"{path}: no such file (run an instrumented program first, or "
                             "name the file to read)") from None
    except OSError as exc:
        raise TraceFileError(f"{path}: cannot read: {exc}") from None
    text = head.lstrip()
    if not text or text[:1] in (b"{", b"["):
        return "otlp-json"
    if head[:1] == b"\x0a":
        return "otlp-proto"
    if _is_text(head):
        raise TraceFileError(f"{path}: text, not a trace file (OTLP/JSON starts with '{{', "
                             "OTLP/protobuf is binary)")
    return "collector-proto"


def _is_text(head: bytes) -> bool:
    """Whether ``head`` reads as printable UTF-8 text.  A Collector ``proto`` file starts
    with a length whose first byte is 0x00 for any frame under 16 MiB: never text."""
    try:
        decoded = head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the end of the 64 bytes is text
        if exc.start < len(head) - 3:
            return False
        decoded = head[:exc.start].decode("utf-8")
    return all(c.isprintable() or c in "\t\r\n" for c in decoded)


def _read_whole(path: Path) -> Any:
    request = _request_type()()
    try:
        request.ParseFromString(path.read_bytes())
    except OSError as exc:
        raise TraceFileError(f"{path}: cannot read: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError (its class varies by backend)
        raise TraceFileError(f"{path}: not an OTLP/protobuf ExportTraceServiceRequest "
                             f"({exc})") from None
    return request


def _request_type() -> Any:
    # protobuf only for OTLP/protobuf input.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    return ExportTraceServiceRequest


def _frames(path: Path, problems: list[str]) -> Iterator[tuple[int, bytes]]:
    """``(offset, message bytes)`` of each length-prefixed request in ``path``."""
    try:
        f = path.open("rb")
    except OSError as exc:
        raise TraceFileError(f"{path}: cannot read: {exc}") from None
    with f:
        offset = 0
        while True:
            prefix = f.read(4)
            if not prefix:
                return
            if len(prefix) < 4:
                problems.append(f"{path}: offset {offset}: truncated length prefix; "
                                "the rest is skipped")
                return
            (size,) = struct.unpack(">I", prefix)
            body = f.read(size)
            if len(body) < size:
                problems.append(f"{path}: offset {offset}: a {size}-byte request cut at "
                                f"{len(body)} bytes (a file still being written?); skipped")
                return
            yield offset, body
            offset += 4 + size


def _framed_traces(path: Path, problems: list[str], keep: KeepFunction | None,
                   times: TimeCheck) -> Iterator[list[StoredSpan]]:
    """The Collector's ``proto`` file, a trace at a time: a first pass notes the last frame
    holding each trace, the second hands a trace out once that frame is read (memory: the
    traces still open, as for JSON lines)."""
    request_type = _request_type()
    last: dict[str, int] = {}
    readable = 0
    for index, (_offset, body) in enumerate(_frames(path, [])):
        request = request_type()
        try:
            request.ParseFromString(body)
        except Exception:  # noqa: BLE001, S112 - reported by the second pass
            continue
        readable += 1
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    last[span.trace_id.hex()] = index
    pending: dict[str, list[StoredSpan]] = {}
    for index, (offset, body) in enumerate(_frames(path, problems)):
        request = request_type()
        try:
            request.ParseFromString(body)
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, reported
            problems.append(f"{path}: offset {offset}: not an ExportTraceServiceRequest "
                            f"({exc}); skipped")
            continue
        touched = set()
        for span in times.keep(list(_proto_spans(request, keep)), str(path),
                               f"offset {offset}"):
            pending.setdefault(span.trace_id, []).append(span)
            touched.add(span.trace_id)
        for trace_id in touched:
            if last.get(trace_id, index) <= index:
                yield pending.pop(trace_id)
    if not readable and path.stat().st_size:
        raise TraceFileError(f"{path}: no OTLP/protobuf spans found "
                             f"({problems[-1] if problems else 'unreadable'})")
    yield from pending.values()


_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def _proto_spans(request: Any, keep: KeepFunction | None) -> Iterator[StoredSpan]:
    for rs in request.resource_spans:
        service = ""
        for kv in rs.resource.attributes:
            if kv.key == "service.name":
                service = kv.value.string_value
        for ss in rs.scope_spans:
            for span in ss.spans:
                attributes = {}
                for kv in span.attributes:
                    value = _any_value(kv.value)
                    if keep is None or keep(kv.key, value):
                        attributes[kv.key] = value
                yield StoredSpan(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_id=span.parent_span_id.hex(), name=span.name,
                    start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                    attributes=attributes, status=_STATUS.get(span.status.code, "UNSET"),
                    service=service)


def _any_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None or kind == "kvlist_value":
        return None
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    return getattr(value, kind)


def group(spans: Iterable[StoredSpan]) -> Iterator[list[StoredSpan]]:
    traces: dict[str, list[StoredSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    yield from traces.values()
