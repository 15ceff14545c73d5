"""One LLM call's phases as span attributes, and back, and their tiling into child spans.

The phases are written once (:func:`phase_attributes`, by the LLM instrumentation), read
once (:func:`phases_of`, by whoever rebuilds a call's intervals: the processor, the local
exporter's summary, the report), and laid out in time once, by the engine's
``phases_to_intervals``: the ``network``, ``prefill`` and ``output_generation`` child spans
(:func:`phase_span_tiles`) are drawn from those very intervals (:func:`phase_span_tiles_of`:
the same tiles without the intervals, for a call's hot path).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import semconv
from ..budget import CallPhases, Interval

_LLM_PHASES = tuple((attr, phase) for attr, phase, _ in semconv.LLM_PHASES)

#: The child spans of a call and the phases each covers (the stream's tail stays on the call).
PHASE_SPANS: tuple[tuple[str, frozenset[str]], ...] = (
    (semconv.SPAN_NETWORK, frozenset({"dns", "connect", "tls", "upload", "rtt"})),
    (semconv.SPAN_PREFILL, frozenset({"prefill"})),
    (semconv.SPAN_OUTPUT_GENERATION, frozenset({"output_generation"})),
)


def phase_attributes(phases: CallPhases) -> dict[str, float]:
    """``agent_latency.llm.<phase>`` seconds for every phase, in the format's order."""
    return {attr: float(getattr(phases, phase)) for attr, phase in _LLM_PHASES}


def phases_of(attributes: Mapping[str, Any]) -> list[tuple[str, float]]:
    """``(phase, seconds)`` in time order from a call span's attributes (absent: 0)."""
    return [(phase, float(attributes.get(attr) or 0.0)) for attr, phase in _LLM_PHASES]


# phase -> the index in PHASE_SPANS of the child span that covers it
_CHILD_OF = {phase: index for index, (_, covered) in enumerate(PHASE_SPANS)
             for phase in covered}
_SPAN_NAMES = tuple(name for name, _ in PHASE_SPANS)


def phase_span_tiles_of(phases: Sequence[tuple[str, float]], start_ns: int,
                        end_ns: int) -> list[tuple[str, int, int]]:
    """``phase_span_tiles(phases_to_intervals(phases, start_ns, end_ns))``, laid out without
    building the intervals (a call's hot path: ~1.5 µs instead of ~6).  The same arithmetic
    as ``phases_to_intervals``: each phase laid end to end from ``start_ns`` in whole
    nanoseconds, none past ``end_ns``, the last one stretched to it."""
    # Per child span, in PHASE_SPANS' order: [start, end] once a phase of it has time.
    tiles: list[list[int] | None] = [None] * len(PHASE_SPANS)
    child_of = _CHILD_OF.get
    cursor = start_ns
    laid = False
    last_child: int | None = None  # the child of the last phase laid, and where it began
    last_start = start_ns
    for phase, seconds in phases:
        if seconds <= 0:
            continue
        end = cursor + round(seconds * 1e9)
        if end > end_ns:
            end = end_ns
        child = child_of(phase)
        laid, last_child, last_start = True, child, cursor
        if child is not None and end > cursor:
            tile = tiles[child]
            if tile is None:
                tiles[child] = [cursor, end]
            else:
                tile[1] = end
        cursor = end
    if laid and cursor < end_ns and last_child is not None:
        tile = tiles[last_child]
        if tile is None:  # (empty as laid: the stretch gives it time)
            tiles[last_child] = [last_start, end_ns]
        else:
            tile[1] = end_ns
    out = []
    for name, tile in zip(_SPAN_NAMES, tiles, strict=True):
        if tile is not None:
            out.append((name, tile[0], tile[1]))
    return out


def phase_span_tiles(intervals: Sequence[Interval]) -> list[tuple[str, int, int]]:
    """``(span name, start_ns, end_ns)`` of each child span with time in it: the call's
    intervals (laid out by ``phases_to_intervals``) grouped as :data:`PHASE_SPANS` says."""
    tiles = []
    for name, covered in PHASE_SPANS:
        mine = [i for i in intervals if i.phase in covered and i.end > i.start]
        if mine:
            tiles.append((name, mine[0].start, mine[-1].end))
    return tiles
