"""Split a task's wall time into the five budget components, exactly."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._interval import COMPONENTS, OTHER, Interval, component_of

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
    index = {c: i for i, c in enumerate(COMPONENTS)}
    busy_ns = [0] * len(COMPONENTS)
    # Sweep events: (time, component index, +1/-1).  Shares are accumulated per component
    # as integer nanoseconds times 1/k, kept exact by summing per active-count bucket.
    events: list[tuple[int, int, int]] = []
    for iv in intervals:
        # Index access: the processor hands plain (start, end, phase, …) tuples too.
        s = max(iv[0], start_ns)
        e = min(iv[1], end_ns)
        if e <= s:
            continue
        c = index[component_of(iv[2])]
        busy_ns[c] += e - s
        events.append((s, c, 1))
        events.append((e, c, -1))
    events.sort()
    # shared[c][k] = nanoseconds during which c was active with k components active.
    n = len(COMPONENTS)
    shared = [[0] * (n + 1) for _ in range(n)]
    active = [0] * n
    n_active = 0
    idle = 0
    cursor = start_ns
    for t, c, delta in events:
        if t > cursor:
            seg = t - cursor
            if n_active == 0:
                idle += seg
            else:
                for i in range(n):
                    if active[i]:
                        shared[i][n_active] += seg
            cursor = t
        before = active[c]
        active[c] += delta
        if before == 0 and active[c] > 0:
            n_active += 1
        elif before > 0 and active[c] == 0:
            n_active -= 1
    if end_ns > cursor:
        idle += end_ns - cursor
    shares_ns = [sum(ns / k for k, ns in enumerate(row) if k) for row in shared]
    shares_ns[index[OTHER]] += idle
    # Floating division leaves at most a few ulps; put the residue on the largest share so
    # the five add up to the wall time to the last bit that a double can hold.
    residue = wall_ns - sum(shares_ns)
    largest = max(range(n), key=lambda i: shares_ns[i])
    shares_ns[largest] = max(shares_ns[largest] + residue, 0.0)
    return Budget(
        wall=wall_ns * _NS,
        shares={c: shares_ns[i] * _NS for i, c in enumerate(COMPONENTS)},
        busy={c: busy_ns[i] * _NS for i, c in enumerate(COMPONENTS)},
        counts=dict(counts or {}),
    )
