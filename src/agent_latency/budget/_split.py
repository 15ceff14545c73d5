"""Split a task's wall time into the five budget components, and its ``other`` time into
the client's parts, exactly."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._interval import (
    COMPONENTS,
    CONNECTION_SETUP_PHASES,
    GC,
    IDLE,
    IMPORTS,
    LAG,
    OTHER,
    OTHER_PARTS,
    PHASE_COMPONENT,
    PHASE_PART,
    Interval,
    component_of,
)

_NS = 1e-9
#: The split point's bound worth showing (s): what the task line shows at two decimals.
#: Below it a first token's window is ordinary timing jitter, not a pause worth a word.
SPLIT_BOUND_SHOWN = 0.005
#: ``other`` at least this share of the wall time: the summary line names its parts.
LARGE_OTHER = 0.2


@dataclass(slots=True)
class Budget:
    """Where one task's wall time went, in seconds.

    ``shares`` add up to ``wall`` (each instant is divided equally among the components
    active at it; instants with nothing active are ``other``).  ``busy`` is each
    component's plain sum of interval time inside the task and can exceed ``wall``
    (parallel work adds up), except that a tool run by another tool counts only where the
    outer one is not running: nested tools are never counted twice.
    ``other_claims`` are the seconds of ``other`` that gc, imports, lag and cpu claimed, in
    that order; ``other_parts`` split ``shares["other"]`` exactly from them (``OTHER_PARTS``:
    gc, imports, lag, cpu, idle).  ``other_measured`` says the live process measured them
    (garbage-collection pauses, imports and CPU time): without it only ``lag`` (and a process
    task's start-up, in ``imports``) is known, and ``idle`` holds the rest.
    """

    wall: float
    shares: dict[str, float]
    busy: dict[str, float]
    counts: dict[str, int] = field(default_factory=dict)
    other_claims: tuple[float, ...] = ()
    other_measured: bool = False

    @property
    def other_parts(self) -> dict[str, float]:
        """``other`` split into its parts, in ``OTHER_PARTS`` order; they add up to it
        exactly (computed from ``other_claims`` on each use: a report holds many budgets)."""
        # Fewer claims than parts (none: a budget made by hand) leave the rest idle.
        claims = dict(zip(OTHER_PARTS, self.other_claims, strict=False))
        return other_parts(self.shares.get(OTHER, 0.0), claims)

    @property
    def output_tokens_per_second(self) -> float | None:
        """Output tokens over output-generation busy time, when both are known (not when a
        call's server time was left unsplit: its output tokens have no time of their own)."""
        busy = self.busy.get("output_generation", 0.0)
        tokens = self.counts.get("output_tokens", 0)
        if self.counts.get("not_split_calls"):
            return None
        return tokens / busy if busy > 0 and tokens else None

    @property
    def prefill_tokens_per_second(self) -> float | None:
        """Input tokens over prefill busy time, when both are known (not when a call's
        server time was left unsplit in prefill: that is no prefill speed)."""
        busy = self.busy.get("prefill", 0.0)
        tokens = self.counts.get("input_tokens", 0)
        if self.counts.get("not_split_calls"):
            return None
        return tokens / busy if busy > 0 and tokens else None

    @property
    def all_server_time_unsplit(self) -> bool:
        """Every LLM call's server time was left unsplit (non-streamed, nothing to split it
        by): prefill and output generation are one figure, the server's."""
        calls = self.counts.get("llm_calls", 0)
        return bool(calls) and self.counts.get("not_split_calls", 0) == calls

    @property
    def split_bound(self) -> float:
        """Seconds by which the split between prefill and output generation may be off
        either way (``split_bound_us``): as much of one may be the other's."""
        return self.counts.get("split_bound_us", 0) / 1e6

    def bound_mark(self) -> str:
        """`` ±s.ss`` after prefill and output generation in the task line, when the split
        point's bound shows at two decimals; empty otherwise."""
        bound = self.split_bound
        return f" ±{bound:.2f}" if bound >= SPLIT_BOUND_SHOWN else ""

    def bound_note(self) -> str:
        """The split point's bound in words (empty under :data:`SPLIT_BOUND_SHOWN`)."""
        bound = self.split_bound
        if bound < SPLIT_BOUND_SHOWN:
            return ""
        return (f"split point ±{bound:.3f} s: a first token arrived while a pause (such as a "
                "long garbage collection) held the client, so its time is estimated and up to "
                "that much of either may be the other's")

    def split_note(self) -> str:
        """How far prefill and output generation are measured, in words; empty when every
        call's split was measured or server-reported.  ``not split: non-streamed`` when no
        call's server time could be split (it is all in prefill)."""
        calls = self.counts.get("llm_calls", 0)
        unsplit = self.counts.get("not_split_calls", 0)
        estimated = self.counts.get("estimated_calls", 0)
        notes = []
        if unsplit and unsplit == calls:
            return "not split: non-streamed"
        if unsplit:
            notes.append(f"{unsplit} of {calls} calls not split (non-streamed), in prefill")
        if estimated:
            notes.append(f"{estimated} of {calls} calls split by estimate")
        return "; ".join(notes)

    def summary(self, name: str) -> str:
        """The one-line summary the console prints for a finished task; ``other``'s parts
        when it is a large share of the wall time and they were measured."""
        s = self.shares
        note = self.split_note()
        if self.all_server_time_unsplit:
            # Nothing tells prefill from output: one figure, said to be the server's.
            model = f"server {s['output_generation'] + s['prefill']:.2f} ({note})"
        else:
            mark = self.bound_mark()
            model = (f"output {s['output_generation']:.2f}{mark} | prefill {s['prefill']:.2f}"
                     f"{mark}" + (f" ({note})" if note else ""))
        line = (
            f"task {name} {self.wall:.2f}s = {model} | tools {s['tool_execution']:.2f}"
            f" | network {s['network_overhead']:.2f} | other {s['other']:.2f}"
        )
        if self.other_measured and s["other"] >= LARGE_OTHER * self.wall and s["other"] > 0:
            parts = self.other_parts
            line += " (" + ", ".join(f"{part} {parts[part]:.2f}" for part in OTHER_PARTS) + ")"
        return line


_INDEX = {c: i for i, c in enumerate(COMPONENTS)}
_OTHER = _INDEX[OTHER]
_BITS = tuple(1 << i for i in range(len(COMPONENTS)))
# Above the components' bits, one bit per part of ``other`` that intervals claim.  A mask
# of active bits then says both which components share an instant and which part claims
# ``other``'s share of it.
_LAG_BIT = 1 << len(COMPONENTS)
_IMPORTS_BIT = _LAG_BIT << 1
_GC_BIT = _LAG_BIT << 2
_CLAIMING = ((GC, _GC_BIT), (IMPORTS, _IMPORTS_BIT), (LAG, _LAG_BIT))  # priority order
_CLAIMED = _GC_BIT | _IMPORTS_BIT | _LAG_BIT
_PART_BIT = dict(_CLAIMING)
# One bit per phase: its component's, or an overlay's own.
_PHASE_BITS = {
    **{phase: 1 << _INDEX[component] for phase, component in PHASE_COMPONENT.items()},
    **{component: 1 << i for i, component in enumerate(COMPONENTS)},
    GC: _GC_BIT,
    IMPORTS: _IMPORTS_BIT,
}
# Phases that also claim a part of ``other`` (``client_tail``: lag): a second pair of events.
_PHASE_PART_BIT = {phase: _PART_BIT[part] for phase, part in PHASE_PART.items()}
_SINGLE_BITS = tuple(1 << i for i in range(_GC_BIT.bit_length()))
_TOOL_BIT = _PHASE_BITS["tool"]
# The component indexes in each bit mask (the parts' bits are no component).
_MEMBERS = [tuple(i for i in range(len(COMPONENTS)) if m >> i & 1)
            for m in range(_GC_BIT << 1)]


def split(
    intervals: Iterable[Interval | tuple[Any, ...]], start_ns: int, end_ns: int,
    counts: Mapping[str, int] | None = None, *,
    cpu: Iterable[tuple[int, int]] | None = None,
) -> Budget:
    """Split ``[start_ns, end_ns]`` among the components of ``intervals``, and ``other``
    among its parts.

    Intervals are clipped to the task; backwards or empty ones are ignored.  Intervals of the
    overlay phases (``gc``, ``imports``) make no component active: they name the part of
    ``other`` time they cover.  ``cpu`` holds the process's CPU time sampled during the task,
    ``(time ns, CPU ns)``: each stretch between two samples puts its CPU time on that
    stretch's unclaimed ``other`` time, at most all of it (samples at an overlay's edges keep
    its CPU time out of the agent's).  Given ``cpu`` (even empty), the parts count as
    measured.  The result does not depend on the order of ``intervals`` or ``cpu``.
    """
    end_ns = max(end_ns, start_ns)
    busy_ns = dict.fromkeys(_SINGLE_BITS, 0)
    events = _events(intervals, start_ns, end_ns, busy_ns)
    windows = None
    if cpu is not None:
        # Samples just outside the task (its end read a moment after it) count at its edge.
        samples = sorted((min(max(t, start_ns), end_ns), c) for t, c in cpu)
        windows = CpuWindows(c for _, c in samples)
        events.extend((t, 0) for t, _ in samples)
    by_mask: dict[int, int] = {}
    _sweep(events, start_ns, end_ns, by_mask, windows)
    return _budget(by_mask, busy_ns, end_ns - start_ns, counts, windows)


def _events(intervals: Iterable[Interval | tuple[Any, ...]], start_ns: int, end_ns: int,
            busy_ns: dict[int, int]) -> list[tuple[int, int]]:
    """Sweep events (time, +bits when an interval opens, -bits when it closes) of
    ``intervals`` clipped to ``[start_ns, end_ns]``, their time added to ``busy_ns``.

    A tool run by a tool (the same ``call``: the outermost tool's id) is busy only where
    its outer tool is not: each such group adds the union of its intervals, so a process
    that a function tool started is not counted twice.  Separate tool calls running in
    parallel still add up.  (A window of :class:`RunningSplit` sees a group whole: the
    outer tool's span is open, so not folded past, until its nested tools have ended.)
    """
    bits = _PHASE_BITS
    parts = _PHASE_PART_BIT
    events: list[tuple[int, int]] = []
    append = events.append
    tool_groups: dict[Any, list[tuple[int, int]]] = {}
    for iv in intervals:
        # Index access: the processor hands plain (start, end, phase, …) tuples too.
        s = iv[0] if iv[0] > start_ns else start_ns
        e = iv[1] if iv[1] < end_ns else end_ns
        if e <= s:
            continue
        phase = iv[2]
        bit = bits.get(phase) or 1 << _INDEX[component_of(phase)]
        if phase == "tool" and len(iv) > 3 and iv[3]:  # call 0: not known, never grouped
            tool_groups.setdefault(iv[3], []).append((s, e))
        else:
            busy_ns[bit] += e - s
        append((s, bit))
        append((e, -bit))
        if phase in parts:
            part = parts[phase]
            append((s, part))
            append((e, -part))
    if tool_groups:
        busy_ns[_TOOL_BIT] += sum(map(_union_ns, tool_groups.values()))
    return events


def _union_ns(spans: list[tuple[int, int]]) -> int:
    """The time the union of ``spans`` covers."""
    if len(spans) == 1:
        return spans[0][1] - spans[0][0]
    total = 0
    reach = None
    for s, e in sorted(spans):
        if reach is None or s >= reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total


def _sweep(events: list[tuple[int, int]], start_ns: int, end_ns: int,
           by_mask: dict[int, int], cpu: CpuWindows | None = None) -> None:
    """Add to ``by_mask`` the time of ``[start_ns, end_ns]`` spent under each set of active
    bits (a mask).  Time with the same set is summed per set, and only at the end divided
    among the set's members: the loop does one addition per event.  With ``cpu``, an event of
    bit 0 is a CPU sample: ``cpu`` is told the totals up to its time."""
    events.sort()
    active = dict.fromkeys(_SINGLE_BITS, 0)
    mask = 0
    cursor = start_ns
    for t, bit in events:
        if t > cursor:
            by_mask[mask] = by_mask.get(mask, 0) + (t - cursor)
            cursor = t
        if bit > 0:
            if not active[bit]:
                mask |= bit
            active[bit] += 1
        elif bit:
            bit = -bit
            active[bit] -= 1
            if not active[bit]:
                mask &= ~bit
        elif cpu is not None:
            cpu.sample(by_mask)
    if end_ns > cursor:
        by_mask[mask] = by_mask.get(mask, 0) + (end_ns - cursor)


def _other_ns(mask: int, ns: float) -> float:
    """``other``'s share of ``ns`` spent under ``mask``."""
    members = _MEMBERS[mask]
    if not members:
        return ns
    if _OTHER in members:
        return ns / len(members)
    return 0.0


# The share of an instant under each mask that is unclaimed ``other`` time.
_FREE = [0.0 if m & _CLAIMED else _other_ns(m, 1.0) for m in range(_GC_BIT << 1)]


class CpuWindows:
    """CPU samples met by the sweep: the CPU time of each stretch between two samples
    placed on the stretch's unclaimed ``other`` time (at most all of it), summed in
    ``cpu_ns``.  Samples at the edges of a garbage-collection pause or an import make it a
    stretch of its own, whose CPU time is the pause's or the import's, not the agent's."""

    __slots__ = ("_free_at", "_last", "_values", "cpu_ns")

    def __init__(self, values: Iterable[int] = ()) -> None:
        self._values: deque[int] = deque(values)
        self._last: int | None = None
        self._free_at = 0.0
        self.cpu_ns = 0.0

    def extend(self, values: Iterable[int]) -> None:
        """CPU times of samples still to be swept, in time order (a split kept as intervals
        arrive adds them as they come; their times go into the sweep as events of bit 0)."""
        self._values.extend(values)

    def copy(self) -> CpuWindows:
        """The same state, to sweep on without changing this one."""
        other = CpuWindows(self._values)
        other._last, other._free_at, other.cpu_ns = self._last, self._free_at, self.cpu_ns
        return other

    def sample(self, by_mask: Mapping[int, int]) -> None:
        """The sweep met the next sample, ``by_mask`` the time up to it under each mask."""
        cpu = self._values.popleft()
        free_table = _FREE
        free = sum(ns * free_table[mask] for mask, ns in by_mask.items())
        if self._last is not None:
            self.cpu_ns += min(max(cpu - self._last, 0), free - self._free_at)
        self._last = cpu
        self._free_at = free


def _budget(by_mask: Mapping[int, int], busy_ns: Mapping[int, int], wall_ns: int,
            counts: Mapping[str, int] | None, cpu: CpuWindows | None = None) -> Budget:
    n = len(COMPONENTS)
    shares_ns = [0.0] * n
    claimed = dict.fromkeys((GC, IMPORTS, LAG), 0.0)
    for m, ns in by_mask.items():
        members = _MEMBERS[m]
        if not members:
            shares_ns[_OTHER] += ns
        else:
            part = ns / len(members)
            for i in members:
                shares_ns[i] += part
        if m & _CLAIMED:
            for name, bit in _CLAIMING:
                if m & bit:
                    claimed[name] += _other_ns(m, ns)
                    break
    # Floating division leaves at most a few ulps; put the residue on the largest share so
    # the five add up to the wall time to the last bit that a double can hold.
    residue = wall_ns - sum(shares_ns)
    largest = max(range(n), key=lambda i: shares_ns[i])
    shares_ns[largest] = max(shares_ns[largest] + residue, 0.0)
    claims = (claimed[GC] * _NS, claimed[IMPORTS] * _NS, claimed[LAG] * _NS,
              cpu.cpu_ns * _NS if cpu is not None else 0.0)
    return Budget(
        wall=wall_ns * _NS,
        shares={c: shares_ns[i] * _NS for i, c in enumerate(COMPONENTS)},
        busy={c: busy_ns[1 << i] * _NS for i, c in enumerate(COMPONENTS)},
        counts=dict(counts or {}),
        other_claims=claims if any(claims) else (),  # most stored tasks: all idle
        other_measured=cpu is not None,
    )


def other_parts(other: float, claims: Mapping[str, float]) -> dict[str, float]:
    """``other`` seconds split into ``OTHER_PARTS``: each part takes what it claims, in
    priority order, at most what is left; ``idle`` takes the rest.  Each part is >= 0 and,
    added up in any order, they give ``other`` exactly: every part is a whole number of
    ``other``'s last bit (at most one bit less than its claim), so no sum of them rounds."""
    other = max(other, 0.0) if math.isfinite(other) else 0.0
    bit = math.ulp(other)
    parts: dict[str, float] = {}
    left = other
    for name in OTHER_PARTS[:-1]:
        claim = float(claims.get(name, 0.0))
        value = min(claim, left) if claim > 0 and math.isfinite(claim) else 0.0
        value = math.floor(value / bit) * bit
        parts[name] = value
        left -= value
    parts[IDLE] = left
    return parts


MAX_CPU_SAMPLES = 4096


class RunningSplit:
    """A task's split computed as its intervals arrive, in memory that does not grow with
    the task's length.

    :meth:`add` takes intervals as spans end; :meth:`fold` is told a time before which no
    interval is still to come (the start of the oldest span still open, or of the latest
    one to end when none is), sweeps everything before it into per-mask totals and keeps
    only the intervals, or their parts, after it.  :meth:`finish` sweeps what is left: the
    same totals, in integer nanoseconds, as :func:`split` over every interval, so the same
    budget.  An interval that arrives after its time was folded (a span that started before
    the time it was told) counts in full in ``busy``; its folded part cannot be placed among
    the shares any more and is counted in ``late_ns``.

    The parts of ``other`` fold the same way: overlays (``gc``, ``imports``) are intervals
    like any other (added before the fold passes them), and :meth:`sample` takes the CPU
    samples, swept with the intervals; a sample older than the fold is dropped.

    It also keeps the one what-if figure a live task reports, the setup time a persistent
    connection would have saved (:func:`~agent_latency.budget.connection_setup_saving`).
    """

    __slots__ = ("busy_ns", "by_mask", "cpu", "first_setup", "folded_to", "late_ns",
                 "late_tools", "pending", "samples", "setup_first_ns", "setup_ns", "start_ns")

    def __init__(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.folded_to = start_ns  # everything before it is in by_mask and busy_ns
        self.pending: list[tuple[Any, ...]] = []  # intervals (or their parts) after it
        self.samples: list[tuple[int, int]] = []  # CPU samples after it
        self.by_mask: dict[int, int] = {}
        self.busy_ns = dict.fromkeys(_SINGLE_BITS, 0)
        self.cpu = CpuWindows()
        self.late_ns = 0
        # Folded parts of late tools, per outermost tool: busy as their union (rare).
        self.late_tools: dict[Any, list[tuple[int, int]]] = {}
        self.setup_ns = 0  # connection setup, every call
        self.setup_first_ns = 0  # connection setup of the call with the first one
        self.first_setup: tuple[int, Any] | None = None  # (start, call) of the first one

    def add(self, intervals: Iterable[Interval | tuple[Any, ...]]) -> None:
        """Intervals of a span that ended (plain tuples of :class:`Interval`'s shape too)."""
        folded_to = self.folded_to
        pending = self.pending
        for iv in intervals:
            if iv[2] in CONNECTION_SETUP_PHASES and iv[1] > iv[0]:
                self._setup(iv)
            if iv[0] >= folded_to:
                pending.append(iv)
                continue
            s = iv[0] if iv[0] > self.start_ns else self.start_ns
            e = iv[1] if iv[1] < folded_to else folded_to
            if e > s:  # its folded part: busy, but no longer placeable among the shares
                self.late_ns += e - s
                if iv[2] == "tool" and len(iv) > 3 and iv[3]:
                    self.late_tools.setdefault(iv[3], []).append((s, e))
                else:
                    bit = _PHASE_BITS.get(iv[2]) or 1 << _INDEX[component_of(iv[2])]
                    self.busy_ns[bit] += e - s
            if iv[1] > folded_to:
                pending.append((folded_to, *iv[1:]))

    def sample(self, samples: Iterable[tuple[int, int]]) -> None:
        """CPU samples ``(time ns, CPU ns)`` of the process during the task (at most
        ``MAX_CPU_SAMPLES`` wait for a fold: past that every other one is dropped, and the
        stretches between those left are longer; each still bounds its CPU time by its own
        other time)."""
        # One read a moment before the task started counts at its start, as in split().
        start, folded_to = self.start_ns, self.folded_to
        self.samples.extend((max(t, start), c) for t, c in samples if max(t, start) >= folded_to)
        if len(self.samples) > MAX_CPU_SAMPLES:
            self.samples = sorted(self.samples)[::2]

    def _setup(self, iv: Interval | tuple[Any, ...]) -> None:
        duration = iv[1] - iv[0]
        self.setup_ns += duration
        first = self.first_setup
        if first is None or iv[0] < first[0]:
            if first is None or iv[3] != first[1]:
                # A new first call: its setup so far is what this interval brings (a call's
                # phases arrive together, when its span ends).
                self.setup_first_ns = 0
            self.first_setup = (iv[0], iv[3])
            self.setup_first_ns += duration
        elif iv[3] == first[1]:
            self.setup_first_ns += duration

    @property
    def connection_setup_saving(self) -> float:
        """Seconds of connection setup after the task's first connection."""
        return (self.setup_ns - self.setup_first_ns) * _NS

    def fold(self, until_ns: int) -> None:
        """No interval still to come starts before ``until_ns``: sweep the time before it."""
        if until_ns <= self.folded_to:
            return
        keep: list[tuple[Any, ...]] = []
        ready: list[tuple[Any, ...]] = []
        for iv in self.pending:
            if iv[0] >= until_ns:
                keep.append(iv)
                continue
            ready.append(iv)
            if iv[1] > until_ns:
                keep.append((until_ns, *iv[1:]))
        events = _events(ready, self.folded_to, until_ns, self.busy_ns)
        samples = sorted(self.samples)
        cut = bisect_left(samples, (until_ns,))
        self.cpu.extend(c for _, c in samples[:cut])
        events.extend((t, 0) for t, _ in samples[:cut])
        _sweep(events, self.folded_to, until_ns, self.by_mask, self.cpu)
        self.folded_to = until_ns
        self.pending = keep
        self.samples = samples[cut:]

    def finish(self, end_ns: int, counts: Mapping[str, int] | None = None) -> Budget:
        """The budget of ``[start_ns, end_ns]``, its parts of ``other`` measured.

        A task that ends before time already folded (its end given in the past, or a span
        of it ending on another thread while it ended) keeps the proportions of the folded
        totals, scaled to its wall time.
        """
        end_ns = max(end_ns, self.start_ns)
        wall_ns = end_ns - self.start_ns
        by_mask = dict(self.by_mask)
        busy_ns = dict(self.busy_ns)
        busy_ns[_TOOL_BIT] += sum(map(_union_ns, self.late_tools.values()))
        cpu = self.cpu.copy()
        if end_ns >= self.folded_to:
            events = _events(self.pending, self.folded_to, end_ns, busy_ns)
            # Samples just after the end (read a moment after it) count at its edge.
            samples = sorted((min(t, end_ns), c) for t, c in self.samples)
            cpu.extend(c for _, c in samples)
            events.extend((t, 0) for t, _ in samples)
            _sweep(events, self.folded_to, end_ns, by_mask, cpu)
        else:
            folded = self.folded_to - self.start_ns
            by_mask = {m: ns * wall_ns // folded for m, ns in by_mask.items()}
            by_mask[0] = by_mask.get(0, 0) + wall_ns - sum(by_mask.values())
        return _budget(by_mask, busy_ns, wall_ns, counts, cpu)
