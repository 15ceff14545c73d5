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

import functools
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .. import semconv
from . import _backends, _http
from ._keys import BUDGET_KEYS
from ._read import StoredSpan, TraceFileError, iter_traces
from ._summary import start_order
from ._tasks import StoredTask, find_tasks
from ._trace_files import FILE_FORMATS, keeper, read_files, sniff

__all__ = ["TraceFileError", "is_backend", "iter_source", "load_source", "check_traces"]

BACKEND_SCHEMES = ("jaeger", "tempo", "phoenix")
_READERS = {"jaeger": _backends.jaeger, "tempo": _backends.tempo,
            "phoenix": _backends.phoenix}


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
    """:func:`sniff`, None where the file cannot be read (its reader says why)."""
    try:
        return sniff(path)
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
        reader = _READERS[backend]
        return _backends.guarded(url, reader(url, problems,
                                             keep if backend == "tempo" else keeper(keep), auth))
    forced = None
    for name in FILE_FORMATS:
        if source.startswith(name + ":"):
            forced, source = name, source[len(name) + 1:]
    path = Path(source)
    paths = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    if path.is_dir() and not paths:
        raise TraceFileError(f"{path}: an empty directory")
    return read_files(paths, forced, problems, keep)


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
