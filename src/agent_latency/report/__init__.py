"""Offline reports: task budgets and what-if projections from stored traces.

``agent-latency report [FILE]`` reads OTLP/JSON spans (the local default's
``.agent-latency/traces.jsonl``, or an OpenTelemetry Collector file export) and recomputes
every task's budget with the same engine as the live processor.
"""

from __future__ import annotations

import argparse
import json
import sys

from ._read import ReadResult, StoredSpan, TraceFileError, read_spans
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
    "load_tasks",
    "main",
    "read_spans",
    "render_budget",
    "render_projection",
]


def load_tasks(path: str, task: str | None = None) -> tuple[list[StoredTask], list[str]]:
    """Read a trace file and return its tasks (optionally only those named ``task``)."""
    result = read_spans(path)
    tasks, problems = find_tasks(result.spans)
    if task is not None:
        tasks = [t for t in tasks if t.name == task]
    return tasks, result.problems + problems


def main(argv: list[str]) -> int:
    """``agent-latency report``."""
    parser = argparse.ArgumentParser(prog="agent-latency report", description=__doc__)
    parser.add_argument("file", nargs="?", default=DEFAULT_FILE,
                        help=f"OTLP/JSON trace file (default {DEFAULT_FILE})")
    parser.add_argument("--task", help="only tasks with this name")
    parser.add_argument("--json", action="store_true", help="print budgets as JSON lines")
    args = parser.parse_args(argv)
    try:
        tasks, problems = load_tasks(args.file, args.task)
    except TraceFileError as exc:
        print(f"agent-latency report: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"agent-latency report: {problem}", file=sys.stderr)
    if not tasks:
        print(f"agent-latency report: no tasks in {args.file}"
              + (f" named {args.task!r}" if args.task else ""), file=sys.stderr)
        return 1
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


