"""The report's fleet view: percentiles across tasks, per task name, per model, and the
slowest tasks, LLM calls and tools — gathered a trace at a time, so memory holds figures,
not spans.

The ``--json`` object (``schema`` 1) is documented in ``docs/report.md``.
"""

from __future__ import annotations

import dataclasses
import heapq
from array import array
from collections.abc import Mapping
from typing import Any

from .. import semconv
from ..budget import COMPONENTS, SPLIT_BOUND_SHOWN
from ..codec import TaskNode, split_source
from ._read import StoredSpan
from ._stats import summarize
from ._times import iso_time

SCHEMA = 1

#: Keys of the summary figures of one group of tasks.
WALL = "wall"
FIRST_TOKEN = "first_token"  # noqa: S105 - a figure's key


class CallRecord:
    """One LLM call: model, duration, time to first token and speeds (s, tokens/s)."""

    __slots__ = ("duration", "first_token", "input_tokens", "model", "output_tokens",
                 "output_tps", "prefill_tps", "span_id", "split", "split_bound", "task",
                 "trace_id")

    def __init__(self, task: str, span: StoredSpan) -> None:
        a = span.attributes
        self.task = task
        self.trace_id = span.trace_id
        self.span_id = span.span_id
        self.model = str(a.get(semconv.GEN_AI_REQUEST_MODEL)
                         or a.get(semconv.GEN_AI_RESPONSE_MODEL) or "unknown")
        self.duration = max(span.end_ns - span.start_ns, 0) * 1e-9
        ttft = a.get(semconv.LLM_TTFT)
        self.first_token = float(ttft) if isinstance(ttft, (int, float)) else None
        # None when the server sent no count (a stream without usage): unknown, not 0.
        self.input_tokens = _count(a.get(semconv.GEN_AI_USAGE_INPUT_TOKENS))
        self.output_tokens = _count(a.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS))
        #: Where its prefill/output split came from (``codec.split_source``).
        self.split = split_source(a)
        #: How far its split point may be off either way (s): its first token's bound.
        bound = a.get(semconv.LLM_FIRST_TOKEN_BOUND)
        self.split_bound = float(bound) if isinstance(bound, (int, float)) and bound > 0 else 0.0
        # Speeds from a measured or reported split only: an estimate's are the rates it was
        # made with, and a server time left whole has none.
        measured = self.split in (semconv.SOURCE_MEASURED, semconv.SOURCE_SERVER_REPORTED)
        self.output_tps = _rate(a, semconv.LLM_OUTPUT_TOKENS_PER_SECOND, self.output_tokens,
                                semconv.LLM_OUTPUT_GENERATION) if measured else None
        self.prefill_tps = _rate(a, semconv.LLM_PREFILL_TOKENS_PER_SECOND, self.input_tokens,
                                 semconv.LLM_PREFILL) if measured else None

    def to_json(self) -> dict[str, Any]:
        """The call as a JSON object."""
        return {"model": self.model, "task": self.task, "trace_id": self.trace_id,
                "span_id": self.span_id, "duration": self.duration,
                "first_token": self.first_token, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "output_tokens_per_second": self.output_tps,
                "prefill_tokens_per_second": self.prefill_tps, "split": self.split,
                "split_bound": self.split_bound}


def _count(value: Any) -> int | None:
    """A stored token count; None when there is none."""
    return None if value is None or value == "" else int(value)


def _rate(attributes: Mapping[str, Any], recorded: str, tokens: int | None,
          phase: str) -> float | None:
    value = attributes.get(recorded)
    if isinstance(value, (int, float)) and value > 0:
        return float(value)
    seconds = attributes.get(phase)
    if tokens and isinstance(seconds, (int, float)) and seconds > 0:
        return tokens / seconds
    return None


def _figures() -> array[float]:
    """A column of figures: 8 bytes each (a list of floats takes 32), and a worker's pickles
    as one block of bytes (``report/_parallel.py``)."""
    return array("d")


