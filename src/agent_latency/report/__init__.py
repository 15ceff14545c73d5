"""Offline reports: task budgets, fleet percentiles and what-if projections from stored
traces.

``agent-latency report [SOURCE…]`` reads OTLP/JSON spans (the local default's
``.agent-latency/traces.jsonl``, an OpenTelemetry Collector file export, or directories of
them) and recomputes every task's budget with the same task tree as the live processor.  It
prints a summary first — per task name and across all tasks: count and p50/p95/p99/max of
wall time, of each component and of time to first token; per model: calls, time to first
token, output and prefill tokens/s; the slowest tasks, LLM calls and tools — and each task's
table with ``--tasks``.  ``--json`` writes one object (``docs/report.md``).  With no SOURCE it
reads the local default's rotated files too (``traces.jsonl.3`` … ``.1``, then
``traces.jsonl``), as one stream.  Files are streamed a trace at a time.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .. import semconv
from .._local import ROTATED_FILES
from ..budget import COMPONENTS, COUNT_NAMES
from ._cli import (
    BAD_INPUT,
    NOTHING,
    BadInput,
    OneLineParser,
    Progress,
    Selection,
    add_source_arguments,
    add_trace_url_argument,
    fail,
    say,
    source_paths,
    total_size,
)
from ._parallel import PartsFailed, summarize_in_parts, workers_for
from ._read import ReadResult, StoredSpan, TraceFileError, iter_traces, read_spans
from ._render import render_budget, render_projection, render_summary
from ._sources import iter_sources
from ._summary import SCHEMA, CallRecord, Summary, start_order, task_json
from ._tasks import StoredTask, find_tasks
from ._text import replace_unencodable

DEFAULT_FILE = ".agent-latency/traces.jsonl"

__all__ = [
    "DEFAULT_FILE",
    "BUDGET_KEYS",
    "BadInput",
    "ReadResult",
    "StoredSpan",
    "StoredTask",
    "TraceFileError",
    "find_tasks",
    "iter_traces",
    "load_tasks",
    "summarize_sources",
    "summarize_traces",
    "trace_files",
    "main",
    "read_spans",
    "render_budget",
    "render_projection",
]


def trace_files(path: str | Path) -> list[Path]:
    """``path``'s rotated files that exist, oldest first, then ``path`` itself."""
    path = Path(path)
    rotated = [path.with_name(f"{path.name}.{n}") for n in range(ROTATED_FILES, 0, -1)]
    older = [p for p in rotated if p.is_file()]
    # With rotated files but no current one (just rotated), read what there is.
    return [*older, path] if path.exists() or not older else older


#: The attributes the report reads (budgets, counts, per-call figures, the budget the process
#: recorded); no others are decoded.  None of the long strings (prompts, command lines):
#: keeping nothing else bounds a trace's memory and saves most of the decoding.
BUDGET_KEYS = frozenset({
    *(attr for attr, _, _ in semconv.LLM_PHASES),
    semconv.LLM_CLIENT, semconv.LLM_TTFT, semconv.LLM_ATTEMPTS,
    semconv.LLM_CONNECTION_REUSED, semconv.LLM_STREAMING, semconv.LLM_TIMING_SOURCE,
    semconv.LLM_OUTPUT_TOKENS_PER_SECOND, semconv.LLM_PREFILL_TOKENS_PER_SECOND,
    semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
    semconv.GEN_AI_REQUEST_MODEL, semconv.GEN_AI_RESPONSE_MODEL, semconv.GEN_AI_TOOL_NAME,
    semconv.COMPONENT, semconv.TASK_NAME, semconv.PROCESS_TASK, semconv.RUN_TASK,
    semconv.BUDGET_WALL, semconv.BUDGET_OUTPUT_TOKENS_PER_SECOND,
    semconv.BUDGET_PREFILL_TOKENS_PER_SECOND,
    semconv.LLM_LAST_TOKEN_LAG, semconv.TASK_STARTUP,
    *(semconv.budget_other_part(p) for p in semconv.OTHER_PARTS),
    *(semconv.budget_share(c) for c in COMPONENTS),
    *(semconv.budget_busy(c) for c in COMPONENTS),
    *(semconv.budget_count(c) for c in COUNT_NAMES),
})


