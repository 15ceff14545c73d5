"""Trace backends read over HTTP: Jaeger's query API, Grafana Tempo's search and trace API,
and Arize Phoenix's spans API, paged.

What a backend answers is untrusted: every shape is checked (a wrong one is a one-line
TraceFileError naming the URL), ids are checked before they go into a URL, and requests are
bounded (``_http``)."""

from __future__ import annotations

import base64
import datetime as _dt
import json
import os
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

from . import _http
from ._http import Limits
from ._read import AttributeFilter, StoredSpan, TraceFileError, _spans_of, int64
from ._times import TimeCheck
from ._trace_files import KeepFunction, group

#: Phoenix's and Jaeger's page size, and Jaeger's and Tempo's default number of traces.
PAGE_SIZE = 1000
DEFAULT_TRACE_LIMIT = 1000



_TRACE_ID = re.compile(r"[0-9a-fA-F]{1,32}")


def _split_url(url: str) -> tuple[str, dict[str, str]]:
    """``(base URL without query, query parameters)``."""
    parts = urllib.parse.urlsplit(url)
    base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "",
                                    ""))
    return base, dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))


def _request_parts(url: str, problems: list[str]) -> tuple[str, dict[str, str], Limits,
                                                         TimeCheck]:
    """What every reader starts from: the base URL, its query parameters, the request
    bounds from the environment, and the clock check that states skew into ``problems``."""
    base, params = _split_url(url)
    return base, params, Limits.from_environment(), TimeCheck(problems)


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


def guarded(url: str, traces: Iterator[list[StoredSpan]]) -> Iterator[list[StoredSpan]]:
    """``traces``, any exception a shape the checks missed raises made a one-line
    TraceFileError naming ``url`` (never a traceback)."""
    try:
        yield from traces
    except TraceFileError:
        raise
    except _SHAPE_ERRORS as exc:
        raise TraceFileError(f"{url}: not the backend's answer ({type(exc).__name__}: "
                             f"{exc})") from None


def jaeger(url: str, problems: list[str], keep: KeepFunction | None,
           auth: dict[str, str]) -> Iterator[list[StoredSpan]]:
    """Jaeger's query API: one response holds whole traces, handed out one at a time."""
    base, params, limits, times = _request_parts(url, problems)
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
            spans = list(jaeger_spans(trace, keep))
        except _SHAPE_ERRORS as exc:
            problems.append(f"{query}: trace {str(trace.get('traceID', '?'))[:40]!r}: not "
                            f"Jaeger's model ({type(exc).__name__}: {exc}); skipped")
            continue
        yield times.keep(spans, url, f"trace {spans[0].trace_id}" if spans else "")


def jaeger_spans(trace: dict[str, Any], keep: KeepFunction | None) -> Iterator[StoredSpan]:
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


def tempo(url: str, problems: list[str], keep: AttributeFilter | None,
          auth: dict[str, str]) -> Iterator[list[StoredSpan]]:
    """Tempo: a search for trace ids, then each trace on its own (memory: one trace)."""
    base, params, limits, times = _request_parts(url, problems)
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


def phoenix(url: str, problems: list[str], keep: KeepFunction | None,
            auth: dict[str, str]) -> Iterator[list[StoredSpan]]:
    """Phoenix's spans API pages through a project's spans in no trace order, so a trace is
    whole only after the last page: the project's spans are held (budget attributes only).
    Paging stops, with a problem line, at a cursor seen before (a server that never ends its
    listing), at ``AGENT_LATENCY_BACKEND_MAX_PAGES`` pages, at
    ``AGENT_LATENCY_BACKEND_MAX_SPANS`` spans held, at the source's total deadline
    (``AGENT_LATENCY_BACKEND_TOTAL_TIMEOUT``) or at a page that fails after the first: the
    spans read until then are reported all the same."""
    base, params, limits, times = _request_parts(url, problems)
    project = params.pop("project", None)
    if not project:
        raise TraceFileError(f"{url}: Phoenix needs ?project=NAME")
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
    for trace in group(spans):
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
