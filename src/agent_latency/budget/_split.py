"""Split a task's wall time into the five budget components, exactly."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._interval import COMPONENTS, OTHER, PHASE_COMPONENT, Interval, component_of

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
    wall_ns = end_ns - start_ns
    n = len(COMPONENTS)
    bits = _PHASE_BITS
    busy_ns = dict.fromkeys(_BITS, 0)
    # Sweep events (time, +bit when a component's interval opens, -bit when it closes).
    # Time with the same set of active components is summed per set (a bit mask), and only
    # at the end divided among the set's members: the loop does one addition per event.
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
    events.sort()
    by_mask: dict[int, int] = {}
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