def load_tasks(path: str | Path | list[Path], task: str | None = None, *,
               rotated: bool = False, keep_going: bool = True, selection: Any = None,
               progress: Progress | None = None,
               notes: list[str] | None = None) -> tuple[list[StoredTask], list[str]]:
    """Read trace files and return their tasks in start order (optionally only those named
    ``task``, or those ``selection(task)`` keeps), each with its intervals (for what-ifs),
    and the problems met.  ``path`` is one file or a list of files; ``rotated`` reads one
    file's rotated siblings first.  Without ``keep_going`` the first unreadable line raises
    :class:`BadInput`.  ``notes``, when given, receives what is stated but is not bad input
    (spans counted as other, clock skew corrected, spans in no task); otherwise it is
    returned with the problems.

    Streams: a trace's spans are held only until its last line is read and its tasks are
    computed, with only the attributes budgets need.
    """
    paths: Sequence[str | Path]
    if isinstance(path, list):  # noqa: SIM108 - room for the comment below
        paths = path
    else:
        # A backend URL stays a string: Path() would fold its "//".
        paths = trace_files(path) if rotated else [path]
    problems: list[str] = []
    stated: list[str] = []
    tasks: list[StoredTask] = []
    progress = progress or Progress(0, enabled=False)
    with _no_cyclic_gc():
        try:
            for spans in iter_sources(paths, problems, keep=BUDGET_KEYS,
                                      on_bytes=progress.feed(), notes=stated):
                if problems and not keep_going:
                    raise BadInput(problems[0])
                found, more = find_tasks(spans)
                tasks.extend(t for t in found if (task is None or t.name == task)
                             and (selection is None or selection(t)))
                stated.extend(more)
            if problems and not keep_going:
                raise BadInput(problems[0])
        finally:
            progress.close()
    tasks.sort(key=start_order)
    if notes is None:
        return tasks, problems + stated
    notes.extend(stated)
    return tasks, problems


def main(argv: list[str]) -> int:
    """``agent-latency report``."""
    parser = OneLineParser(prog=_PROG, description=_DESCRIPTION, epilog=_EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser, DEFAULT_FILE)
    parser.add_argument("--tasks", action="store_true",
                        help="after the summary, each task's budget table")
    parser.add_argument("--json", action="store_true",
                        help="write one JSON object (schema 1, see docs/report.md)")
    parser.add_argument("--slowest", type=int, default=5, metavar="N",
                        help="how many of the slowest tasks, LLM calls and tools (default 5)")
    parser.add_argument("--html", metavar="FILE",
                        help="also write a self-contained HTML page: a waterfall per task, "
                             "components, percentiles, what-if (docs/report.md)")
    add_trace_url_argument(parser)
    args = parser.parse_args(argv)
    replace_unencodable(sys.stdout)
    selection = Selection(args)
    try:
        paths, _ = source_paths(args.sources, DEFAULT_FILE)
        summary, problems, warnings = summarize_sources(
            paths, selection, keep_going=args.keep_going, keep_tasks=args.tasks or args.json,
            slowest=max(args.slowest, 0))
    except TraceFileError as exc:
        return fail(_PROG, str(exc))
    except BadInput as exc:
        return fail(_PROG, f"{exc} (--keep-going reports everything readable)")
    for line in problems + warnings:
        say(_PROG, line)
    names = ", ".join(str(p) for p in paths)
    if not summary.count:
        described = selection.describe()
        say(_PROG, f"no tasks in {names}" + (f" {described}" if described else ""))
        return BAD_INPUT if problems else NOTHING
    if args.html:
        from ._html import write_report_page

        # A second read: the summary keeps figures, the page needs each task's intervals.
        page_tasks, _ = load_tasks(paths, selection=selection)
        write_report_page(args.html, page_tasks, names, problems + warnings,
                          summary=summary.to_json(), trace_url=args.trace_url)
    if args.json:
        doc = {"schema": SCHEMA, "sources": [str(p) for p in paths],
               "filters": selection.describe() or None,
               "tasks": [task_json(t) for t in summary.tasks],
               "summary": summary.to_json(), "problems": problems + warnings}
        # Indented for a person at a terminal; one line otherwise (the C encoder: an indent
        # takes json's pure-Python one, three times slower on many tasks).
        sys.stdout.write(json.dumps(doc, indent=1 if sys.stdout.isatty() else None) + "\n")
    else:
        render_summary(summary, names, selection.describe())
        if args.tasks:
            for task in summary.tasks:
                assert task.budget is not None  # noqa: S101 - every summarized task has one
                render_budget(task.name, task.budget, trace_id=task.span.trace_id)
    return BAD_INPUT if problems else 0


