"""One LLM call's phases as span attributes, and back, and their tiling into child spans.

The phases are written once (:func:`phase_attributes`, by the LLM instrumentation), read
once (:func:`phases_of`, by whoever rebuilds a call's intervals: the processor, the local
exporter's summary, the report), and laid out in time once, by the engine's
``phases_to_intervals``: the ``network``, ``prefill`` and ``output_generation`` child spans
(:func:`phase_span_tiles`) are drawn from those very intervals.
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


def phase_span_tiles(intervals: Sequence[Interval]) -> list[tuple[str, int, int]]:
    """``(span name, start_ns, end_ns)`` of each child span with time in it: the call's
    intervals (laid out by ``phases_to_intervals``) grouped as :data:`PHASE_SPANS` says."""
    tiles = []
    for name, covered in PHASE_SPANS:
        mine = [i for i in intervals if i.phase in covered and i.end > i.start]
        if mine:
            tiles.append((name, mine[0].start, mine[-1].end))
    return tiles
