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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import metrics
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import SpanKind

from . import _hooks, semconv
from ._import_times import IMPORTS
from ._log import FAULTS, fault, internal_error, warn_once
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
from .budget import (
    COMPONENTS,
    OTHER_PARTS,
    PHASE_PART,
    Budget,
    Interval,
    UnknownComponentError,
    component_of,
)
from .budget._spans import budget_attributes, startup_overlay
from .budget._tree import MAX_CPU_SAMPLES, TaskNode

_DEFAULT_MAX_OPEN_TASKS = 10_000
_DEFAULT_MAX_TASK_AGE_S = 24 * 3600.0
# Past this many intervals a task's intervals are merged per component (the split stays
# exact; the what-if loses per-call detail), so a long task's memory stays bounded.
_MAX_INTERVALS_PER_TASK = 100_000
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
# CPU samples of a task at least this far apart: a burst of spans costs one (the CPU time of a
# stretch this short is placed within it at most this far from where it was spent).
_SAMPLE_EVERY_NS = 1_000_000
# Two threads may append to a ring a little out of the order their entries ended.
_RING_DISORDER_NS = 1_000_000_000
_cpu_ns = time.process_time_ns
_TASK_NAME = semconv.TASK_NAME
_COMPONENT = semconv.COMPONENT
_TOOL_EXECUTION = semconv.TOOL_EXECUTION
_TOOL_NAME = semconv.GEN_AI_TOOL_NAME
_LLM_CLIENT = semconv.LLM_CLIENT
_SERVER = SpanKind.SERVER
_STARTUP = semconv.TASK_STARTUP
_PROCESS = semconv.PROCESS_TASK
_RUN = semconv.RUN_TASK

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
    """What the processor holds for one open task: the task tree's node (intervals, counts,
    nested tasks, budget) and the processor's own bookkeeping."""

    __slots__ = ("closed", "open_spans", "opened", "request", "span_id", "whole_process")

    parent: _OpenTask | None
    cpu_samples: list[tuple[int, int]]

    def __init__(self, span_id: int, name: str, start_ns: int, parent: _OpenTask | None,
                 request: bool = False, whole_process: bool = False):
        super().__init__(span_id, name, start_ns, parent)
        self.cpu_samples = []
        self.span_id = span_id
        self.closed = False
        self.open_spans = 0  # spans started in it and not ended yet (not its own)
        self.opened = time.monotonic()
        # A request task candidate: a task only if it sees an LLM call or a tool.
        self.request = request
        # The process task lives as long as the process by design: never evicted for age.
        self.whole_process = whole_process

    def add(self, intervals: Sequence[Interval]) -> None:
        self.intervals.extend(intervals)
        if len(self.intervals) > _MAX_INTERVALS_PER_TASK:
            self.intervals = _merge_per_component(self.intervals)


def live_overlays(start_ns: int, end_ns: int) -> tuple[list[Interval], list[tuple[int, int]]]:
    """Garbage-collection pauses and imports of this process inside ``[start_ns, end_ns]``
    (span time, epoch ns), from their ``perf_counter`` rings, and the process's CPU time at
    their edges as samples (so their own CPU time is theirs, not the agent's)."""
    offset = _time_ns() - time.perf_counter_ns()
    overlays: list[Interval] = []
    samples: list[tuple[int, int]] = []
    for phase, recent in (("gc", PAUSES.recent), ("imports", IMPORTS.recent)):
        # A copy: a collection (and its callback appending to the ring) may come any time.
        for a, b, cpu_a, cpu_b in reversed(tuple(recent)):
            start, end = round(a * 1e9) + offset, round(b * 1e9) + offset
            if end <= start_ns - _RING_DISORDER_NS:
                break  # the rings hold entries as they ended, within a thread switch
            if start < end_ns and end > start_ns:
                overlays.append(Interval(start, end, phase))
                if cpu_a is not None and cpu_b is not None:
                    samples += ((start, cpu_a), (end, cpu_b))
    return overlays, samples


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


def _call_if_alive(method: weakref.WeakMethod[Any]) -> None:
    bound = method()
    if bound is not None:
        bound()