class _Splits:
    """How many LLM calls had their prefill/output split left undone or estimated, and how
    many were split at a first token dated within a window (``bounded``: a pause held the
    client as it arrived), with the widest such bound."""

    __slots__ = ("bounded", "estimated", "llm_calls", "max_bound", "not_split")

    def __init__(self) -> None:
        self.llm_calls = self.not_split = self.estimated = self.bounded = 0
        self.max_bound = 0.0

    def count(self, calls: list[CallRecord]) -> None:
        self.llm_calls += len(calls)
        for call in calls:
            if call.split == semconv.SOURCE_NOT_SPLIT:
                self.not_split += 1
            elif call.split == semconv.SOURCE_ESTIMATED:
                self.estimated += 1
            if call.split_bound >= SPLIT_BOUND_SHOWN:
                self.bounded += 1
                self.max_bound = max(self.max_bound, call.split_bound)

    def merge(self, other: _Splits) -> None:
        self.llm_calls += other.llm_calls
        self.not_split += other.not_split
        self.estimated += other.estimated
        self.bounded += other.bounded
        self.max_bound = max(self.max_bound, other.max_bound)

    def to_json(self) -> dict[str, Any]:
        return {"llm_calls": self.llm_calls, "not_split_calls": self.not_split,
                "estimated_calls": self.estimated, "bounded_calls": self.bounded,
                "max_split_bound": self.max_bound}


class _Group:
    """The figures of one group of tasks (one name, or all)."""

    __slots__ = ("components", "first_token", "splits", "wall")

    def __init__(self) -> None:
        self.wall = _figures()
        self.components = {c: _figures() for c in COMPONENTS}
        self.first_token = _figures()
        self.splits = _Splits()

    def add(self, task: TaskNode, first_tokens: list[float],
            calls: list[CallRecord] | None = None) -> None:
        budget = task.budget
        assert budget is not None  # noqa: S101 - summarized tasks have budgets
        self.wall.append(budget.wall)
        for c in COMPONENTS:
            self.components[c].append(budget.shares[c])
        self.first_token.extend(first_tokens)
        self.splits.count(calls or [])

    def merge(self, other: _Group) -> None:
        self.wall.extend(other.wall)
        for c in COMPONENTS:
            self.components[c].extend(other.components[c])
        self.first_token.extend(other.first_token)
        self.splits.merge(other.splits)

    def to_json(self) -> dict[str, Any]:
        return {"count": len(self.wall), WALL: summarize(self.wall),
                "components": {c: summarize(v) for c, v in self.components.items()},
                FIRST_TOKEN: summarize(self.first_token), **self.splits.to_json()}


class _Model:
    """The figures of one model's calls."""

    __slots__ = ("first_token", "input_tokens", "no_usage", "output_tokens", "output_tps",
                 "prefill_tps", "splits")

    def __init__(self) -> None:
        self.first_token = _figures()
        self.output_tps = _figures()
        self.prefill_tps = _figures()
        # Sums of the counts the calls reported; None while no call reported one.
        self.output_tokens: int | None = None
        self.input_tokens: int | None = None
        #: Calls that reported no output token count.
        self.no_usage = 0
        self.splits = _Splits()

    def add(self, call: CallRecord) -> None:
        if call.first_token is not None:
            self.first_token.append(call.first_token)
        if call.output_tps is not None:
            self.output_tps.append(call.output_tps)
        if call.prefill_tps is not None:
            self.prefill_tps.append(call.prefill_tps)
        self.output_tokens = _plus(self.output_tokens, call.output_tokens)
        self.input_tokens = _plus(self.input_tokens, call.input_tokens)
        self.no_usage += call.output_tokens is None
        self.splits.count([call])

    def merge(self, other: _Model) -> None:
        self.first_token.extend(other.first_token)
        self.output_tps.extend(other.output_tps)
        self.prefill_tps.extend(other.prefill_tps)
        self.output_tokens = _plus(self.output_tokens, other.output_tokens)
        self.input_tokens = _plus(self.input_tokens, other.input_tokens)
        self.no_usage += other.no_usage
        self.splits.merge(other.splits)

    def to_json(self, calls: int) -> dict[str, Any]:
        splits = self.splits.to_json()
        del splits["llm_calls"]  # "calls"
        return {"calls": calls, FIRST_TOKEN: summarize(self.first_token),
                "output_tokens_per_second": summarize(self.output_tps),
                "prefill_tokens_per_second": summarize(self.prefill_tps),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "calls_without_usage": self.no_usage, **splits}


def _plus(total: int | None, count: int | None) -> int | None:
    """``total + count``, where None is unknown: a known count adds to what is known."""
    if count is None:
        return total
    return count if total is None else total + count


