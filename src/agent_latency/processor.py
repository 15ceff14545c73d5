"""BudgetSpanProcessor: collects compact intervals per open task and sets its budget.

Per span it keeps a dictionary entry while the span is open and, when the span counts in a
budget, one small tuple after it ends; never the span object.  Spans outside any task are
forgotten at once.  A task's budget is computed just before its span ends (through the
finisher ``task()`` calls) and recorded as the ``agent_latency.task.duration`` histogram.

A SERVER span that is a local root (no parent, or a remote one) outside any task is a
*request task candidate*: spans under it are collected like a task's, and if it saw an LLM
call or a tool by its end it becomes a task (budget, ``agent_latency.task.name`` = its name,
metric); otherwise it is forgotten.  Its end is not ours to delay, so the budget is written
onto the span as it ends (:func:`_set_on_ended_span`).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from collections import deque as Deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import metrics
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanKind

from . import _hooks, semconv
from ._import_times import IMPORTS
from ._log import FAULTS, Guard, fault, warn_once
from ._pauses import PAUSES
from ._sdk import attribute_store as _attribute_store
from ._sdk import attributes_of as _attributes_of
from ._sdk import end_ns as _end_ns
from ._sdk import ended_span_times as _span_times
from ._sdk import span_id as _span_id
from ._sdk import span_kind as _span_kind
from ._sdk import span_name as _span_name
from ._sdk import span_parent as _span_parent
from ._sdk import start_ns as _start_ns
from .budget import COMPONENTS, OTHER_PARTS, Budget, Interval, RunningSplit, UnknownComponentError
from .codec import (
    TaskNode,
    budget_attributes,
    count_span,
    is_tool,
    span_intervals,
    startup_overlay,
)

_DEFAULT_MAX_OPEN_TASKS = 10_000
_DEFAULT_MAX_TASK_AGE_S = 24 * 3600.0
# A task folds its intervals into running totals once this many wait (or twice as many as
# the last fold kept): amortised O(1) per span end, memory bounded however long it lives.
_FOLD_AFTER = 1_024
# Folding stops this far before the latest start seen: a span may be started with a start
# time a little in the past (an LLM call's span starts at the SDK call).
_FOLD_LAG_NS = 1_000_000_000
# Past this many waiting intervals a span open all along (never ended, or open for hours)
# no longer holds the fold back: its own intervals, when it ends, count in full as busy
# time, and the part before the fold among the shares as the instants it overlapped were.
_MAX_PENDING = 50_000
# Spans open inside tasks; past this, all are forgotten (a last resort).
_MAX_OPEN_SPANS = 1_000_000
# Spans left open by tasks that finished (or were dropped): swept out once this many have
# piled up, or at the next task end a minute after the last sweep.
_SWEEP_AFTER_LEAKED = 10_000
_SWEEP_AFTER_S = 60.0

# One point per component per task.  The task name is deliberately not an attribute: task
# names are free text and would make the metric's cardinality unbounded (the wall-time
# histogram takes it only when asked, and bounded: _TaskNameLabels).
_METRIC_ATTRIBUTES = tuple((c, {semconv.COMPONENT: c}) for c in COMPONENTS)
_PART_ATTRIBUTES = tuple((p, {semconv.OTHER_PART: p}) for p in OTHER_PARTS)
_time_ns = time.time_ns
_cpu_ns = time.process_time_ns
# CPU samples of a task at least this far apart: a burst of spans costs one (the CPU time of a
# stretch this short is placed within it at most this far from where it was spent).
_SAMPLE_EVERY_NS = 1_000_000
# The rings of garbage-collection pauses and imports, each with the phase it is.
_RINGS: tuple[tuple[str, Deque[tuple[float, float, int | None, int | None]]], ...] = (
    ("gc", PAUSES.recent), ("imports", IMPORTS.recent))
_TASK_NAME = semconv.TASK_NAME
_COMPONENT = semconv.COMPONENT
_TOOL_EXECUTION = semconv.TOOL_EXECUTION
_TOOL_NAME = semconv.GEN_AI_TOOL_NAME
_OPERATION = semconv.GEN_AI_OPERATION_NAME
_EXECUTE_TOOL = semconv.OPERATION_EXECUTE_TOOL
# The conventions' tool span name: ``execute_tool {gen_ai.tool.name}``.
_TOOL_SPAN_PREFIX = semconv.OPERATION_EXECUTE_TOOL + " "
_TOOL_SOURCE = semconv.TOOL_SOURCE
_LLM_CLIENT = semconv.LLM_CLIENT
_SERVER = SpanKind.SERVER
_PROCESS = semconv.PROCESS_TASK
_RUN = semconv.RUN_TASK
_STARTUP = semconv.TASK_STARTUP

class _TaskNameLabels:
    """The wall-time metric's attributes for a task name: none unless names were asked for;
    then the name itself for the first ``limit`` distinct names and ``_other`` after."""

    __slots__ = ("_limit", "_seen")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: dict[str, dict[str, str]] = {}

    def __call__(self, name: str) -> dict[str, str] | None:
        if self._limit <= 0:
            return None
        attributes = self._seen.get(name)
        if attributes is None:
            if len(self._seen) >= self._limit:
                warn_once("task-name-limit", "agent-latency: more than %d task names; the "
                          "wall-time metric records later ones as %r", self._limit,
                          semconv.TASK_NAME_OVERFLOW)
                return {_TASK_NAME: semconv.TASK_NAME_OVERFLOW}
            attributes = self._seen[name] = {_TASK_NAME: name}
        return attributes


class _OpenTask(TaskNode):
    """What the processor holds for one open task: the task tree's node (counts, budget),
    its running split (:class:`RunningSplit`: intervals folded into totals as they become
    final) and the processor's own bookkeeping."""

    __slots__ = ("closed", "kept", "last_sample", "last_start", "open_spans", "open_starts",
                 "opened", "overlays_seen", "request", "running", "span_id", "whole_process")

    parent: _OpenTask | None

    def __init__(self, span_id: int, name: str, start_ns: int, parent: _OpenTask | None,
                 request: bool = False, whole_process: bool = False):
        super().__init__(span_id, name, start_ns, parent)
        self.span_id = span_id
        self.closed = False
        self.open_spans = 0  # spans started in it and not ended yet (not its own)
        # Start times of the spans open in it or in tasks nested in it: no interval still to
        # come starts before the oldest.
        self.open_starts: dict[int, int] = {}
        self.last_start = start_ns  # of the latest span that ended in it
        self.running = RunningSplit(start_ns)
        self.kept = 0  # intervals the last fold left waiting
        # What only this process knows, for the parts of other: the CPU time at span
        # boundaries (the latest sample's time), and the pauses and imports taken from the
        # rings so far (the end, perf_counter seconds, of the latest of each).
        now = _time_ns()
        self.running.sample([(now, _cpu_ns())])
        self.last_sample = now
        self.overlays_seen = [float("-inf")] * len(_RINGS)
        self.opened = time.monotonic()
        # A request task candidate: a task only if it sees an LLM call or a tool.
        self.request = request
        # The process task lives as long as the process by design: never evicted for age.
        self.whole_process = whole_process

    def add(self, intervals: Sequence[Interval]) -> None:
        self.running.add(intervals)

    def finish(self, end_ns: int) -> Budget:
        self.take_overlays()
        self.running.sample([(_time_ns(), _cpu_ns())])
        self.budget = self.running.finish(end_ns, dict(self.counts))
        return self.budget

    def sample(self, now: int) -> None:
        """The process's CPU time at a span boundary, at most one per ``_SAMPLE_EVERY_NS``."""
        if now - self.last_sample >= _SAMPLE_EVERY_NS:
            self.last_sample = now
            self.running.sample([(now, _cpu_ns())])

    def take_overlays(self) -> None:
        """The garbage-collection pauses and imports that ended since the last call, inside
        the task, as overlays (span time), with the CPU time at their edges as samples (so
        their own CPU time is theirs, not the agent's)."""
        offset = _time_ns() - time.perf_counter_ns()
        overlays: list[Interval] = []
        samples: list[tuple[int, int]] = []
        seen = self.overlays_seen
        for i, (phase, ring) in enumerate(_RINGS):
            # A copy: a collection (and its callback appending to the ring) may come any time.
            # The rings hold entries in the order they ended.
            latest = seen[i]
            for a, b, cpu_a, cpu_b in reversed(tuple(ring)):
                if b <= seen[i]:
                    break
                latest = max(latest, b)
                start, end = round(a * 1e9) + offset, round(b * 1e9) + offset
                if end <= self.start_ns:
                    continue
                overlays.append(Interval(start, end, phase))
                if cpu_a is not None and cpu_b is not None:
                    samples += ((start, cpu_a), (end, cpu_b))
            seen[i] = latest
        if overlays:
            self.running.add(overlays)
            self.running.sample(samples)

    def ancestors(self) -> Iterator[_OpenTask]:
        """The open tasks around it, innermost first: its work counts in them too."""
        parent = self.parent
        while parent is not None:
            if not parent.closed:
                yield parent
            parent = parent.parent

    def maybe_fold(self) -> None:
        """Fold what is final once enough intervals wait (amortised O(1) per interval)."""
        running = self.running
        waiting = len(running.pending)
        if waiting < _FOLD_AFTER or waiting < 2 * self.kept:
            return
        self.take_overlays()  # before the fold passes them
        until = self.last_start - _FOLD_LAG_NS
        if self.open_starts:
            oldest = min(self.open_starts.values())
            if oldest < until and waiting >= _MAX_PENDING:
                warn_once("long-open-span", "agent-latency: a span has been open in task %r "
                          "for more than %d budget intervals; the task's budget no longer "
                          "waits for it (if it ends, its time before now counts as busy time "
                          "but is not placed among the shares)", self.name, _MAX_PENDING)
                self.open_starts.clear()
            else:
                until = min(until, oldest)
        running.fold(until)
        self.kept = len(running.pending)