def _merge_per_component(intervals: list[Interval]) -> list[Interval]:
    """Union the intervals of each component (and of each phase that is a part of
    ``other`` by itself); the split only sees those."""
    by_component: dict[str, list[tuple[int, int]]] = {}
    for iv in intervals:
        key = iv[2] if iv[2] in PHASE_PART else component_of(iv[2])
        by_component.setdefault(key, []).append((iv[0], iv[1]))
    merged: list[Interval] = []
    for component, spans in by_component.items():
        spans.sort()
        cur_s, cur_e = spans[0]
        for start, end in spans[1:]:
            if start <= cur_e:
                cur_e = max(cur_e, end)
            else:
                merged.append(Interval(cur_s, cur_e, component))
                cur_s, cur_e = start, end
        merged.append(Interval(cur_s, cur_e, component))
    return merged


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
            explicit_bucket_boundaries_advisory=list(semconv.DURATION_BUCKETS),
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
        if not self._enabled:
            return
        try:
            if FAULTS:
                fault("BudgetSpanProcessor.on_start")
            parent = _span_parent(span)  # the SDK's own field (_sdk): a property costs more
            owner = self._owner.get(parent.span_id) if parent is not None else None
            attrs = _attributes_of(span)
            if attrs and _TASK_NAME in attrs:
                task = _OpenTask(_span_id(span), str(attrs[_TASK_NAME]), _start_ns(span) or 0,
                                 owner, whole_process=_PROCESS in attrs or _RUN in attrs)
                if _STARTUP in attrs:
                    task.overlays = startup_overlay(attrs, task.start_ns)
                task.cpu_samples.append((_time_ns(), _cpu_ns()))
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
            # The process's CPU time at span boundaries: the agent's own CPU is placed on the
            # task's other time between two of them.
            samples = owner.cpu_samples
            now = _time_ns()
            if now - samples[-1][0] >= _SAMPLE_EVERY_NS:
                samples.append((now, _cpu_ns()))
            sid = _span_id(span)
            owner_map = self._owner
            owner_map[sid] = owner
            owner.open_spans += 1
            # A tool run by a tool (a shell command under a ``run_shell`` function) is tool
            # time like any other, but not another tool call, and a what-if scales it inside
            # the outer tool: remember the outermost tool each span runs in.
            top = self._in_tool.get(parent.span_id)
            if top is not None:
                self._in_tool[sid] = top
            elif attrs and attrs.get(_COMPONENT) == _TOOL_EXECUTION:
                self._in_tool[sid] = sid
            if len(owner_map) > _MAX_OPEN_SPANS:
                self._sweep()
        except Exception:  # noqa: BLE001 - never break the host program
            internal_error("BudgetSpanProcessor.on_start")

    def _on_ending(self, span: Span) -> None:
        # Newer SDKs (the spec's OnEnding) call this after end() and before any processor's
        # on_end, so a request task's budget reaches exporters added before us too.
        if not self._enabled:
            return
        try:
            if FAULTS:
                fault("BudgetSpanProcessor._on_ending")
            task = self._tasks.get(_span_id(span))
            if task is not None and task.request:
                self._finish_request(task, span)
        except Exception:  # noqa: BLE001
            internal_error("BudgetSpanProcessor._on_ending")

    def on_end(self, span: ReadableSpan) -> None:
        if not self._enabled:
            return
        try:
            if FAULTS:
                fault("BudgetSpanProcessor.on_end")
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
            samples = task.cpu_samples
            now = _time_ns()
            if now - samples[-1][0] >= _SAMPLE_EVERY_NS:
                samples.append((now, _cpu_ns()))
                if len(samples) > MAX_CPU_SAMPLES:
                    task.sampled()
            top = self._in_tool.pop(sid, sid)
            attrs = _attributes_of(span)
            if not attrs:
                return
            start, end = _span_times(span)
            if attrs.get(_COMPONENT) == _TOOL_EXECUTION and end >= start:
                # The common case, kept to a tuple append and a counter (a plain tuple of
                # Interval's shape: the engine reads it by index, and the NamedTuple's
                # constructor would cost more than the rest of this branch).
                # ``call`` is the outermost tool's span id: nested tools share their parent's.
                task.intervals.append((start, max(end, start),  # type: ignore[arg-type]  # a plain tuple of Interval's shape
                                       "tool", top, 0, attrs.get(_TOOL_NAME, "")))
                if top == sid:
                    task.counts["tool_calls"] += 1
                    # Tool names are code-chosen (function, executable, MCP tool): bounded.
                    name = attrs.get(_TOOL_NAME)
                    self._tool_duration.record(
                        (end - start) / 1e9,
                        {_TOOL_NAME: name} if name else None)
                if len(task.intervals) > _MAX_INTERVALS_PER_TASK:
                    task.intervals = _merge_per_component(task.intervals)
                return
            if _COMPONENT in attrs or _LLM_CLIENT in attrs:
                self._collect(task, span, attrs, top)
        except Exception:  # noqa: BLE001
            internal_error("BudgetSpanProcessor.on_end")

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
    def finish_task(self, span: Any, end_ns: int) -> Budget | None:
        """Compute a task's budget and set it on its span, which is about to end."""
        if not self._enabled:
            return None
        try:
            if FAULTS:
                fault("BudgetSpanProcessor.finish_task")
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
            budget = self._finish(task, end_ns)
            span.set_attributes(budget_attributes(budget, task.intervals))
            return budget
        except Exception:  # noqa: BLE001
            internal_error("BudgetSpanProcessor.finish_task")
            return None

    @staticmethod
    def _finish(task: _OpenTask, end_ns: int) -> Budget:
        """The task's budget, with what only this process knows: garbage-collection pauses,
        imports and CPU samples during it."""
        task.cpu_samples.append((_time_ns(), _cpu_ns()))
        overlays, samples = live_overlays(task.start_ns, end_ns)
        return task.finish(end_ns, overlays=overlays, cpu=task.cpu_samples + samples)

    def _open(self, task: _OpenTask) -> None:
        with self._lock:
            self._evict(time.monotonic())
            self._tasks[task.span_id] = task
            self._owner[task.span_id] = task

    def _finish_request(self, task: _OpenTask, span: ReadableSpan) -> None:
        """Budget a request task candidate that saw agent work, on its ending span; once."""
        if task.budget is not None or not task.did_agent_work:
            return
        budget = self._finish(task, _end_ns(span) or task.start_ns)
        _set_on_ended_span(span, {**budget_attributes(budget, task.intervals),
                                  _TASK_NAME: span.name})

    def open_tasks(self) -> Iterator[tuple[int, str]]:
        """``(span_id, name)`` of the tasks open now."""
        with self._lock:
            return iter([(t.span_id, t.name) for t in self._tasks.values()])

    def _collect(self, task: _OpenTask, span: ReadableSpan, attrs: Mapping[str, Any],
                 top: int) -> None:
        start, end = span.start_time or 0, span.end_time or 0
        if end < start:
            warn_once("clock-backwards-span", "agent-latency: span %r ends before it starts "
                      "(the clock went backwards); it counts as 0 s", span.name)
            end = start
        try:
            task.add_span(attrs, start, end, top, nested_tool=top != span.context.span_id)
        except UnknownComponentError as exc:  # counted as other by the tree
            warn_once("unknown-component", "agent-latency: %s; the span counts as other", exc)

    def _close(self, task: _OpenTask, span: ReadableSpan) -> None:
        task.closed = True
        with self._lock:
            self._tasks.pop(task.span_id, None)
            if task.open_spans > 0:
                self._note_leaked(task.open_spans)
        if task.request and task.budget is None:
            task.intervals = []
            return  # a request without agent work: no task
        budget = task.budget
        if budget is None:
            # Ended without task() (a user span marked as a task): still record metrics.
            budget = self._finish(task, span.end_time or task.start_ns)
        parent = task.parent
        if parent is not None and parent.span_id in self._tasks:
            parent.absorb(task)
        task.intervals = []
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
            self._note_leaked(oldest.open_spans + 1)  # its spans, and its own span
