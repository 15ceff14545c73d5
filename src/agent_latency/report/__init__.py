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
import json
import sys

from ._cli import (
    BAD_INPUT,
    NOTHING,
    BadInput,
    OneLineParser,
    Selection,
    add_source_arguments,
    add_trace_url_argument,
    fail,
    say,
    source_paths,
    with_services,
)
from ._files import default_file, trace_files
from ._keys import BUDGET_KEYS
from ._load import load_tasks, summarize_sources
from ._read import ReadResult, StoredSpan, TraceFileError, iter_traces, read_spans
from ._render import render_budget, render_projection, render_summary
from ._summarize import summarize_traces
from ._summary import SCHEMA, task_json
from ._tasks import StoredTask, find_tasks
from ._text import replace_unencodable

__all__ = [
    "BUDGET_KEYS",
    "BadInput",
    "ReadResult",
    "StoredSpan",
    "StoredTask",
    "TraceFileError",
    "default_file",
    "find_tasks",
    "iter_traces",
    "load_tasks",
    "main",
    "read_spans",
    "render_budget",
    "render_projection",
    "summarize_sources",
    "summarize_traces",
    "trace_files",
]


def main(argv: list[str]) -> int:
    """``agent-latency report``."""
    parser = OneLineParser(prog=_PROG, description=_DESCRIPTION, epilog=_EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_arguments(parser, default_file())
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
        paths, note = source_paths(with_services(args.sources, args.service),
                                   default_file())
        if note:
            say(_PROG, note)
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
        # jinja2 (the [report] extra) only for --html.
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
stream; while none of them exists, the demo's traces (.agent-latency/demo), saying so."""
_EXAMPLES = """\
examples:
  agent-latency report
  agent-latency report --tasks --since 2h
  agent-latency report run1/ --html report.html
  agent-latency report jaeger+http://localhost:16686 --service my-agent --json"""