# The places of the span callbacks, guarded inline (see ``on_start``).
_ON_START = Guard("BudgetSpanProcessor.on_start")
_ON_ENDING = Guard("BudgetSpanProcessor._on_ending")
_ON_END = Guard("BudgetSpanProcessor.on_end")


def _set_on_ended_span(span: Any, attributes: Mapping[str, Any]) -> bool:
    """Add attributes to a span that has already ended; False when this SDK does not allow it.

    The SDK freezes a span's attributes in ``end()``, and a request task's span is ended by
    the server's instrumentation, not by us.  Its ``BoundedAttributes`` keeps them in
    ``_dict``, the same object the ``ReadableSpan`` handed to every processor and exporter
    reads, so a write there before the exporters' ``on_end`` (our ``_on_ending``, or our
    ``on_end`` when we are the provider's first processor) reaches them.  Private fields: on
    an SDK without them nothing is written (one warning) and the task metric still is.  (The
    SDK freezing spans before ``_on_ending`` contradicts the spec; once it stops,
    open-telemetry/opentelemetry-python#5613, this can be ``set_attributes``.)
    """
    target = _attribute_store(span)
    if not isinstance(target, dict):
        warn_once("ended-span-attributes", "agent-latency: cannot add attributes to an ended "
                  "%s span; request tasks get their metric but no budget attributes",
                  type(span).__name__)
        return False
    target.update(attributes)
    return True


