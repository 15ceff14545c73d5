"""The task tree: which spans count in which task, with what intervals and counts, how a
nested task hands its work to the tasks around it, and each task's budget.

One module for both users: the live span processor feeds it span by span (a
:class:`TaskNode` per open task, :meth:`TaskNode.add_span` as spans end, :meth:`TaskNode.absorb`
as nested tasks end, :meth:`TaskNode.finish` as the task ends) and the offline report all at
once (:func:`assemble` on a trace's spans), so a stored trace gives the budget the process
computed.  It owns the names: the five components (``COMPONENTS``) and the counts
(``COUNT_NAMES``); ``semconv`` re-exports them as attribute values.

Pure: plain mappings of attribute names to values and duck-typed span records, no
OpenTelemetry object.  Not imported by ``budget/__init__``: ``semconv`` imports the names
from ``budget`` and this module reads ``semconv``'s LLM attribute names (through
``_spans``), so importing it from the package would be circular.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any, Protocol

from .. import semconv
from ..budget import COMPONENTS, COUNT_NAMES, Budget, Interval, UnknownComponentError, split
from ._spans import adopt_other_parts, count_span, is_tool, span_intervals, startup_overlay

TASK_NAME = semconv.TASK_NAME
COMPONENT = semconv.COMPONENT
PROCESS_TASK = semconv.PROCESS_TASK
LLM_CLIENT = semconv.LLM_CLIENT

# Counts that say a task did work of its own (an LLM call or a tool).
_OWN_WORK = ("llm_calls", "tool_calls")


class TaskNode:
    """One task: its intervals (nested tasks' included once they end), counts and budget.

    ``key`` identifies the task's span (the processor's span id, the report's
    ``(trace id, span id)``); ``span`` is the report's stored span (``None`` live).
    ``overlays`` are stretches of the client's own time known from the task span itself (a
    process task's start-up).
    """

    __slots__ = ("budget", "counts", "intervals", "key", "name", "overlays", "parent", "span",
                 "start_ns")

    def __init__(self, key: Any, name: str, start_ns: int,
                 parent: TaskNode | None = None, span: Any = None) -> None:
        self.key = key
        self.name = name
        self.start_ns = start_ns
        self.parent = parent
        self.span = span
        self.intervals: list[Interval] = []
        self.counts: dict[str, int] = dict.fromkeys(COUNT_NAMES, 0)
        self.budget: Budget | None = None
        # An empty tuple until there is one (a report holds many tasks, most with none).
        self.overlays: Sequence[Interval] = ()

    @property
    def did_agent_work(self) -> bool:
        """Whether an LLM call or a tool ran in it (or in a task nested in it that ended)."""
        return any(self.counts[name] for name in _OWN_WORK)

    def add(self, intervals: Sequence[Interval]) -> None:
        """Add busy intervals (a subclass may bound how many it keeps)."""
        self.intervals.extend(intervals)

    def add_span(self, attributes: Mapping[str, Any], start_ns: int, end_ns: int,
                 tool_id: int = 0, *, nested_tool: bool = False) -> str | None:
        """Count one finished span in this task; its kind (``"llm"``, ``"tool"``, another
        phase) or ``None`` when it does not count.

        ``tool_id`` is the outermost tool's span id for a tool or a span inside one (a what-if
        scales nested tools inside it); ``nested_tool`` says a tool runs inside another tool
        (tool time, not another tool call).  An unknown ``agent_latency.component`` raises
        :class:`UnknownComponentError` after counting the span as ``other``; attributes of
        the wrong type raise ``TypeError``/``ValueError`` and count nothing.
        """
        end_ns = max(end_ns, start_ns)
        try:
            intervals, kind = span_intervals(attributes, start_ns, end_ns, tool_id)
        except UnknownComponentError:
            self.add([Interval(start_ns, end_ns, "other")])
            raise
        if kind is None:
            return None
        count_span(self.counts, kind, attributes, nested_tool=nested_tool)  # all or nothing
        self.add(intervals)
        return kind

    def absorb(self, child: TaskNode) -> None:
        """A nested task that ended: its work counts in this task too."""
        self.add(child.intervals)
        counts = self.counts
        for key, value in child.counts.items():
            counts[key] = counts.get(key, 0) + value
        counts["subtasks"] += 1

    def finish(self, end_ns: int) -> Budget:
        """Split this task's wall time (start to ``end_ns``) and remember the budget."""
        self.budget = split(chain(self.intervals, self.overlays), self.start_ns, end_ns,
                            dict(self.counts))
        return self.budget