_PROG = "agent-latency report"
# --help: plain text (the module docstring is for the API reference).
_DESCRIPTION = """\
Read stored spans and recompute every task's budget with the same task tree as the live
processor.  The summary comes first: per task name and across all tasks, the count and
p50/p95/p99/max of wall time, of each component and of time to first token; per model,
calls, time to first token and output and prefill tokens/s; the slowest tasks, LLM calls
and tools, with their trace ids.  --tasks adds each task's budget table, --json writes one
JSON object instead, --html also writes a page.  With no SOURCE it reads
.agent-latency/traces.jsonl and its rotated files (traces.jsonl.3 ... .1 first), as one
stream."""
_EXAMPLES = """\
examples:
  agent-latency report
  agent-latency report --tasks --since 2h
  agent-latency report run1/ --html report.html
  agent-latency report jaeger+http://localhost:16686 --service my-agent --json"""


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector off while reading: parsing allocates millions of
    objects, each collection then walks every live one (the summary's figures, the tasks
    kept), and a read makes no cycles (spans, tasks and their parents only point up), so
    reference counting frees everything.  Measured: a third of the CPU on a 1,000,000-span
    file (benchmarks/bench_report_read.py)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def summarize_sources(paths: list[Path], selection: Any = None, *, keep_going: bool = True,
                      keep_tasks: bool = False, slowest: int = 5,
                      progress: Progress | None = None,
                      ) -> tuple[Summary, list[str], list[str]]:
    """Read ``paths`` a trace at a time into a :class:`Summary` of the tasks ``selection``
    keeps; also the unreadable input met (``problems``) and the spans the budget could not
    use as they were (``warnings``: counted as other).

    Without ``keep_going`` the first unreadable line raises :class:`BadInput`.  Task
    intervals are dropped once budgets are computed: memory holds figures, not spans.
    Large OTLP/JSON lines files are read by several processes (``report/_parallel.py``),
    with the same result.
    """
    problems: list[str] = []
    notes: list[str] = []  # clock skew corrected, spans in no task: stated, not bad input
    size = total_size(paths)
    progress = progress or Progress(size)
    with _no_cyclic_gc():
        try:
            workers = workers_for(paths, size)
            if workers > 1:
                try:
                    return summarize_in_parts(paths, workers, selection, keep=BUDGET_KEYS,
                                              keep_going=keep_going, keep_tasks=keep_tasks,
                                              slowest=slowest, progress=progress)
                except PartsFailed as exc:
                    notes.append(f"{exc}; read again in one process")
                    progress.restart()
            traces = iter_sources(paths, problems, keep=BUDGET_KEYS, on_bytes=progress.feed(),
                                  notes=notes)
            summary, warnings = summarize_traces(
                traces, selection, problems=problems, keep_going=keep_going,
                keep_tasks=keep_tasks, slowest=slowest)
        finally:
            progress.close()
    return summary, problems, notes + warnings


def summarize_traces(traces: Iterable[list[StoredSpan]], selection: Any = None, *,
                     problems: list[str] | None = None, keep_going: bool = True,
                     keep_tasks: bool = False, slowest: int = 5,
                     ) -> tuple[Summary, list[str]]:
    """A :class:`Summary` of the tasks in ``traces`` (each a list of one trace's spans, from
    any reader) that ``selection`` keeps, and the warnings met.

    ``problems`` is the reader's list of unreadable input: without ``keep_going`` the first
    one raises :class:`BadInput` (checked after each trace).
    """
    summary = Summary(slowest=slowest, keep_tasks=keep_tasks)
    problems = problems if problems is not None else []
    warnings: list[str] = []
    calls: dict[int, list[CallRecord]] = {}
    tools: dict[int, list[tuple[str, float, str, str]]] = {}

    def on_span(task: StoredTask, span: StoredSpan, kind: str, nested: bool) -> None:
        if kind == "llm":
            calls.setdefault(id(task), []).append(CallRecord(task.name, span))
        elif kind == "tool" and not nested:
            name = str(span.attributes.get(semconv.GEN_AI_TOOL_NAME) or span.name)
            tools.setdefault(id(task), []).append(
                (name, max(span.end_ns - span.start_ns, 0) * 1e-9, span.trace_id, span.span_id))

    for spans in traces:
        if problems and not keep_going:
            raise BadInput(problems[0])
        found, more = find_tasks(spans, keep_intervals=False, on_span=on_span)
        warnings.extend(more)
        for task in found:
            if selection is None or selection(task):
                summary.add(task, calls.get(id(task), []), tools.get(id(task), []))
        calls.clear()
        tools.clear()
    if problems and not keep_going:
        raise BadInput(problems[0])
    summary.tasks.sort(key=start_order)
    return summary, warnings