def split_words(figures: Mapping[str, Any], calls: int | None = None) -> str:
    """A group's or a model's calls whose prefill/output split is not measured, in words
    (empty when every one was): the report's and the HTML page's note under its table."""
    calls = figures.get("llm_calls", 0) if calls is None else calls
    not_split = figures.get("not_split_calls", 0)
    estimated = figures.get("estimated_calls", 0)
    words = []
    if not_split:
        words.append(f"{not_split:,} of {calls:,} LLM calls not split (non-streamed): their "
                     f"server time is all in prefill, and no speed is derived from it")
    if estimated:
        words.append(f"{estimated:,} of {calls:,} LLM calls split by estimate (rates learned "
                     f"from streamed calls)")
    if bounded := figures.get("bounded_calls", 0):
        words.append(f"{bounded:,} of {calls:,} LLM calls split at a first token dated "
                     "within a window (a pause, such as a long garbage collection, held the "
                     "client as it arrived): up to "
                     f"±{figures.get('max_split_bound', 0.0):.3f} s of prefill may be output "
                     "generation, or the reverse (report --tasks gives each task's bound)")
    if no_usage := figures.get("calls_without_usage", 0):
        words.append(f"{no_usage:,} of {calls:,} LLM calls reported no token counts (a "
                     "stream without usage: OpenAI's needs stream_options include_usage): "
                     "their tokens and speeds are unknown")
    return "; ".join(words)


class _Slowest:
    """The ``n`` largest items by a key, kept in a bounded heap; equal keys are ranked by
    a tie-break (the item's ids), so the list does not depend on the order items came in
    (a read in parts gives what one read gives)."""

    __slots__ = ("_heap", "_n", "_seq")

    def __init__(self, n: int) -> None:
        self._n = n
        # (key, tie-break reversed, sequence, item): the root is the one to drop first.
        self._heap: list[tuple[float, _Later, int, Any]] = []
        self._seq = 0

    def add(self, key: float, item: Any, tie: str) -> None:
        """Offer ``item``; of equal keys, the smaller ``tie`` ranks first."""
        self._seq += 1
        entry = (key, _Later(tie), self._seq, item)
        if len(self._heap) < self._n:
            heapq.heappush(self._heap, entry)
        elif self._n and entry > self._heap[0]:
            heapq.heapreplace(self._heap, entry)

    def items(self) -> list[Any]:
        return [item for _, _, item in self.ranked()]

    def ranked(self) -> list[tuple[float, str, Any]]:
        """``(key, tie-break, item)``, first ranked first."""
        return [(key, tie.text, item) for key, tie, _, item in sorted(self._heap, reverse=True)]

    def merge(self, other: _Slowest) -> None:
        for key, tie, item in other.ranked():
            self.add(key, item, tie)