class SpanRecord(Protocol):
    """What :func:`assemble` reads of a stored span (the report's ``StoredSpan``)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]


def assemble(spans: Sequence[SpanRecord], *, keep_intervals: bool = True,
             on_span: Any = None) -> tuple[list[TaskNode], list[str]]:
    """Every task among one trace's ``spans`` in start order, each with its budget, and the
    problems found.

    A span counts in its nearest task ancestor; a nested task's work also counts in the
    tasks around it, as in the live processor.  Implicit process tasks with no LLM call or
    tool of their own are left out (the program's own tasks win).  ``keep_intervals=False``
    drops each task's intervals once its budget is computed (a report of many tasks needs
    only the budgets).  ``on_span(task, span, kind, nested_tool)`` is called for each counted
    span with its nearest task (the report's per-call views).
    """
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    tasks: dict[tuple[str, str], TaskNode] = {}
    for s in spans:
        if TASK_NAME in s.attributes:
            key = (s.trace_id, s.span_id)
            node = tasks[key] = TaskNode(key, str(s.attributes[TASK_NAME]), s.start_ns, span=s)
            node.overlays = startup_overlay(s.attributes, s.start_ns)
    problems: list[str] = []
    orphans = 0  # LLM calls and tools no task encloses
    ancestry = _Ancestry(by_id, tasks)

    for span in spans:
        attributes = span.attributes
        if not attributes:  # most spans: neither a task nor counted (phase children, HTTP)
            continue
        trace_id = span.trace_id
        key = (trace_id, span.span_id)
        # The nearest task around the span, and the outermost tool span of that task
        # enclosing it (the span itself when none).
        parent = by_id.get((trace_id, span.parent_id))
        owner = None if parent is None else tasks.get((parent.trace_id, parent.span_id))
        top = span
        if parent is not None and owner is None:  # deeper: a nested tool, a phase span
            owner, outer = _through(parent, ancestry.above(parent))
            if outer is not None:
                top = outer
        if key in tasks:
            tasks[key].parent = owner
            continue
        if owner is None:
            if LLM_CLIENT in attributes or COMPONENT in attributes or is_tool(attributes):
                orphans += 1
            continue
        try:
            kind = owner.add_span(attributes, span.start_ns, span.end_ns,
                                  _number(top.span_id), nested_tool=top is not span)
        except UnknownComponentError as exc:
            problems.append(f"span {span.name!r}: {exc}; counted as other")
            kind = "other"
        # A stored attribute of the wrong type, or a number no float holds (inf, 10^400).
        except (TypeError, ValueError, ArithmeticError) as exc:
            problems.append(f"span {span.name!r}: unusable budget attributes ({exc}); "
                            "counted as other")
            owner.add([Interval(span.start_ns, max(span.end_ns, span.start_ns), "other")])
            kind = "other"
        if kind is not None and on_span is not None:
            on_span(owner, span, kind, top is not span)
    if orphans:
        problems.append(
            f"trace {spans[0].trace_id}: {orphans} LLM call or tool span(s) in no task: "
            "the task span is missing (the process died before it ended, or the backend "
            "dropped it); they are in no budget")
    ordered = sorted(tasks.values(), key=lambda t: t.start_ns)
    idle = {id(t) for t in ordered
            if t.span.attributes.get(PROCESS_TASK) and not t.did_agent_work}
    depths = _depths(ordered, problems)
    # Innermost first, so each task hands its parent everything below it exactly once.
    for task in sorted(ordered, key=lambda t: depths[id(t)], reverse=True):
        if task.parent is not None:
            task.parent.absorb(task)
    for task in ordered:
        adopt_other_parts(task.finish(max(task.span.end_ns, task.start_ns)),
                          task.span.attributes)
    if not keep_intervals:
        for task in ordered:
            task.intervals = []
    return [t for t in ordered if id(t) not in idle], problems


class _Ancestry:
    """What lies above each span: the nearest task, and the outermost tool span below that
    task.  Each span's answer is found once and remembered, so a trace costs time linear
    in its spans however deep it nests; a walk longer than the trace is a cycle of parents
    (a malformed trace), which ends with no task."""

    __slots__ = ("_by_id", "_known", "_tasks")

    def __init__(self, by_id: Mapping[tuple[str, str], SpanRecord],
                 tasks: Mapping[tuple[str, str], TaskNode]) -> None:
        self._by_id = by_id
        self._tasks = tasks
        self._known: dict[tuple[str, str], tuple[TaskNode | None, SpanRecord | None]] = {}

    def above(self, span: SpanRecord) -> tuple[TaskNode | None, SpanRecord | None]:
        """``(nearest task among span's ancestors, outermost tool among the ancestors
        below that task)``; ``None`` for what there is not."""
        by_id, tasks, known = self._by_id, self._tasks, self._known
        path: list[SpanRecord] = []
        node = span
        found: tuple[TaskNode | None, SpanRecord | None]
        while True:  # ``found`` becomes what lies above ``path[-1]``
            path.append(node)
            parent = by_id.get((node.trace_id, node.parent_id))
            if parent is None or len(path) > len(by_id):
                found = (None, None)
                break
            parent_key = (parent.trace_id, parent.span_id)
            task = tasks.get(parent_key)
            if task is not None:
                found = (task, None)
                break
            above_parent = known.get(parent_key)
            if above_parent is not None:
                found = _through(parent, above_parent)
                break
            node = parent
        for index in range(len(path) - 1, -1, -1):
            member = path[index]
            known[(member.trace_id, member.span_id)] = found
            found = _through(member, found)
        return known[(span.trace_id, span.span_id)]


def _through(span: SpanRecord, above: tuple[TaskNode | None, SpanRecord | None],
             ) -> tuple[TaskNode | None, SpanRecord | None]:
    """What lies above ``span``'s child, given what lies above ``span``."""
    task, outer = above
    if outer is None and is_tool(span.attributes):
        outer = span
    return task, outer


def _number(span_id: str) -> int:
    try:
        return int(span_id, 16)
    except ValueError:  # a malformed id still groups consistently
        return hash(span_id)


def _depths(tasks: Sequence[TaskNode], problems: list[str]) -> dict[int, int]:
    """Each task's nesting depth (by ``id``), in one walk of all (linear, however deep);
    a cycle of parents in a malformed trace is cut where the walk closes it, and stated:
    a task chain must end (pickling, absorbing and printing it walk up)."""
    depths: dict[int, int] = {}
    for task in tasks:
        path: list[TaskNode] = []
        on_path: set[int] = set()
        node: TaskNode | None = task
        while node is not None and id(node) not in depths:
            if id(node) in on_path:
                last = path[-1]
                name = last.span.name if last.span is not None else last.name
                problems.append(f"span {name!r}: the parents of its task form a cycle (a "
                                "malformed trace); the cycle is cut there")
                last.parent = None
                node = None
                break
            path.append(node)
            on_path.add(id(node))
            node = node.parent
        depth = depths[id(node)] if node is not None else -1
        for member in reversed(path):
            depth += 1
            depths[id(member)] = depth
    return depths


__all__ = ["COMPONENTS", "COUNT_NAMES", "SpanRecord", "TaskNode", "assemble"]
