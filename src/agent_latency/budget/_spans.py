"""Budget intervals and counts from one span's attributes: shared by the live processor and
the offline report, so a stored trace gives the same budget as the process that made it.

Pure: it reads plain mappings of attribute names to values, no OpenTelemetry object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import semconv
from ._call import phases_to_intervals
from ._interval import COMPONENTS, PHASE_COMPONENT, Interval, UnknownComponentError
from ._split import Budget

_LLM_PHASES = tuple((attr, phase) for attr, phase, _ in semconv.LLM_PHASES)


def span_intervals(
    attributes: Mapping[str, Any], start_ns: int, end_ns: int, call: int = 0,
) -> tuple[list[Interval], str | None]:
    """The budget intervals one finished span contributes, and its kind.

    The kind is ``"llm"`` for an LLM call (phases from its ``agent_latency.llm.*``
    attributes laid end to end from the span start), ``"tool"`` for a tool span, another
    component name for a span marked with ``agent_latency.component``, or ``None`` when the
    span does not count.  Shared with the offline report, so a stored trace gives the same
    budget as the live processor.
    """
    if semconv.LLM_CLIENT in attributes:
        phases = [(phase, float(attributes.get(attr) or 0.0)) for attr, phase in _LLM_PHASES]
        intervals = phases_to_intervals(
            phases, start_ns, end_ns, call,
            input_tokens=int(attributes.get(semconv.GEN_AI_USAGE_INPUT_TOKENS, 0) or 0),
            output_tokens=int(attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, 0) or 0),
            name=str(attributes.get(semconv.GEN_AI_REQUEST_MODEL, "")),
        )
        return intervals, "llm"
    component = attributes.get(semconv.COMPONENT)
    if component is None:
        return [], None
    phase = "tool" if component == semconv.TOOL_EXECUTION else str(component)
    if phase not in PHASE_COMPONENT and phase not in COMPONENTS:
        raise UnknownComponentError(
            f"span attribute {semconv.COMPONENT}={component!r} is not a budget component; "
            f"expected one of {', '.join(COMPONENTS)}"
        )
    name = str(attributes.get(semconv.GEN_AI_TOOL_NAME, ""))
    return [Interval(start_ns, end_ns, phase, call, 0, name)], phase


def count_span(counts: dict[str, int], kind: str, attributes: Mapping[str, Any], *,
               nested_tool: bool = False) -> None:
    """Add one finished span to a task's counts (all or nothing: an attribute of the wrong
    type raises before any count changes).

    A tool inside another tool (a process run by a function tool) is not another tool call.
    """
    if kind == "tool":
        if not nested_tool:
            counts["tool_calls"] += 1
    elif kind == "llm":
        # Every value converted before any is added: a bad one changes no count.
        get = attributes.get
        input_tokens = int(get(semconv.GEN_AI_USAGE_INPUT_TOKENS, 0) or 0)
        output_tokens = int(get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, 0) or 0)
        round_trips = int(get(semconv.LLM_ATTEMPTS, 1) or 0)
        new_connection = get(semconv.LLM_CONNECTION_REUSED) is False
        tls = (get(semconv.LLM_TLS) or 0) > 0
        counts["llm_calls"] += 1
        counts["input_tokens"] += input_tokens
        counts["output_tokens"] += output_tokens
        counts["http_round_trips"] += round_trips
        if new_connection:
            counts["new_connections"] += 1
        if tls:
            counts["tls_handshakes"] += 1


def budget_attributes(budget: Budget) -> dict[str, Any]:
    """The ``agent_latency.budget.*`` and ``agent_latency.count.*`` attributes of a task."""
    attrs: dict[str, Any] = {semconv.BUDGET_WALL: budget.wall}
    for component in COMPONENTS:
        attrs[semconv.budget_share(component)] = budget.shares[component]
        attrs[semconv.budget_busy(component)] = budget.busy[component]
    for key, value in budget.counts.items():
        attrs[semconv.budget_count(key)] = value
    if (tps := budget.output_tokens_per_second) is not None:
        attrs[semconv.BUDGET_OUTPUT_TOKENS_PER_SECOND] = tps
    if (tps := budget.prefill_tokens_per_second) is not None:
        attrs[semconv.BUDGET_PREFILL_TOKENS_PER_SECOND] = tps
    return attrs