def _starts_tool(span: Span, attrs: Mapping[str, Any] | None) -> bool:
    """Whether a span that just started is a tool run, as far as its start tells.

    Other instrumentations may set the conventions' attributes only as the span ends
    (google-adk does): its name, ``execute_tool {tool}``, says it at the start, so a tool of
    ours run inside it (a process, an MCP call) is nested in it, not another tool call.
    """
    if attrs:
        component = attrs.get(_COMPONENT)
        if component is not None:
            return component == _TOOL_EXECUTION
        if _TOOL_SOURCE in attrs:
            return False
        if attrs.get(_OPERATION) == _EXECUTE_TOOL:
            return True
    return _span_name(span).startswith(_TOOL_SPAN_PREFIX)


def _call_if_alive(method: weakref.WeakMethod[Any]) -> None:
    bound = method()
    if bound is not None:
        bound()


class BudgetSpanProcessor(SpanProcessor):
    """Derives each task's duration budget from the spans under it.

    Add it to an SDK ``TracerProvider`` (``instrument()`` does).  ``max_open_tasks`` and
    ``max_task_age`` (seconds) bound memory: past them the oldest open task is dropped with
    a warning, once.  ``task_names`` is how many distinct task names the wall-time metric
    labels (0, the default: none; the metric then has no task name attribute).
    """

    def __init__(
        self, meter_provider: metrics.MeterProvider | None = None, *,
        max_open_tasks: int = _DEFAULT_MAX_OPEN_TASKS,
        max_task_age: float = _DEFAULT_MAX_TASK_AGE_S,
        task_names: int = 0,
    ) -> None:
        # In start order: the oldest is evicted first, in O(1).
        self._tasks: OrderedDict[int, _OpenTask] = OrderedDict()
        self._leaked = 0  # open spans of finished tasks, since the last sweep
        self._last_sweep = time.monotonic()
        self._owner: dict[int, _OpenTask] = {}
        # Open spans that are tools or run inside one -> the outermost tool's span id.
        self._in_tool: dict[int, int] = {}
        self._lock = threading.RLock()
        self._max_open_tasks = max_open_tasks
        self._max_task_age = max_task_age
        self._enabled = True
        self._calls = 0
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("agent_latency")
        self._task_duration = meter.create_histogram(
            semconv.METRIC_TASK_DURATION, unit="s",
            description="Share of a task's wall time spent in each budget component.",
            explicit_bucket_boundaries_advisory=list(semconv.TASK_DURATION_BUCKETS),
        )
        self._task_wall_time = meter.create_histogram(
            semconv.METRIC_TASK_WALL_TIME, unit="s",
            description="Wall time of one task (by task name when enabled).",
            explicit_bucket_boundaries_advisory=list(semconv.TASK_DURATION_BUCKETS),
        )
        self._task_name_labels = _TaskNameLabels(task_names)
        self._task_connections = meter.create_histogram(
            semconv.METRIC_TASK_NEW_CONNECTIONS, unit="{connection}",
            description="New connections (TCP connects) one task opened.",
            explicit_bucket_boundaries_advisory=list(semconv.COUNT_BUCKETS),
        )
        self._task_other = meter.create_histogram(
            semconv.METRIC_TASK_OTHER, unit="s",
            description="A task's other time (the client's own), by part: garbage "
                        "collection, imports, lag behind the wire, CPU, idle.",
            explicit_bucket_boundaries_advisory=list(semconv.TASK_DURATION_BUCKETS),
        )
        self._tool_duration = meter.create_histogram(
            semconv.METRIC_TOOL_DURATION, unit="s",
            description="Duration of one tool call inside a task (outermost tools only).",
            explicit_bucket_boundaries_advisory=list(semconv.TOOL_DURATION_BUCKETS),
        )
        _hooks.register(self.finish_task)
        if hasattr(os, "register_at_fork"):
            forget = weakref.WeakMethod(self._forget_in_child)
            os.register_at_fork(after_in_child=lambda: _call_if_alive(forget))

    def _forget_in_child(self) -> None:
        """A forked child's tasks are its own: the parent's open ones are not collected
        (nor ended) there.  A fresh lock, as one held by another thread at fork stays held."""
        self._lock = threading.RLock()
        self._tasks.clear()
        self._owner.clear()
        self._in_tool.clear()

    # -- SpanProcessor ---------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        try:  # inline, not @Guard: one Python call less per span of the program
            if FAULTS:
                fault(_ON_START.place)
            if not self._enabled:
                return
            parent = _span_parent(span)  # the SDK's own field (_sdk): a property costs more
            owner = self._owner.get(parent.span_id) if parent is not None else None
            attrs = _attributes_of(span)
            if attrs and _TASK_NAME in attrs:
                task = _OpenTask(_span_id(span), str(attrs[_TASK_NAME]), _start_ns(span) or 0,
                                 owner, whole_process=_PROCESS in attrs or _RUN in attrs)
                if _STARTUP in attrs:
                    task.running.add(startup_overlay(attrs, task.start_ns))
                self._open(task)
                return
            if owner is None:
                # A request served with no task around it: a task if agent work happens.
                if _span_kind(span) is _SERVER and (parent is None or parent.is_remote):
                    self._open(_OpenTask(_span_id(span), _span_name(span),
                                         _start_ns(span) or 0, None, request=True))
                return
            if owner.closed:
                return
            sid = _span_id(span)
            owner_map = self._owner
            owner_map[sid] = owner
            owner.open_spans += 1
            start = _start_ns(span) or 0
            owner.open_starts[sid] = start
            # The process's CPU time at span boundaries: the agent's own CPU is placed on the
            # task's other time between two of them.
            now = _time_ns()
            owner.sample(now)
            if owner.parent is not None:
                for outer in owner.ancestors():
                    outer.open_starts[sid] = start
                    outer.sample(now)
            # A tool run by a tool (a shell command under a ``run_shell`` function) is tool
            # time like any other, but not another tool call, and a what-if scales it inside
            # the outer tool: remember the outermost tool each span runs in.
            top = self._in_tool.get(parent.span_id)
            if top is not None:
                self._in_tool[sid] = top
            elif _starts_tool(span, attrs):
                self._in_tool[sid] = sid
            if len(owner_map) > _MAX_OPEN_SPANS:
                self._sweep()
        except Exception:  # noqa: BLE001 - our failure must never become the program's
            _ON_START.report()

    def _on_ending(self, span: Span) -> None:
        try:  # inline, not @Guard: one Python call less per span of the program
            if FAULTS:
                fault(_ON_ENDING.place)
            # Newer SDKs (the spec's OnEnding) call this after end() and before any processor's
            # on_end, so a request task's budget reaches exporters added before us too.
            if not self._enabled:
                return
            task = self._tasks.get(_span_id(span))
            if task is not None and task.request:
                self._finish_request(task, span)
        except Exception:  # noqa: BLE001 - our failure must never become the program's
            _ON_ENDING.report()

    def on_end(self, span: ReadableSpan) -> None:
        try:  # inline, not @Guard: one Python call less per span of the program
            if FAULTS:
                fault(_ON_END.place)
            if not self._enabled:
                return
            sid = _span_id(span)
            task = self._owner.pop(sid, None)
            if task is None:
                return
            if task.span_id == sid:
                if task.request:
                    self._finish_request(task, span)  # an SDK without _on_ending
                self._close(task, span)
                return
            task.open_spans -= 1
            top = self._in_tool.pop(sid, sid)
            # Its work counts in its task and in every open task around it (a nested task's
            # too, so each folds its own time), while they are open.
            tasks = [task, *task.ancestors()] if task.parent is not None else [task]
            attrs = _attributes_of(span)
            start, end = _span_times(span) if attrs else (0, 0)
            now = _time_ns()
            for counted in tasks:
                counted.open_starts.pop(sid, None)
                counted.sample(now)
                if attrs and start > counted.last_start:
                    counted.last_start = start
            if not attrs:
                return
            component = attrs.get(_COMPONENT)
            tool = component == _TOOL_EXECUTION or (component is None and is_tool(attrs))
            if tool and end >= start:
                # The common case, kept to a tuple append and a counter (a plain tuple of
                # Interval's shape: the engine reads it by index, and the NamedTuple's
                # constructor would cost more than the rest of this branch).
                # ``call`` is the outermost tool's span id: nested tools share their parent's.
                interval = (start, max(end, start), "tool", top, 0, attrs.get(_TOOL_NAME, ""))
                for counted in tasks:
                    if counted.closed:
                        continue
                    counted.running.pending.append(interval)
                    if top == sid:
                        counted.counts["tool_calls"] += 1
                    counted.maybe_fold()
                if top == sid:
                    # Tool names are code-chosen (function, executable, MCP tool): bounded.
                    name = attrs.get(_TOOL_NAME)
                    self._tool_duration.record(
                        (end - start) / 1e9,
                        {_TOOL_NAME: name} if name else None)
                return
            if component is not None or tool or _LLM_CLIENT in attrs:
                self._collect(tasks, span, attrs, top)
        except Exception:  # noqa: BLE001 - our failure must never become the program's
            _ON_END.report()

    def shutdown(self) -> None:
        self._enabled = False
        _hooks.unregister(self.finish_task)
        with self._lock:
            self._tasks.clear()
            self._owner.clear()
            self._in_tool.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # -- budget ------------------------------------------------------------------------
    @Guard("BudgetSpanProcessor.finish_task")
    def finish_task(self, span: Any, end_ns: int) -> Budget | None:
        """Compute a task's budget and set it on its span, which is about to end."""
        if not self._enabled:
            return None
        task = self._tasks.get(span.get_span_context().span_id)
        if task is None:
            return None
        if task.budget is not None:
            warn_once("task-ended-twice", "agent-latency: task %r ended twice; its budget "
                      "is the one computed at the first end", task.name)
            return task.budget
        if end_ns < task.start_ns:
            warn_once("clock-backwards-task", "agent-latency: task %r ends before it "
                      "starts (the clock went backwards); its wall time is 0", task.name)
        budget = task.finish(end_ns)
        span.set_attributes(budget_attributes(
            budget, setup_saving=task.running.connection_setup_saving))
        return budget

    def _open(self, task: _OpenTask) -> None:
        with self._lock:
            self._evict(time.monotonic())
            self._tasks[task.span_id] = task
            self._owner[task.span_id] = task

    def _finish_request(self, task: _OpenTask, span: ReadableSpan) -> None:
        """Budget a request task candidate that saw agent work, on its ending span; once."""
        if task.budget is not None or not task.did_agent_work:
            return
        budget = task.finish(_end_ns(span) or task.start_ns)
        _set_on_ended_span(span, {**budget_attributes(
            budget, setup_saving=task.running.connection_setup_saving),
                                  _TASK_NAME: span.name})

    def open_tasks(self) -> Iterator[tuple[int, str]]:
        """``(span_id, name)`` of the tasks open now."""
        with self._lock:
            return iter([(t.span_id, t.name) for t in self._tasks.values()])

    def _collect(self, tasks: list[_OpenTask], span: ReadableSpan,
                 attrs: Mapping[str, Any], top: int) -> None:
        start, end = span.start_time or 0, span.end_time or 0
        if end < start:
            warn_once("clock-backwards-span", "agent-latency: span %r ends before it starts "
                      "(the clock went backwards); it counts as 0 s", span.name)
            end = start
        nested_tool = top != span.context.span_id
        try:
            intervals, kind = span_intervals(attrs, start, end, top)
        except UnknownComponentError as exc:  # counted as other, as the report does
            warn_once("unknown-component", "agent-latency: %s; the span counts as other", exc)
            intervals, kind = [Interval(start, end, "other")], None
        for task in tasks:
            if task.closed:
                continue
            if kind is not None:
                count_span(task.counts, kind, attrs, nested_tool=nested_tool)
            task.running.add(intervals)
            task.maybe_fold()

    def _close(self, task: _OpenTask, span: ReadableSpan) -> None:
        task.closed = True
        with self._lock:
            self._tasks.pop(task.span_id, None)
            if task.open_spans > 0:
                self._note_leaked(task.open_spans)
        if task.request and task.budget is None:
            self._let_go(task)
            return  # a request without agent work: no task
        budget = task.budget
        if budget is None:
            # Ended without task() (a user span marked as a task): still record metrics.
            budget = task.finish(span.end_time or task.start_ns)
        self._let_go(task)
        for outer in task.ancestors():
            outer.counts["subtasks"] += 1
        record = self._task_duration.record
        for component, attributes in _METRIC_ATTRIBUTES:
            record(budget.shares[component], attributes)
        if budget.other_measured:
            record_part = self._task_other.record
            parts = budget.other_parts
            for part, attributes in _PART_ATTRIBUTES:
                record_part(parts[part], attributes)
        self._task_wall_time.record(budget.wall, self._task_name_labels(task.name))
        self._task_connections.record(budget.counts.get("new_connections", 0))

    def _let_go(self, task: _OpenTask) -> None:
        """A task that is gone no longer holds back the folds of the tasks around it (spans
        it left open count there, if they ever end, as late intervals)."""
        if task.open_starts:
            for outer in task.ancestors():
                for sid in task.open_starts:
                    outer.open_starts.pop(sid, None)
        task.open_starts = {}
        task.running = RunningSplit(task.start_ns)

    def _note_leaked(self, count: int) -> None:
        """``count`` more spans were left open by a task that is gone (lock held); sweep
        when enough piled up or the last sweep is a minute old — amortised O(1)."""
        self._leaked += count
        now = time.monotonic()
        if self._leaked >= _SWEEP_AFTER_LEAKED or now - self._last_sweep > _SWEEP_AFTER_S:
            self._sweep()

    def _sweep(self) -> None:
        """Forget open spans whose task is gone (spans that never ended, or evicted tasks)."""
        with self._lock:
            self._leaked = 0
            self._last_sweep = time.monotonic()
            stale = [sid for sid, task in self._owner.items() if task.closed]
            if stale:
                warn_once("leaked-spans", "agent-latency: %d spans were never ended inside "
                          "tasks that finished; forgotten (end every span you start)",
                          len(stale))
            for sid in stale:
                self._owner.pop(sid, None)
            for sid in [sid for sid in self._in_tool if sid not in self._owner]:
                del self._in_tool[sid]
            if len(self._owner) > _MAX_OPEN_SPANS:
                warn_once("open-spans", "agent-latency: more than %d spans open inside tasks; "
                          "forgetting them (their tasks' budgets miss them)", _MAX_OPEN_SPANS)
                self._owner.clear()
                self._tasks.clear()
                self._in_tool.clear()

    def _evict(self, now: float) -> None:
        """Drop the oldest open tasks past the cap or the age limit (lock held); never the
        process task (a long-running server's would otherwise be dropped after a day)."""
        skipped = 0
        while self._tasks:
            oldest = next(iter(self._tasks.values()))
            if oldest.whole_process:
                if skipped >= len(self._tasks):
                    return  # only process tasks are open
                self._tasks.move_to_end(oldest.span_id)  # never evicted: out of the way
                skipped += 1
                continue
            too_many = len(self._tasks) >= self._max_open_tasks
            too_old = now - oldest.opened > self._max_task_age
            if not (too_many or too_old):
                return
            warn_once("evict", "agent-latency: dropping open task %r (%s); more than %d open "
                      "tasks or older than %.0f s — its budget is lost, later ones are kept",
                      oldest.name, "too many open" if too_many else "too old",
                      self._max_open_tasks, self._max_task_age)
            del self._tasks[oldest.span_id]
            oldest.closed = True
            self._let_go(oldest)
            self._note_leaked(oldest.open_spans + 1)  # its spans, and its own span
