"""Offline reports: task budgets and what-if projections from stored traces.

``agent-latency report [FILE]`` reads OTLP/JSON spans (the local default's
``.agent-latency/traces.jsonl``, or an OpenTelemetry Collector file export) and recomputes
every task's budget with the same engine as the live processor.  With no FILE it reads the
local default's rotated files too (``traces.jsonl.3`` … ``.1``, then ``traces.jsonl``), as
one stream: a trace cut by a rotation is whole again.  Files are streamed a trace at a time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._local import ROTATED_FILES
from ._read import ReadResult, StoredSpan, TraceFileError, iter_traces, read_spans
from ._render import render_budget, render_projection
from ._tasks import StoredTask, find_tasks

DEFAULT_FILE = ".agent-latency/traces.jsonl"

__all__ = [
    "DEFAULT_FILE",
    "ReadResult",
    "StoredSpan",
    "StoredTask",
    "TraceFileError",
    "find_tasks",
    "iter_traces",
    "load_tasks",
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
    return older + [path] if path.exists() or not older else older


# The budget engine reads only our attributes and the GenAI ones, and none of their long
# strings (prompts, command lines): keeping nothing else bounds a trace's memory.
_KEPT_PREFIXES = ("agent_latency.", "gen_ai.")
_LONGEST_KEPT_STRING = 1024


def _needed_by_budgets(key: str, value: Any) -> bool:
    return key.startswith(_KEPT_PREFIXES) and not (
        isinstance(value, str) and len(value) > _LONGEST_KEPT_STRING)


def load_tasks(path: str | Path, task: str | None = None, *,
               rotated: bool = False) -> tuple[list[StoredTask], list[str]]:
    """Read a trace file and return its tasks in start order (optionally only those named
    ``task``) and the problems met.  ``rotated`` reads the file's rotated siblings first.

    Streams: a trace's spans are held only until its last line is read and its tasks are
    computed, with only the attributes budgets need.
    """
    from ._sources import check_traces, iter_source

    problems: list[str] = []
    tasks: list[StoredTask] = []
    # A named source may be a directory, a protobuf file or a backend URL (_sources.py).
    traces = (check_traces(iter_traces(trace_files(path), problems, keep=_needed_by_budgets),
                           problems) if rotated
              else iter_source(path, problems, keep=_needed_by_budgets))
    for spans in traces:
        found, more = find_tasks(spans)
        tasks.extend(found if task is None else (t for t in found if t.name == task))
        problems.extend(more)
    tasks.sort(key=lambda t: t.span.start_ns)
    return tasks, problems


def main(argv: list[str]) -> int:
    """``agent-latency report``."""
    parser = argparse.ArgumentParser(prog="agent-latency report", description=__doc__)
    parser.add_argument("file", nargs="?",
                        help=f"trace file, directory or backend URL (default {DEFAULT_FILE} "
                             "and its rotated files; see docs/report.md)")
    parser.add_argument("--task", help="only tasks with this name")
    parser.add_argument("--json", action="store_true", help="print budgets as JSON lines")
    parser.add_argument("--html", metavar="FILE",
                        help="also write a self-contained HTML page (waterfalls, components, "
                             "percentiles, what-if)")
    args = parser.parse_args(argv)
    try:
        tasks, problems = load_tasks(args.file or DEFAULT_FILE, args.task,
                                     rotated=args.file is None)
    except TraceFileError as exc:
        print(f"agent-latency report: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"agent-latency report: {problem}", file=sys.stderr)
    if not tasks:
        print(f"agent-latency report: no tasks in {args.file or DEFAULT_FILE}"
              + (f" named {args.task!r}" if args.task else ""), file=sys.stderr)
        return 1
    if args.html:
        from ._html import write_report_page

        write_report_page(args.html, tasks, args.file or DEFAULT_FILE, problems)
    for task in tasks:
        assert task.budget is not None
        if args.json:
            print(json.dumps({
                "task": task.name, "trace_id": task.span.trace_id, "wall": task.budget.wall,
                "shares": task.budget.shares, "busy": task.budget.busy,
                "counts": task.budget.counts,
            }))
        else:
            render_budget(task.name, task.budget)
    return 0


