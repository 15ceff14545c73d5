"""Project a recorded task's wall time under changes to its components.

The recorded happens-before order is kept: an interval that started after another ended
still waits for it, plus the same reaction gap the agent showed after the last thing that
had finished before it started.  Intervals that overlapped stay free to overlap, so parallel
work is not double-saved.  Every interval's new start is its earliest start under those
constraints (an earliest schedule, as in a critical-path computation).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ._interval import CONNECTION_SETUP_PHASES, Interval, UnknownComponentError

# How an interval's duration changes: (interval, recorded duration ns) -> new duration ns.
Change = Callable[[Interval, int], float]


@dataclass(slots=True)
class Scenario:
    """A set of changes to project a task under.  Every field left ``None`` is unchanged.

    Speeds: ``output_speedup`` (×k output tokens/s) or ``output_tps`` (= X tokens/s, needs
    the call's token count); the same for prefill.  ``ttft_reduction`` and
    ``network_reduction`` are fractions (0.3 = −30 %) of the time to first token (client,
    network before the first token and prefill) and of network overhead.
    ``persistent_connection`` removes DNS, TCP connect and TLS.  ``tool_speedup`` divides tool
    time (by tool name when a mapping).  ``per_token_reduction`` (a fraction) cuts the time
    each output token took as the client saw it (output generation) where ``output_tps`` does
    not replace it: an absolute rate is the stream's rate as the client sees it, per-token
    overhead included, so it is not cut again.  ``extra`` holds further custom changes.
    ``client_pace`` (on by default) keeps the pace of a client that could not keep up with
    a stream: a faster model does not make it read faster (see :func:`project`).
    """

    output_speedup: float | None = None
    output_tps: float | None = None
    prefill_speedup: float | None = None
    prefill_tps: float | None = None
    ttft_reduction: float | None = None
    network_reduction: float | None = None
    persistent_connection: bool = False
    tool_speedup: float | dict[str, float] | None = None
    per_token_reduction: float | None = None
    extra: list[Change] = field(default_factory=list)
    client_pace: bool = True

    def __post_init__(self) -> None:
        for name in ("output_speedup", "output_tps", "prefill_speedup", "prefill_tps"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        for name in ("ttft_reduction", "network_reduction", "per_token_reduction"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"{name} must be a fraction in [0, 1], got {value!r}")
        speedups = self.tool_speedup.values() if isinstance(self.tool_speedup, dict) else (
            [self.tool_speedup] if self.tool_speedup is not None else [])
        for value in speedups:
            if not value > 0:
                raise ValueError(f"tool_speedup must be > 0, got {value!r}")

    def tool_factor(self, name: str) -> float | None:
        """The speed-up of the tool ``name``; ``None`` when the scenario names no factor for
        it (a nested tool then runs at its enclosing tool's factor)."""
        if isinstance(self.tool_speedup, dict):
            return self.tool_speedup.get(name)
        return self.tool_speedup

    def duration(self, iv: Interval) -> float:
        """The projected duration of one interval, in nanoseconds."""
        d: float = iv.duration
        phase = iv.phase
        if phase == "output_generation":
            if self.output_tps is not None and iv.tokens > 0:
                # The first token ends prefill; generation is the gaps after it.
                d = (iv.tokens - 1) / self.output_tps * 1e9
            else:
                if self.output_speedup is not None:
                    d /= self.output_speedup
                if self.per_token_reduction is not None:
                    d *= 1.0 - self.per_token_reduction
        elif phase == "prefill":
            if self.prefill_tps is not None and iv.tokens > 0:
                d = iv.tokens / self.prefill_tps * 1e9
            elif self.prefill_speedup is not None:
                d /= self.prefill_speedup
        elif phase == "tool":
            d /= self.tool_factor(iv.name) or 1.0
        if self.persistent_connection and phase in CONNECTION_SETUP_PHASES:
            d = 0.0
        if self.network_reduction is not None and phase in _NETWORK_PHASES:
            d *= 1.0 - self.network_reduction
        if self.ttft_reduction is not None and phase in _TTFT_PHASES:
            d *= 1.0 - self.ttft_reduction
        for change in self.extra:
            d = change(iv, round(d))
        return max(d, 0.0)


_NETWORK_PHASES = frozenset({"dns", "connect", "tls", "upload", "rtt", "tail", "network"})
_TTFT_PHASES = frozenset({"client", "dns", "connect", "tls", "upload", "rtt", "prefill"})


#: Named scenarios: each field with the published figure it applies and where it comes from.
#: These are vendors' claims, quoted, not figures measured here.
PRESETS: dict[str, tuple[str, dict[str, object], list[str]]] = {
    "latency-first": (
        "a latency-first serving stack, as its vendors describe it",
        {"output_tps": 1000.0, "network_reduction": 0.8, "persistent_connection": True,
         "per_token_reduction": 0.3, "ttft_reduction": 0.5},
        [
            "output_tps=1000: 1,000 output tokens/s, the published generation speed of a "
            "latency-first model (claim)",
            "network_reduction=0.8 and persistent_connection: 'a persistent WebSocket "
            "connection cut client/server round-trip overhead by 80 %' (claim); with one "
            "connection kept open there is no DNS, TCP connect or TLS per call",
            "per_token_reduction=0.3: '... per-token overhead by 30 %' (claim); applied only "
            "to calls without a token count, as 1,000 tokens/s already is the rate the "
            "client sees",
            "ttft_reduction=0.5: '... and time to first token by 50 %' (claim)",
        ],
    ),
}


def preset(name: str, **overrides: object) -> Scenario:
    """The scenario of a named preset (``PRESETS``), with fields overridden."""
    try:
        _, fields, _ = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}") from None
    return Scenario(**{**fields, **overrides})  # type: ignore[arg-type]  # Scenario's own field names


#: A stream's client was behind the wire at its last output token by at least this much, and
#: this share of the stream's output generation: it could not keep up (a pause near the end
#: makes a shorter lag), and its pace is kept.
CLIENT_BEHIND_NS = 5_000_000
CLIENT_BEHIND_SHARE = 0.25


@dataclass(slots=True)
class Projection:
    """A what-if result: the recorded and projected wall time and the new schedule.

    ``client_bound`` counts the LLM calls (of ``llm_calls`` with output generation) whose
    projected end the client's own pace set: it read the stream slower than the server sent
    it, and would still.  ``client_kept`` is how much later the task ends for it (s): the
    projection less the same projection as if the client could read at any speed — the
    saving a faster model does not bring to a busy client.
    """

    recorded_wall: float
    projected_wall: float
    schedule: list[tuple[Interval, int, int]]
    llm_calls: int = 0
    client_bound: int = 0
    client_kept: float = 0.0

    @property
    def saved(self) -> float:
        """Seconds saved (negative when the scenario is slower)."""
        return self.recorded_wall - self.projected_wall

    @property
    def speedup(self) -> float:
        """Recorded over projected wall time."""
        return self.recorded_wall / self.projected_wall if self.projected_wall > 0 else 1.0


def project(
    intervals: Iterable[Interval], start_ns: int, end_ns: int, scenario: Scenario,
) -> Projection:
    """Recompute the earliest schedule of a task's intervals under ``scenario``.

    A streamed call whose client was behind the wire at the last output token (its
    ``client_tail`` carries the ``lag``; at least ``CLIENT_BEHIND_NS`` and
    ``CLIENT_BEHIND_SHARE`` of its output generation) keeps the client's pace: from the
    first token's arrival, the client hands the last token over no earlier than it did
    (the server's faster stream waits in the socket), then does its final work; so its
    ``client_tail`` grows by what the server would save.  A client that kept up is
    not held back (its ``client_tail`` is kept as it was).
    """
    end_ns = max(end_ns, start_ns)
    # Clip to the task as the split does, so both see the same intervals.
    clipped = (
        Interval._make(iv)._replace(start=max(iv[0], start_ns), end=min(iv[1], end_ns))
        for iv in intervals
    )
    ivs = sorted(
        (iv for iv in clipped if iv.end >= iv.start),
        key=lambda iv: (iv.start, iv.end, iv.phase, iv.call),
    )
    for iv in ivs:
        iv.component  # noqa: B018 - raises UnknownComponentError early, with a clear message
    clipped_ivs = ivs
    ivs, durations = _fold_nested_tools(ivs, scenario)
    if scenario.persistent_connection:
        # The task's first connection is still opened once.
        first = first_setup_call(ivs)
        if first is not None:
            kept = replace(scenario, persistent_connection=False)
            for iv in ivs:
                if iv.call == first and iv.phase in CONNECTION_SETUP_PHASES:
                    durations[id(iv)] = kept.duration(iv)
    llm_calls, client_bound, floors = _client_pace(ivs, scenario, durations)
    generation_starts = {og: 0.0 for og, _, _ in floors.values()}
    schedule: list[tuple[Interval, int, int]] = []
    # Finished intervals waiting to become predecessors, keyed by recorded end.  Projected
    # times are floats relative to the task start: epoch nanoseconds exceed a double's
    # 53-bit mantissa.
    pending: list[tuple[int, int, float]] = []
    last_end = start_ns  # latest recorded end among predecessors so far (or the task start)
    last_new_end = 0.0  # latest projected end among them, relative to the task start
    for i, iv in enumerate(ivs):
        while pending and pending[0][0] <= iv.start:
            rec_end, _, new_end = heapq.heappop(pending)
            last_end = max(last_end, rec_end)
            last_new_end = max(last_new_end, new_end)
        gap = max(iv.start - last_end, 0)
        new_start = last_new_end + gap
        duration = durations.get(id(iv))
        new_end = new_start + (scenario.duration(iv) if duration is None else duration)
        if id(iv) in generation_starts:
            generation_starts[id(iv)] = new_start
        floor = floors.get(id(iv))
        if floor is not None:
            # A client behind the wire: done after its own pace allows, then its final work.
            og, handed_over, final = floor
            new_end = max(generation_starts[og] + handed_over, new_start) + final
        schedule.append((iv, start_ns + round(new_start), start_ns + round(new_end)))
        heapq.heappush(pending, (iv.end, i, new_end))
    for rec_end, _, new_end in pending:
        last_end = max(last_end, rec_end)
        last_new_end = max(last_new_end, new_end)
    projected_end = last_new_end + max(end_ns - last_end, 0)
    client_kept = 0.0
    if client_bound:
        unpaced = project(clipped_ivs, start_ns, end_ns, replace(scenario, client_pace=False))
        client_kept = max(projected_end * 1e-9 - unpaced.projected_wall, 0.0)
    return Projection(
        recorded_wall=(end_ns - start_ns) * 1e-9,
        projected_wall=max(projected_end, 0.0) * 1e-9,
        schedule=schedule,
        llm_calls=llm_calls,
        client_bound=client_bound,
        client_kept=client_kept,
    )


def _client_pace(ivs: list[Interval], scenario: Scenario, durations: dict[int, float],
                 ) -> tuple[int, int, dict[int, tuple[int, float, float]]]:
    """The clients that were behind the wire (see :func:`project`).  Returns the LLM calls
    with output generation, those whose client's pace holds them back, and for each such
    call's ``client_tail`` (by id): its output generation's id, when the client hands the
    last token over (ns after that interval's projected start), and its work after it had
    both the last token and the last byte (ns)."""
    ends: dict[tuple[int, int, str], Interval] = {}
    calls = 0
    for iv in ivs:
        if iv.phase == "output_generation":
            calls += 1
            ends[(iv.call, iv.end, iv.phase)] = iv
        elif iv.phase == "tail":
            ends[(iv.call, iv.end, iv.phase)] = iv
    bound = 0
    floors: dict[int, tuple[int, float, float]] = {}
    if not scenario.client_pace:
        return calls, bound, floors
    for ct in ivs:
        lag = ct.lag if ct.phase == "client_tail" else 0
        if lag <= 0:
            continue
        # The call's phases tile its span: its tail ends where its client tail starts, its
        # output generation where the tail (or, without one, the client tail) starts.
        tail = ends.get((ct.call, ct.start, "tail"))
        og = ends.get((ct.call, tail.start if tail is not None else ct.start,
                       "output_generation"))
        if og is None:
            continue
        generation = og.duration
        if lag < max(CLIENT_BEHIND_NS, CLIENT_BEHIND_SHARE * generation):
            continue  # it kept up: nothing of its pace limits a faster server
        wire_tail = tail.duration if tail is not None else 0
        new_generation = durations.get(id(og), scenario.duration(og))
        # Recorded, from the first token's arrival: the last token handed over at
        # ``generation + lag``, the last byte at ``generation + wire_tail``; the client's
        # work after it had both is ``final``.  Projected, it hands the last token over no
        # earlier than it did, nor before the server sends it.
        final = max(ct.duration - max(lag - wire_tail, 0), 0)
        floors[id(ct)] = (id(og), max(new_generation, generation + lag), final)
        if generation + lag > new_generation:
            bound += 1
    return calls, bound, floors


def first_setup_call(intervals: Iterable[Interval | tuple[Any, ...]]) -> int | None:
    """The ``call`` of the task's first connection setup (DNS, connect, TLS, upgrade)."""
    first: tuple[int, int] | None = None
    for iv in intervals:
        if (iv[2] in CONNECTION_SETUP_PHASES and iv[1] > iv[0]
                and (first is None or iv[0] < first[0])):
            first = (iv[0], iv[3])
    return first[1] if first is not None else None


def connection_setup_saving(intervals: Iterable[Interval | tuple[Any, ...]]) -> float:
    """Seconds of connection setup after the task's first connection: what a persistent
    (or reused) connection would have saved, busy time, before overlap."""
    ivs = list(intervals)
    first = first_setup_call(ivs)
    return sum(iv[1] - iv[0] for iv in ivs
               if iv[2] in CONNECTION_SETUP_PHASES and iv[3] != first
               and iv[1] > iv[0]) * 1e-9


def _fold_nested_tools(
    ivs: list[Interval], scenario: Scenario,
) -> tuple[list[Interval], dict[int, float]]:
    """Tools run by a tool (``call`` = the outermost tool's id) ride inside it.

    The outer tool's projected duration is its own time (outside its nested tools) at its
    factor, plus each nested tool at the nested tool's own factor (or the outer one's when
    the scenario names none); the nested intervals then leave the schedule.  So
    ``tool_speedup={"pytest": 2}`` shortens the ``run_shell`` call that ran pytest.
    """
    groups: dict[int, list[Interval]] = {}
    for iv in ivs:
        if iv.phase == "tool" and iv.call:  # call 0: not known, never grouped
            groups.setdefault(iv.call, []).append(iv)
    durations: dict[int, float] = {}
    nested: set[int] = set()
    for members in groups.values():
        if len(members) < 2:
            continue
        outer = min(members, key=lambda iv: (iv.start, -iv.end))
        k_outer = scenario.tool_factor(outer.name) or 1.0
        saved = 0.0
        slowest = min(1.0, k_outer)
        for child in members:
            if child is outer:
                continue
            nested.add(id(child))
            k_child = scenario.tool_factor(child.name) or k_outer
            slowest = min(slowest, k_child)
            saved += child.duration / k_outer - child.duration / k_child
        # Overlapping nested tools could make the sum exceed the outer tool: never project
        # it longer than all of it at the slowest factor involved.
        durations[id(outer)] = min(max(scenario.duration(outer) - saved, 0.0),
                                   outer.duration / slowest)
    if not nested:
        return ivs, durations
    return [iv for iv in ivs if id(iv) not in nested], durations


__all__ = ["PRESETS", "Change", "Projection", "Scenario", "UnknownComponentError",
           "connection_setup_saving", "first_setup_call", "preset", "project"]
