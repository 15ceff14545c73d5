"""Tasks and their budgets recomputed from stored spans, with the live processor's rules."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .. import semconv
from ..budget import Budget, Interval, UnknownComponentError, split
from ..budget._spans import NETWORK_COUNTS, count_span, span_intervals
from ._read import StoredSpan

_COUNTS = ("llm_calls", "tool_calls", "http_round_trips", "new_connections", "tls_handshakes",
           "input_tokens", "output_tokens", "subtasks", *NETWORK_COUNTS)


@dataclass(slots=True)
class StoredTask:
    """One task found in a trace: its span, the intervals under it and its budget."""

    span: StoredSpan
    intervals: list[Interval] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTS, 0))
    budget: Budget | None = None
    parent: StoredTask | None = None

    @property
    def name(self) -> str:
        """The task's name."""
        return str(self.span.attributes.get(semconv.TASK_NAME, self.span.name))


def find_tasks(spans: list[StoredSpan]) -> tuple[list[StoredTask], list[str]]:
    """Every task in ``spans`` in start order, each with its budget, and problems found.

    A span belongs to its nearest task ancestor; a nested task's intervals also count in
    the tasks around it, as in the live processor.
    """
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    tasks = {(s.trace_id, s.span_id): StoredTask(s) for s in spans
             if semconv.TASK_NAME in s.attributes}
    problems: list[str] = []

    def ancestors(span: StoredSpan) -> Iterator[StoredSpan]:
        parent = by_id.get((span.trace_id, span.parent_id))
        for _ in range(10_000):  # a cycle in a malformed file must not hang the report
            if parent is None:
                return
            yield parent
            parent = by_id.get((parent.trace_id, parent.parent_id))

    def nearest_task(span: StoredSpan) -> StoredTask | None:
        for parent in ancestors(span):
            task = tasks.get((parent.trace_id, parent.span_id))
            if task is not None:
                return task
        return None

    def outermost_tool(span: StoredSpan) -> StoredSpan:
        """The outermost tool span of the same task enclosing ``span`` (or ``span``)."""
        top = span
        for parent in ancestors(span):
            if (parent.trace_id, parent.span_id) in tasks:
                break
            if parent.attributes.get(semconv.COMPONENT) == semconv.TOOL_EXECUTION:
                top = parent
        return top

    for span in spans:
        key = (span.trace_id, span.span_id)
        if key in tasks:
            tasks[key].parent = nearest_task(span)
            continue
        owner = nearest_task(span)
        if owner is None:
            continue
        top = outermost_tool(span)
        try:
            # As in the processor: a tool's intervals carry its outermost tool's id.
            intervals, kind = span_intervals(span.attributes, span.start_ns,
                                             max(span.end_ns, span.start_ns),
                                             _number(top.span_id))
        except UnknownComponentError as exc:
            problems.append(f"span {span.name!r}: {exc}; counted as other")
            intervals, kind = [Interval(span.start_ns, span.end_ns, "other")], "other"
        if kind is None:
            continue
        owner.intervals.extend(intervals)
        count_span(owner.counts, kind, span.attributes, nested_tool=top is not span)
    ordered = sorted(tasks.values(), key=lambda t: t.span.start_ns)
    idle = _idle_process_tasks(ordered)
    # Innermost first, so each task hands its parent everything below it exactly once.
    for task in sorted(ordered, key=_depth, reverse=True):
        if task.parent is not None:
            task.parent.intervals.extend(task.intervals)
            for name, value in task.counts.items():
                task.parent.counts[name] += value
            task.parent.counts["subtasks"] += 1
    for task in ordered:
        task.budget = split(task.intervals, task.span.start_ns, task.span.end_ns, task.counts)
    return [t for t in ordered if id(t) not in idle], problems


_OWN_WORK = ("llm_calls", "tool_calls")


def _idle_process_tasks(tasks: list[StoredTask]) -> set[int]:
    """Implicit process tasks (``instrument()`` alone) with no LLM call or tool of their own
    (before nested tasks hand theirs up): not reported, as no summary line is printed for
    them — the program's own tasks win."""
    return {id(t) for t in tasks if t.span.attributes.get(semconv.PROCESS_TASK)
            and not any(t.counts[name] for name in _OWN_WORK)}


def _number(span_id: str) -> int:
    try:
        return int(span_id, 16)
    except ValueError:  # a malformed id still groups consistently
        return hash(span_id)


def _depth(task: StoredTask) -> int:
    depth, parent = 0, task.parent
    while parent is not None and depth < 10_000:
        depth, parent = depth + 1, parent.parent
    return depth