class _Later:
    """A tie-break that sorts backwards: in the heap, the larger text is dropped first."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __lt__(self, other: _Later) -> bool:
        return self.text > other.text

    def __gt__(self, other: _Later) -> bool:
        return self.text < other.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Later) and self.text == other.text

    __hash__ = None  # type: ignore[assignment]


class Summary:
    """Everything the report prints, gathered task by task (:meth:`add`)."""

    __slots__ = ("_all", "_by_model", "_by_name", "_calls_per_model", "_slow_calls",
                 "_slow_tasks", "_slow_tools", "first_start_ns", "last_end_ns", "tasks",
                 "keep_tasks")

    def __init__(self, slowest: int = 5, keep_tasks: bool = False) -> None:
        self._all = _Group()
        self._by_name: dict[str, _Group] = {}
        self._by_model: dict[str, _Model] = {}
        self._calls_per_model: dict[str, int] = {}
        self._slow_tasks = _Slowest(slowest)
        self._slow_calls = _Slowest(slowest)
        self._slow_tools = _Slowest(slowest)
        self.keep_tasks = keep_tasks
        #: The tasks added, when ``keep_tasks`` (for per-task detail and ``--json``), with
        #: their spans' attributes dropped.
        self.tasks: list[TaskNode] = []
        self.first_start_ns: int | None = None
        self.last_end_ns: int | None = None

    @property
    def count(self) -> int:
        """Tasks added."""
        return len(self._all.wall)

    def add(self, task: TaskNode, calls: list[CallRecord],
            tools: list[tuple[str, float, str, str]]) -> None:
        """One task with its own LLM calls and outermost tools (``(name, s, trace id,
        span id)``)."""
        first_tokens = [c.first_token for c in calls if c.first_token is not None]
        self._all.add(task, first_tokens, calls)
        group = self._by_name.get(task.name)
        if group is None:
            group = self._by_name[task.name] = _Group()
        group.add(task, first_tokens, calls)
        for call in calls:
            model = self._by_model.get(call.model)
            if model is None:
                model = self._by_model[call.model] = _Model()
            model.add(call)
            self._calls_per_model[call.model] = self._calls_per_model.get(call.model, 0) + 1
            self._slow_calls.add(call.duration, call, call.trace_id + call.span_id)
        for name, seconds, trace_id, span_id in tools:
            self._slow_tools.add(seconds, {"tool": name, "task": task.name,
                                           "duration": seconds, "trace_id": trace_id},
                                 trace_id + span_id)
        assert task.budget is not None  # noqa: S101 - summarized tasks have budgets
        span = task.span
        # Its JSON made only if printed.
        self._slow_tasks.add(task.budget.wall, task, span.trace_id + span.span_id)
        span = task.span
        if self.first_start_ns is None or span.start_ns < self.first_start_ns:
            self.first_start_ns = span.start_ns
        if self.last_end_ns is None or span.end_ns > self.last_end_ns:
            self.last_end_ns = span.end_ns
        if self.keep_tasks:
            # Kept for their figures: the span's attributes (the budget the process
            # recorded, most of a task's memory) are not needed any more.
            task.span = dataclasses.replace(span, attributes={})
            task.counts = task.budget.counts
            self.tasks.append(task)

    def merge(self, other: Summary) -> None:
        """Add the tasks ``other`` gathered (a part of the same read, in order after
        this one's)."""
        self._all.merge(other._all)
        for name, group in other._by_name.items():
            self._by_name.setdefault(name, _Group()).merge(group)
        for name, model in other._by_model.items():
            self._by_model.setdefault(name, _Model()).merge(model)
            self._calls_per_model[name] = self._calls_per_model.get(name, 0) + \
                other._calls_per_model[name]
        self._slow_tasks.merge(other._slow_tasks)
        self._slow_calls.merge(other._slow_calls)
        self._slow_tools.merge(other._slow_tools)
        starts = [t for t in (self.first_start_ns, other.first_start_ns) if t is not None]
        ends = [t for t in (self.last_end_ns, other.last_end_ns) if t is not None]
        self.first_start_ns = min(starts) if starts else None
        self.last_end_ns = max(ends) if ends else None
        self.tasks.extend(other.tasks)

    def to_json(self) -> dict[str, Any]:
        """The ``summary`` member of the ``--json`` object."""
        return {
            "all": self._all.to_json(),
            "by_name": {name: g.to_json() for name, g in sorted(self._by_name.items())},
            "by_model": {name: m.to_json(self._calls_per_model[name])
                         for name, m in sorted(self._by_model.items())},
            "slowest": {
                "tasks": [task_json(t) for t in self._slow_tasks.items()],
                "llm_calls": [c.to_json() for c in self._slow_calls.items()],
                "tools": self._slow_tools.items(),
            },
        }


def start_order(task: TaskNode) -> tuple[int, str, str]:
    """Tasks' order in the report: by start, ties by trace and span id (whatever order
    the traces were read in)."""
    span = task.span
    return span.start_ns, span.trace_id, span.span_id


def task_json(task: TaskNode) -> dict[str, Any]:
    """One task as a JSON object (an element of ``tasks``)."""
    budget = task.budget
    assert budget is not None  # noqa: S101 - summarized tasks have budgets
    span = task.span
    return {
        "task": task.name, "trace_id": span.trace_id, "span_id": span.span_id,
        "service": span.service, "start": iso_time(span.start_ns),
        "start_unix_nano": span.start_ns, "wall": budget.wall, "shares": budget.shares,
        "busy": budget.busy, "counts": budget.counts,
        "other_parts": budget.other_parts, "other_measured": budget.other_measured,
        "output_tokens_per_second": budget.output_tokens_per_second,
        "prefill_tokens_per_second": budget.prefill_tokens_per_second,
        "parent_task": task.parent.name if task.parent is not None else None,
    }

