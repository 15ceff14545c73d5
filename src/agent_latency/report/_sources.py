"""Where stored spans come from: files, directories and trace backends, chosen by the source.

``SOURCE`` is one of

* a file: OTLP/JSON lines (the local default's, the Collector file exporter's ``json``
  format), one OTLP/JSON document, an OTLP/protobuf ``ExportTraceServiceRequest``, or the
  Collector file exporter's ``proto`` format (each request preceded by its length, a 4-byte
  big-endian unsigned integer).  The format is sniffed from the first bytes; a prefix
  ``otlp-json:``, ``otlp-proto:`` or ``collector-proto:`` forces one;
* a directory: every regular file in it (rotated files included), as one set of runs;
* ``jaeger+http://HOST:16686?service=NAME[&limit=…&lookback=…&start=…&end=…&operation=…]``:
  Jaeger's query API, ``GET /api/traces`` (``?trace=ID`` reads ``/api/traces/ID``);
* ``tempo+http://HOST:3200?q=TRACEQL[&limit=…&start=…&end=…]`` (or ``tags=…``): Grafana
  Tempo's ``GET /api/search``, then ``GET /api/traces/{id}`` per trace found
  (``?trace=ID`` reads one);
* ``phoenix+http://HOST:6006?project=NAME[&start_time=…&end_time=…]``: Arize Phoenix's
  ``GET /v1/projects/{name}/spans``, page by page (``PHOENIX_API_KEY`` is sent as a bearer
  token when set).

``+https`` works for each backend.  Every source yields one trace's spans at a time; what
each holds in memory is in docs/report.md ("Reading from backends").  Two checks run on
every trace, whatever its source, and are reported, never silent: spans from several
services whose clocks disagree (a child outside its parent: its service's spans are
shifted into the parent, as Jaeger's UI does, and the shift is stated) here, and LLM or
tool spans that belong to no task (the task span is missing: the process died first) in
the task tree, which finds every span's task anyway (``codec.assemble``).
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import json
import os
import re
import struct
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .. import semconv
from . import _http
from ._http import Limits
from ._keys import BUDGET_KEYS
from ._read import (
    AttributeFilter,
    StoredSpan,
    TraceFileError,
    _spans_of,
    int64,
    iter_traces,
)
from ._summary import start_order
from ._tasks import StoredTask, find_tasks
from ._times import TimeCheck

__all__ = ["TraceFileError", "is_backend", "iter_source", "load_source", "check_traces"]

BACKEND_SCHEMES = ("jaeger", "tempo", "phoenix")
FILE_FORMATS = ("otlp-json", "otlp-proto", "collector-proto")

#: Phoenix's and Jaeger's page size, and Jaeger's and Tempo's default number of traces.
PAGE_SIZE = 1000
DEFAULT_TRACE_LIMIT = 1000

#: An :data:`AttributeFilter` as :func:`_keeper` makes it: always the function.
KeepFunction = Callable[[str, Any], bool]


def _keeper(keep: Any) -> KeepFunction | None:
    """``keep`` (None, a filter, or a collection of keys) as a filter."""
    if keep is None or callable(keep):
        return keep
    keys = keep
    return lambda key, _value: key in keys


def is_backend(source: str | Path) -> bool:
    """Whether ``source`` names a trace backend (a URL with one of our schemes)."""
    source = str(source)
    scheme = source.split("://", 1)[0] if "://" in source else ""
    return scheme.split("+", 1)[0] in BACKEND_SCHEMES and "+" in scheme


def iter_source(source: str | Path, problems: list[str], *,
                keep: Any = None) -> Iterator[list[StoredSpan]]:
    """Each trace's spans from ``source`` (see the module doc), checked for clock skew;
    problems are appended to ``problems``.  ``keep``: which attributes to
    keep (a filter or a collection of keys; None keeps all)."""
    return check_traces(_raw_traces(str(source), problems, keep), problems)


def iter_sources(sources: Iterable[str | Path], problems: list[str], *, keep: Any = None,
                 on_bytes: Any = None, notes: list[str] | None = None,
                 skip_unreadable: bool = False) -> Iterator[list[StoredSpan]]:
    """``iter_source`` over several sources in order; consecutive OTLP/JSON files are read
    as one stream (a trace cut by a rotation is whole again), ``on_bytes`` sees their
    lines' sizes.  ``notes`` (default: ``problems``) receives what the trace checks state
    (clock skew corrected, spans in no task): facts about readable input, not bad input.
    With ``skip_unreadable`` a source that cannot be read at all (not a trace file, a
    backend that fails) is a problem and the others are read; only when none could be read
    is its :class:`TraceFileError` raised."""
    failed: list[TraceFileError] = []
    read = [0]

    def each(make: Callable[[], Iterable[list[StoredSpan]]]) -> Iterator[list[StoredSpan]]:
        try:
            yield from make()
        except TraceFileError as exc:
            if not skip_unreadable:
                raise
            failed.append(exc)
            if problems and problems[-1] in str(exc):  # the error quotes the last problem
                problems[-1] = str(exc)
            else:
                problems.append(str(exc))
        else:
            read[0] += 1

    def raw() -> Iterator[list[StoredSpan]]:
        json_run: list[Path] = []
        for source in [*sources, None]:
            plain = source is not None and not is_backend(source) and not str(
                source).startswith(tuple(f + ":" for f in FILE_FORMATS))
            if (plain and source is not None and not Path(source).is_dir()
                    and _sniff_or_none(Path(source)) == "otlp-json"):
                json_run.append(Path(source))
                continue
            if json_run:
                yield from each(functools.partial(iter_traces, json_run, problems, keep=keep,
                                                  on_bytes=on_bytes))
                json_run = []
            if source is not None:
                yield from each(functools.partial(_raw_traces, str(source), problems, keep))
        if failed and not read[0]:
            raise failed[0]

    return check_traces(raw(), problems if notes is None else notes)


def _sniff_or_none(path: Path) -> str | None:
    """:func:`_sniff`, None where the file cannot be read (its reader says why)."""
    try:
        return _sniff(path)
    except TraceFileError:
        return None


def load_source(source: str | Path, task: str | None = None, *,
                keep: Any = None) -> tuple[list[StoredTask], list[str]]:
    """The tasks in ``source`` (optionally only those named ``task``) in start order, and
    the problems met."""
    if keep is None:
        keep = BUDGET_KEYS
    problems: list[str] = []
    tasks: list[StoredTask] = []
    for spans in iter_source(source, problems, keep=keep):
        found, more = find_tasks(spans)
        tasks.extend(found if task is None else (t for t in found if t.name == task))
        problems.extend(more)
    tasks.sort(key=start_order)
    return tasks, problems


def _raw_traces(source: str, problems: list[str], keep: Any) -> Iterator[list[StoredSpan]]:
    if is_backend(source):
        scheme, _, rest = source.partition("://")
        backend, _, transport = scheme.partition("+")
        # From here on no message can name the URL's password: it is a header now.
        url, auth = _http.split_userinfo(f"{transport}://{rest}")
        if transport not in ("http", "https"):
            raise TraceFileError(f"{_http.redact_userinfo(source)}: use {backend}+http:// "
                                 f"or {backend}+https://")
        reader = {"jaeger": _jaeger, "tempo": _tempo, "phoenix": _phoenix}[backend]
        return _guarded(url, reader(url, problems,
                                    keep if backend == "tempo" else _keeper(keep), auth))
    forced = None
    for name in FILE_FORMATS:
        if source.startswith(name + ":"):
            forced, source = name, source[len(name) + 1:]
    path = Path(source)
    paths = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    if path.is_dir() and not paths:
        raise TraceFileError(f"{path}: an empty directory")
    return _files(paths, forced, problems, keep)


def _files(paths: list[Path], forced: str | None, problems: list[str],
           keep: AttributeFilter | None) -> Iterator[list[StoredSpan]]:
    json_paths = [p for p in paths if (forced or _sniff(p)) == "otlp-json"]
    yield from iter_traces(json_paths, problems, keep=keep) if json_paths else ()
    times = TimeCheck(problems)
    for path in paths:
        kind = forced or _sniff(path)
        if kind == "otlp-proto":
            spans = list(_proto_spans(_read_whole(path), _keeper(keep)))
            yield from _group(times.keep(spans, str(path)))
        elif kind == "collector-proto":
            yield from _framed_traces(path, problems, _keeper(keep), times)


def _sniff(path: Path) -> str:
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


def _group(spans: Iterable[StoredSpan]) -> Iterator[list[StoredSpan]]:
    traces: dict[str, list[StoredSpan]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    yield from traces.values()


# ---- HTTP backends ---------------------------------------------------------------------
# What a backend answers is untrusted: every shape is checked (a wrong one is a one-line
# TraceFileError naming the URL), ids are checked before they go into a URL, and requests
# are bounded (report/_http.py).

_TRACE_ID = re.compile(r"[0-9a-fA-F]{1,32}")


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """``(base URL without query, query parameters)``."""
    parts = urllib.parse.urlsplit(url)
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "",
                                    ""))
    return base, dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))


def _get_json(url: str, limits: Limits, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON object ``GET url`` answers (see ``report/_http.py`` for the bounds)."""
    body = _http.get(url, headers or {}, limits)
    try:
        doc = json.loads(body)
    except RecursionError:
        raise TraceFileError(f"{url}: the answer is nested too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise TraceFileError(f"{url}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise TraceFileError(f"{url}: not the backend's answer (a JSON "
                             f"{type(doc).__name__} where an object belongs)")
    return doc


def _listed(doc: dict[str, Any], key: str, url: str) -> list[Any]:
    """``doc[key]``, a list (missing or null: empty); anything else is a TraceFileError."""
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise TraceFileError(f"{url}: not the backend's answer ({key!r} is a JSON "
                             f"{type(value).__name__}, not a list)")
    return value


def _trace_id_param(value: str, url: str) -> str:
    if not _TRACE_ID.fullmatch(value):
        raise TraceFileError(f"{url}: trace={value!r} is not a trace id (1 to 32 hex digits)")
    return value


def _limit_param(params: dict[str, str], url: str, default: int) -> int:
    """``&limit=`` as a positive whole number (set to ``default`` when absent)."""
    text = params.setdefault("limit", str(default))
    if not text.isdigit() or not 0 < int(text) <= 10**9:
        raise TraceFileError(f"{url}: limit={text!r} is not a whole number from 1 to 10^9")
    params["limit"] = str(int(text))
    return int(text)


_SHAPE_ERRORS = (LookupError, TypeError, ValueError, AttributeError, ArithmeticError,
                 RecursionError)


def _guarded(url: str, traces: Iterator[list[StoredSpan]]) -> Iterator[list[StoredSpan]]:
    """``traces``, any exception a shape the checks missed raises made a one-line
    TraceFileError naming ``url`` (never a traceback)."""
    try:
        yield from traces
    except TraceFileError:
        raise
    except _SHAPE_ERRORS as exc:
        raise TraceFileError(f"{url}: not the backend's answer ({type(exc).__name__}: "
                             f"{exc})") from None


def _jaeger(url: str, problems: list[str], keep: KeepFunction | None,
            auth: dict[str, str]) -> Iterator[list[StoredSpan]]:
    """Jaeger's query API: one response holds whole traces, handed out one at a time."""
    base, params = _split_url(url)
    limits = Limits.from_environment()
    times = TimeCheck(problems)
    trace_id = params.pop("trace", None)
    if trace_id:
        query = f"{base}/api/traces/{_trace_id_param(trace_id, url)}"
    else:
        if "service" not in params:
            raise TraceFileError(f"{url}: Jaeger needs ?service=NAME (or ?trace=ID)")
        _limit_param(params, url, DEFAULT_TRACE_LIMIT)
        query = f"{base}/api/traces?{urllib.parse.urlencode(params)}"
    doc = _get_json(query, limits, auth)
    for error in _listed(doc, "errors", query):
        message = error.get("msg", error) if isinstance(error, dict) else error
        problems.append(f"{query}: Jaeger reports: {message}")
    for trace in _listed(doc, "data", query):
        if not isinstance(trace, dict):
            problems.append(f"{query}: a trace that is a JSON {type(trace).__name__}, not "
                            "Jaeger's model; skipped")
            continue
        try:
            spans = list(_jaeger_spans(trace, keep))
        except _SHAPE_ERRORS as exc:
            problems.append(f"{query}: trace {str(trace.get('traceID', '?'))[:40]!r}: not "
                            f"Jaeger's model ({type(exc).__name__}: {exc}); skipped")
            continue
        yield times.keep(spans, url, f"trace {spans[0].trace_id}" if spans else "")


def _jaeger_spans(trace: dict[str, Any], keep: KeepFunction | None) -> Iterator[StoredSpan]:
    processes = trace.get("processes") or {}
    for span in trace["spans"]:
        trace_id = span["traceID"].zfill(32)
        parent = ""
        # CHILD_OF first; FOLLOWS_FROM only when nothing else links the span.
        for ref in sorted(span.get("references") or (),
                          key=lambda r: r.get("refType") != "CHILD_OF"):
            if ref.get("traceID", "").zfill(32) == trace_id:
                parent = ref["spanID"].zfill(16)
                break
        attributes, status = {}, "UNSET"
        for tag in span.get("tags") or ():
            key, value = tag["key"], _jaeger_value(tag)
            if key == "otel.status_code":
                status = str(value).upper() if str(value).upper() in ("OK", "ERROR") else status
            elif key == "error" and value is True and status == "UNSET":
                status = "ERROR"
            if keep is None or keep(key, value):
                attributes[key] = value
        start_us, duration_us = int(span["startTime"]), int(span["duration"])
        process = processes.get(span.get("processID", "")) or {}
        yield StoredSpan(
            trace_id=trace_id, span_id=span["spanID"].zfill(16), parent_id=parent,
            name=str(span.get("operationName", "")), start_ns=start_us * 1000,
            end_ns=(start_us + duration_us) * 1000, attributes=attributes, status=status,
            service=str(process.get("serviceName", "")))


def _jaeger_value(tag: dict[str, Any]) -> Any:
    value: Any = tag.get("value")
    kind = tag.get("type", "string")
    if kind == "int64":
        return int64(value)
    if kind == "float64":
        return float(value)
    if kind == "bool":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if kind == "binary":
        return base64.b64decode(value) if isinstance(value, str) else value
    return value


def _tempo(url: str, problems: list[str], keep: AttributeFilter | None,
           auth: dict[str, str]) -> Iterator[list[StoredSpan]]:
    """Tempo: a search for trace ids, then each trace on its own (memory: one trace)."""
    base, params = _split_url(url)
    limits = Limits.from_environment()
    times = TimeCheck(problems)
    trace_id = params.pop("trace", None)
    if trace_id:
        ids = [_trace_id_param(trace_id, url)]
    else:
        limit = _limit_param(params, url, DEFAULT_TRACE_LIMIT)
        search = f"{base}/api/search?{urllib.parse.urlencode(params)}"
        found = _listed(_get_json(search, limits, auth), "traces", search)
        ids = []
        for item in found:
            found_id = item.get("traceID") if isinstance(item, dict) else None
            if isinstance(found_id, str) and _TRACE_ID.fullmatch(found_id):
                ids.append(found_id)
            else:
                problems.append(f"{search}: a search result without a trace id "
                                f"({str(item)[:80]!r}); skipped")
        if len(found) >= limit:
            problems.append(f"{search}: the search returned its limit of {limit} "
                            "traces; there may be more (raise &limit= or narrow the search)")
    for trace_id in ids:
        where = f"{base}/api/traces/{trace_id}"
        doc = _get_json(where, limits, auth)
        doc = doc.get("trace", doc)  # /api/v2/traces wraps the trace
        if not doc:
            problems.append(f"{where}: no spans (the trace expired or is not flushed yet)")
            continue
        try:
            spans = list(_spans_of(doc, keep))
        except _SHAPE_ERRORS as exc:
            problems.append(f"{where}: not OTLP/JSON ({type(exc).__name__}: {exc}); skipped")
            continue
        yield times.keep(spans, url, where)


def _phoenix(url: str, problems: list[str], keep: KeepFunction | None,
             auth: dict[str, str]) -> Iterator[list[StoredSpan]]:
    """Phoenix's spans API pages through a project's spans in no trace order, so a trace is
    whole only after the last page: the project's spans are held (budget attributes only).
    Paging stops, with a problem line, at a cursor seen before (a server that never ends its
    listing), at ``AGENT_LATENCY_BACKEND_MAX_PAGES`` pages, at
    ``AGENT_LATENCY_BACKEND_MAX_SPANS`` spans held, at the source's total deadline
    (``AGENT_LATENCY_BACKEND_TOTAL_TIMEOUT``) or at a page that fails after the first: the
    spans read until then are reported all the same."""
    base, params = _split_url(url)
    project = params.pop("project", None)
    if not project:
        raise TraceFileError(f"{url}: Phoenix needs ?project=NAME")
    limits = Limits.from_environment()
    times = TimeCheck(problems)
    headers = dict(auth)
    if key := os.environ.get("PHOENIX_API_KEY"):
        headers["Authorization"] = f"Bearer {key}"
    _limit_param(params, url, PAGE_SIZE)
    path = f"{base}/v1/projects/{urllib.parse.quote(project, safe='')}/spans"
    spans: list[StoredSpan] = []
    stopped = _phoenix_pages(path, params, headers, limits, keep, spans, problems)
    if stopped:
        problems.append(f"{path}: {stopped}; the rest is not read, the {len(spans):,} spans "
                        "read are reported (narrow it with &start_time= and &end_time=)")
    for trace in _group(spans):
        yield times.keep(trace, url)


def _phoenix_pages(path: str, params: dict[str, str], headers: dict[str, str],
                   limits: Limits, keep: KeepFunction | None, spans: list[StoredSpan],
                   problems: list[str]) -> str:
    """Reads the listing's pages into ``spans``; why paging stopped early ("" when the
    listing ended)."""
    cursor: str | None = None
    seen: set[str] = set()
    for page_number in range(1, limits.max_pages + 1):
        if page_number > 1 and limits.out_of_time():
            return (f"stopped after {page_number - 1:,} pages at the {limits.total_s:g} s "
                    f"that all requests to this source get ({_http.TOTAL_TIMEOUT_ENV})")
        if len(spans) >= limits.max_spans:
            return (f"stopped after {page_number - 1:,} pages holding {len(spans):,} spans "
                    f"({_http.MAX_SPANS_ENV})")
        query = f"{path}?" + urllib.parse.urlencode(
            dict(params, cursor=cursor) if cursor else params)
        try:
            page = _get_json(query, limits, headers)
        except TraceFileError as exc:
            if page_number == 1:
                raise
            return f"stopped after {page_number - 1:,} pages: {exc}"
        for item in _listed(page, "data", query):
            try:
                if not isinstance(item, dict):
                    raise TypeError(f"a JSON {type(item).__name__}")
                spans.append(_phoenix_span(item, keep))
            except _SHAPE_ERRORS as exc:
                name = item.get("name", "?") if isinstance(item, dict) else "?"
                problems.append(f"{path}: span {str(name)[:80]!r}: not Phoenix's span model "
                                f"({type(exc).__name__}: {exc}); skipped")
        next_cursor = page.get("next_cursor")
        if not next_cursor:
            return ""
        if not isinstance(next_cursor, str):
            raise TraceFileError(f"{query}: not Phoenix's answer (next_cursor is a JSON "
                                 f"{type(next_cursor).__name__})")
        if next_cursor in seen or next_cursor == cursor:
            return (f"the server gave cursor {next_cursor[:40]!r} again after {page_number} "
                    "pages")
        seen.add(next_cursor)
        cursor = next_cursor
    return f"stopped after {limits.max_pages:,} pages ({_http.MAX_PAGES_ENV})"


def _phoenix_span(item: dict[str, Any], keep: KeepFunction | None) -> StoredSpan:
    context = item["context"]
    attributes = {}
    for key, value in _flatten(item.get("attributes") or {}):
        if isinstance(value, int) and not isinstance(value, bool):
            value = int64(value)
        if keep is None or keep(key, value):
            attributes[key] = value
    status = str(item.get("status_code") or "UNSET").upper()
    return StoredSpan(
        trace_id=str(context["trace_id"]), span_id=str(context["span_id"]),
        parent_id=str(item.get("parent_id") or ""), name=str(item.get("name", "")),
        start_ns=_iso_ns(item["start_time"]), end_ns=_iso_ns(item["end_time"]),
        attributes=attributes, status=status if status in ("OK", "ERROR") else "UNSET")


def _flatten(attributes: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in attributes.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _iso_ns(text: str) -> int:
    """An ISO 8601 time as integer nanoseconds since the epoch, exactly (no float)."""
    moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    delta = moment - _EPOCH
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * 1000


# ---- checks on every trace -------------------------------------------------------------


def check_traces(traces: Iterable[list[StoredSpan]],
                 problems: list[str]) -> Iterator[list[StoredSpan]]:
    """Each trace, its clock skew between services corrected and stated (appended to
    ``problems``), and spans a program lost to a full export queue stated.  LLM calls and
    tools in no task are stated by the task tree (``codec.assemble``), which walks every
    span's ancestry anyway."""
    for spans in traces:
        service = spans[0].service if spans else ""
        if any(s.service != service for s in spans):
            _adjust_clock_skew(spans, problems)
        for span in spans:
            if span.name == semconv.SPANS_LOST_SPAN:
                _state_spans_lost(span, problems)
        yield spans


def _state_spans_lost(span: StoredSpan, problems: list[str]) -> None:
    """The span a program sends at exit when spans found its export queue full."""
    lost = span.attributes.get(semconv.SPANS_LOST)
    if isinstance(lost, int) and not isinstance(lost, bool) and lost > 0:
        who = f"service {span.service!r}" if span.service else "the program"
        problems.append(f"trace {span.trace_id}: {who} lost {lost:,} spans before export "
                        "(a burst filled its export queue; raise OTEL_BSP_MAX_QUEUE_SIZE): "
                        "the tasks running then miss them")


def _adjust_clock_skew(spans: list[StoredSpan], problems: list[str]) -> None:
    """Shift each service's spans into their parent's time when a child of another
    service lies outside it: hosts' clocks disagree.  The child is centred in its parent
    (network time assumed equal both ways, as Jaeger's UI does) and every span below it
    on the same service moves with it."""
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[StoredSpan]] = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    roots = [s for s in spans if s.parent_id not in by_id]
    stack: list[tuple[StoredSpan, int]] = [(root, 0) for root in roots]
    seen: set[str] = set()
    while stack:
        span, shift = stack.pop()
        if span.span_id in seen:  # a cycle in a malformed trace
            continue
        seen.add(span.span_id)
        parent = by_id.get(span.parent_id)
        if parent is not None and parent.service != span.service and span.service:
            shift = 0  # a new host: its own offset, decided against its parent
            start, end = span.start_ns, span.end_ns
            if start < parent.start_ns or end > parent.end_ns:
                room = (parent.end_ns - parent.start_ns) - (end - start)
                shift = parent.start_ns + max(room, 0) // 2 - start
                problems.append(
                    f"trace {span.trace_id}: clock skew: span {span.name!r} of service "
                    f"{span.service!r} lies outside its parent {parent.name!r} of service "
                    f"{parent.service!r}; {span.service!r}'s spans under it shifted by "
                    f"{shift / 1e6:+.3f} ms")
        if shift:
            span.start_ns += shift
            span.end_ns += shift
        stack.extend((child, shift) for child in children.get(span.span_id, ()))
