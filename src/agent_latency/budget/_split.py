"""Split a task's wall time into the five budget components, exactly."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._interval import (
    COMPONENTS,
    CONNECTION_SETUP_PHASES,
    OTHER,
    PHASE_COMPONENT,
    Interval,
    component_of,
)

_NS = 1e-9


@dataclass(slots=True)
class Budget:
    """Where one task's wall time went, in seconds.

    ``shares`` add up to ``wall`` (each instant is divided equally among the components
    active at it; instants with nothing active are ``other``).  ``busy`` is each
    component's plain sum of interval time inside the task and can exceed ``wall``.
    """

    wall: float
    shares: dict[str, float]
    busy: dict[str, float]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def output_tokens_per_second(self) -> float | None:
        """Output tokens over output-generation busy time, when both are known."""
        busy = self.busy.get("output_generation", 0.0)
        tokens = self.counts.get("output_tokens", 0)
        return tokens / busy if busy > 0 and tokens else None

    @property
    def prefill_tokens_per_second(self) -> float | None:
        """Input tokens over prefill busy time, when both are known."""
        busy = self.busy.get("prefill", 0.0)
        tokens = self.counts.get("input_tokens", 0)
        return tokens / busy if busy > 0 and tokens else None

    def summary(self, name: str) -> str:
        """The one-line summary the console prints for a finished task."""
        s = self.shares
        return (
            f"task {name} {self.wall:.2f}s = output {s['output_generation']:.2f}"
            f" | prefill {s['prefill']:.2f} | tools {s['tool_execution']:.2f}"
            f" | network {s['network_overhead']:.2f} | other {s['other']:.2f}"
        )


_INDEX = {c: i for i, c in enumerate(COMPONENTS)}
_OTHER = _INDEX[OTHER]
_BITS = tuple(1 << i for i in range(len(COMPONENTS)))
_PHASE_BITS = {
    **{phase: 1 << _INDEX[component] for phase, component in PHASE_COMPONENT.items()},
    **{component: 1 << i for i, component in enumerate(COMPONENTS)},
}
# The component indexes in each bit mask of active components.
_MEMBERS = [tuple(i for i in range(len(COMPONENTS)) if m >> i & 1)
            for m in range(1 << len(COMPONENTS))]


def split(
    intervals: Iterable[Interval | tuple[Any, ...]], start_ns: int, end_ns: int,
    counts: Mapping[str, int] | None = None,
) -> Budget:
    """Split ``[start_ns, end_ns]`` among the components of ``intervals``.

    Intervals are clipped to the task; backwards or empty ones are ignored.  The result
    does not depend on the order of ``intervals``.
    """
    end_ns = max(end_ns, start_ns)
    busy_ns = dict.fromkeys(_BITS, 0)
    by_mask: dict[int, int] = {}
    _sweep(_events(intervals, start_ns, end_ns, busy_ns), start_ns, end_ns, by_mask)
    return _budget(by_mask, busy_ns, end_ns - start_ns, counts)


def _events(intervals: Iterable[Interval | tuple[Any, ...]], start_ns: int, end_ns: int,
            busy_ns: dict[int, int]) -> list[tuple[int, int]]:
    """Sweep events (time, +bit when a component's interval opens, -bit when it closes) of
    ``intervals`` clipped to ``[start_ns, end_ns]``, their time added to ``busy_ns``."""
    bits = _PHASE_BITS
    events: list[tuple[int, int]] = []
    append = events.append
    for iv in intervals:
        # Index access: the processor hands plain (start, end, phase, …) tuples too.
        s = iv[0] if iv[0] > start_ns else start_ns
        e = iv[1] if iv[1] < end_ns else end_ns
        if e <= s:
            continue
        bit = bits.get(iv[2]) or 1 << _INDEX[component_of(iv[2])]
        busy_ns[bit] += e - s
        append((s, bit))
        append((e, -bit))
    return events


def _sweep(events: list[tuple[int, int]], start_ns: int, end_ns: int,
           by_mask: dict[int, int]) -> None:
    """Add to ``by_mask`` the time of ``[start_ns, end_ns]`` spent under each set of active
    components (a bit mask).  Time with the same set is summed per set, and only at the end
    divided among the set's members: the loop does one addition per event."""
    events.sort()
    active = dict.fromkeys(_BITS, 0)
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
        else:
            bit = -bit
            active[bit] -= 1
            if not active[bit]:
                mask &= ~bit
    if end_ns > cursor:
        by_mask[mask] = by_mask.get(mask, 0) + (end_ns - cursor)


def _budget(by_mask: Mapping[int, int], busy_ns: Mapping[int, int], wall_ns: int,
            counts: Mapping[str, int] | None) -> Budget:
    n = len(COMPONENTS)
    shares_ns = [0.0] * n
    for m, ns in by_mask.items():
        members = _MEMBERS[m]
        if not members:
            shares_ns[_OTHER] += ns
            continue
        part = ns / len(members)
        for i in members:
            shares_ns[i] += part
    # Floating division leaves at most a few ulps; put the residue on the largest share so
    # the five add up to the wall time to the last bit that a double can hold.
    residue = wall_ns - sum(shares_ns)
    largest = max(range(n), key=lambda i: shares_ns[i])
    shares_ns[largest] = max(shares_ns[largest] + residue, 0.0)
    return Budget(
        wall=wall_ns * _NS,
        shares={c: shares_ns[i] * _NS for i, c in enumerate(COMPONENTS)},
        busy={c: busy_ns[1 << i] * _NS for i, c in enumerate(COMPONENTS)},
        counts=dict(counts or {}),
    )


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

    It also keeps the one what-if figure a live task reports, the setup time a persistent
    connection would have saved (:func:`~agent_latency.budget.connection_setup_saving`).
    """

    __slots__ = ("busy_ns", "by_mask", "first_setup", "folded_to", "late_ns", "pending",
                 "setup_first_ns", "setup_ns", "start_ns")

    def __init__(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.folded_to = start_ns  # everything before it is in by_mask and busy_ns
        self.pending: list[tuple[Any, ...]] = []  # intervals (or their parts) after it
        self.by_mask: dict[int, int] = {}
        self.busy_ns = dict.fromkeys(_BITS, 0)
        self.late_ns = 0
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
                self.busy_ns[_PHASE_BITS.get(iv[2]) or 1 << _INDEX[component_of(iv[2])]] += e - s
            if iv[1] > folded_to:
                pending.append((folded_to, *iv[1:]))

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
        _sweep(_events(ready, self.folded_to, until_ns, self.busy_ns), self.folded_to,
               until_ns, self.by_mask)
        self.folded_to = until_ns
        self.pending = keep

    def finish(self, end_ns: int, counts: Mapping[str, int] | None = None) -> Budget:
        """The budget of ``[start_ns, end_ns]``.

        A task that ends before time already folded (its end given in the past, or a span
        of it ending on another thread while it ended) keeps the proportions of the folded
        totals, scaled to its wall time.
        """
        end_ns = max(end_ns, self.start_ns)
        wall_ns = end_ns - self.start_ns
        by_mask = dict(self.by_mask)
        busy_ns = dict(self.busy_ns)
        if end_ns >= self.folded_to:
            _sweep(_events(self.pending, self.folded_to, end_ns, busy_ns), self.folded_to,
                   end_ns, by_mask)
        else:
            folded = self.folded_to - self.start_ns
            by_mask = {m: ns * wall_ns // folded for m, ns in by_mask.items()}
            by_mask[0] = by_mask.get(0, 0) + wall_ns - sum(by_mask.values())
        return _budget(by_mask, busy_ns, wall_ns, counts)
