"""A summary of stored tasks, a trace at a time: the one summarizing the report does, in one
process or in each part of a file read in parts."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable, Iterator
from typing import Any

from .. import semconv
from ._cli import BadInput
from ._read import StoredSpan
from ._summary import CallRecord, Summary, start_order
from ._tasks import StoredTask, find_tasks


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
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
