"""Budget intervals and counts from one span's attributes: shared by the live processor and
the offline report, so a stored trace gives the same budget as the process that made it.

Pure: it reads plain mappings of attribute names to values, no OpenTelemetry object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import semconv
from ..budget import (
    COMPONENTS,
    IMPORTS,
    OTHER_PARTS,
    PHASE_COMPONENT,
    Budget,
    Interval,
    UnknownComponentError,
    connection_setup_saving,
    phases_to_intervals,
)
from ._phases import phases_of

# A persistent connection's setup span: its phases in the order they happen.
_SETUP_PHASES = ((semconv.NET_CLIENT, "client"), (semconv.LLM_DNS, "dns"),
                 (semconv.LLM_CONNECT, "connect"),
                 (semconv.LLM_TLS, "tls"), (semconv.NET_UPGRADE, "upgrade"))

_COMPONENT = semconv.COMPONENT
_TOOL_EXECUTION = semconv.TOOL_EXECUTION
_OPERATION = semconv.GEN_AI_OPERATION_NAME
_EXECUTE_TOOL = semconv.OPERATION_EXECUTE_TOOL
_TOOL_NAME = semconv.GEN_AI_TOOL_NAME
_TOOL_SOURCE = semconv.TOOL_SOURCE
# google-adk's record of parallel tool calls: a span laid after them (not around them) that
# carries the tool conventions' attributes under this placeholder name; each call has its
# own execute_tool span.
_MERGED_TOOLS = "(merged tools)"


def is_tool(attributes: Mapping[str, Any]) -> bool:
    """Whether a span is a tool run: ours (``agent_latency.component = tool_execution``) or
    any instrumentation's that follows the GenAI conventions for a tool
    (``gen_ai.operation.name = execute_tool``: google-adk, AutoGen, Strands, pydantic-ai's own
    instrumentation …).

    Our own spans say how they count with ``agent_latency.component``; one of ours without
    it (an MCP call split into transport and server time by its children) counts through its
    children, never as a whole.
    """
    component = attributes.get(_COMPONENT)
    if component is not None:
        return component == _TOOL_EXECUTION
    return (attributes.get(_OPERATION) == _EXECUTE_TOOL and _TOOL_SOURCE not in attributes
            and attributes.get(_TOOL_NAME) != _MERGED_TOOLS)


def span_intervals(
    attributes: Mapping[str, Any], start_ns: int, end_ns: int, call: int = 0,
) -> tuple[list[Interval], str | None]:
    """The budget intervals one finished span contributes, and its kind.

    The kind is ``"llm"`` for an LLM call (phases from its ``agent_latency.llm.*``
    attributes laid end to end from the span start), ``"tool"`` for a tool span, another
    component name for a span marked with ``agent_latency.component``, or ``None`` when the
    span does not count.  A tool span of another instrumentation (:func:`is_tool`) is a tool.
    Shared with the offline report, so a stored trace gives the same budget as the live
    processor.
    """
    if semconv.LLM_CLIENT in attributes:
        intervals = phases_to_intervals(
            phases_of(attributes), start_ns, end_ns, call,
            input_tokens=int(attributes.get(semconv.GEN_AI_USAGE_INPUT_TOKENS, 0) or 0),
            output_tokens=int(attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS, 0) or 0),
            name=str(attributes.get(semconv.GEN_AI_REQUEST_MODEL, "")),
        )
        lag = attributes.get(semconv.LLM_LAST_TOKEN_LAG)
        if (isinstance(lag, (int, float)) and 0 < lag < 1e9 and intervals
                and intervals[-1].phase == "client_tail"):
            intervals[-1] = intervals[-1]._replace(tokens=round(lag * 1e9))  # its lag
        return intervals, "llm"
    component = attributes.get(semconv.COMPONENT)
    if component is None:
        if not is_tool(attributes):
            return [], None
        component = semconv.TOOL_EXECUTION
    if component == semconv.NETWORK_OVERHEAD and semconv.NET_UPGRADE in attributes:
        phases = [(phase, float(attributes.get(attr) or 0.0)) for attr, phase in _SETUP_PHASES]
        name = str(attributes.get(semconv.SERVER_ADDRESS, ""))
        return phases_to_intervals(phases, start_ns, end_ns, call, name=name), "connection"
    phase = "tool" if component == semconv.TOOL_EXECUTION else str(component)
    if phase not in PHASE_COMPONENT and phase not in COMPONENTS:
        raise UnknownComponentError(
            f"span attribute {semconv.COMPONENT}={component!r} is not a budget component; "
            f"expected one of {', '.join(COMPONENTS)}"
        )
    name = str(attributes.get(semconv.GEN_AI_TOOL_NAME, ""))
    return [Interval(start_ns, end_ns, phase, call, 0, name)], phase


def split_source(attributes: Mapping[str, Any]) -> str:
    """Where an LLM call's prefill/output split came from: ``measured`` (a stream),
    ``server-reported``, ``estimated`` (learned rates) or ``not-split`` (a non-streamed call
    with nothing to split its server time by: all of it is in prefill).

    A call recorded before ``not-split`` existed said ``estimated`` with no output
    generation: read as not split, which it was."""
    source = attributes.get(semconv.LLM_TIMING_SOURCE)
    if source == semconv.SOURCE_ESTIMATED:
        generation = attributes.get(semconv.LLM_OUTPUT_GENERATION)
        if (attributes.get(semconv.LLM_STREAMING) is not True
                and not (isinstance(generation, (int, float)) and generation > 0)):
            return semconv.SOURCE_NOT_SPLIT
    if isinstance(source, str) and source:
        return source
    return semconv.SOURCE_MEASURED


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
        attempts = int(get(semconv.LLM_ATTEMPTS, 1) or 0)
        bytes_sent = int(get(semconv.LLM_BYTES_SENT, 0) or 0)
        bytes_received = int(get(semconv.LLM_BYTES_RECEIVED, 0) or 0)
        websocket = get(semconv.LLM_TRANSPORT) == semconv.TRANSPORT_WEBSOCKET
        ws_sent = int(get(semconv.LLM_WS_MESSAGES_SENT, 0) or 0) if websocket else 0
        ws_received = int(get(semconv.LLM_WS_MESSAGES_RECEIVED, 0) or 0) if websocket else 0
        new_connection = get(semconv.LLM_CONNECTION_REUSED) is False
        tls = (get(semconv.LLM_TLS) or 0) > 0
        source = split_source(attributes)
        bound_us = round(max(float(get(semconv.LLM_FIRST_TOKEN_BOUND, 0) or 0), 0.0) * 1e6)
        counts["llm_calls"] += 1
        if source == semconv.SOURCE_NOT_SPLIT:
            _add(counts, "not_split_calls", 1)
        elif source == semconv.SOURCE_ESTIMATED:
            _add(counts, "estimated_calls", 1)
        if bound_us:
            _add(counts, "split_bound_us", bound_us)
        counts["input_tokens"] += input_tokens
        counts["output_tokens"] += output_tokens
        _add(counts, "round_trips", attempts)
        _add(counts, "bytes_sent", bytes_sent)
        _add(counts, "bytes_received", bytes_received)
        if websocket:
            # Its connection's setup span counts the connection and its TLS handshake.
            _add(counts, "ws_messages_sent", ws_sent)
            _add(counts, "ws_messages_received", ws_received)
            return
        counts["http_round_trips"] += attempts
        if new_connection:
            counts["new_connections"] += 1
        if tls:
            counts["tls_handshakes"] += 1
    elif kind == "connection":
        tls = (attributes.get(semconv.LLM_TLS) or 0) > 0
        counts["new_connections"] += 1
        if tls:
            counts["tls_handshakes"] += 1


def _add(counts: dict[str, int], key: str, value: int) -> None:
    counts[key] = counts.get(key, 0) + value


def connection_reuse_ratio(counts: Mapping[str, int]) -> float | None:
    """The share of a task's round trips that went over an already open connection."""
    trips = counts.get("round_trips", 0)
    if not trips:
        return None
    return max(0.0, min(1.0, 1.0 - counts.get("new_connections", 0) / trips))


def budget_attributes(budget: Budget, intervals: Iterable[Any] | None = None, *,
                      setup_saving: float | None = None) -> dict[str, Any]:
    """The ``agent_latency.budget.*`` and ``agent_latency.count.*`` attributes of a task;
    with its ``intervals`` (or the ``setup_saving`` already computed from them), also the
    setup time a persistent connection would have saved."""
    attrs: dict[str, Any] = {semconv.BUDGET_WALL: budget.wall}
    for component in COMPONENTS:
        attrs[semconv.budget_share(component)] = budget.shares[component]
        attrs[semconv.budget_busy(component)] = budget.busy[component]
    for key, value in budget.counts.items():
        attrs[semconv.budget_count(key)] = value
    attrs.update(other_part_attributes(budget))
    ratio = connection_reuse_ratio(budget.counts)
    if ratio is not None:
        attrs[semconv.BUDGET_CONNECTION_REUSE_RATIO] = ratio
    if setup_saving is None and intervals is not None:
        setup_saving = connection_setup_saving(intervals)
    if setup_saving is not None:
        attrs[semconv.BUDGET_CONNECTION_SETUP_SAVING] = setup_saving
    if (tps := budget.output_tokens_per_second) is not None:
        attrs[semconv.BUDGET_OUTPUT_TOKENS_PER_SECOND] = tps
    if (tps := budget.prefill_tokens_per_second) is not None:
        attrs[semconv.BUDGET_PREFILL_TOKENS_PER_SECOND] = tps
    return attrs


def startup_overlay(attributes: Mapping[str, Any], start_ns: int) -> list[Interval]:
    """A process task's start-up (``agent_latency.task.startup`` seconds from its start) as
    an ``imports`` overlay; none for other tasks."""
    seconds = attributes.get(semconv.TASK_STARTUP)
    if not isinstance(seconds, (int, float)) or not seconds > 0:
        return []
    return [Interval(start_ns, start_ns + round(min(float(seconds), 1e9) * 1e9), IMPORTS)]


def other_part_attributes(budget: Budget) -> dict[str, float]:
    """The ``agent_latency.budget.other.*`` attributes of a budget whose parts of ``other``
    were measured (none otherwise: an offline budget would write guesses as facts)."""
    if not budget.other_measured:
        return {}
    parts = budget.other_parts
    return {semconv.budget_other_part(part): parts[part] for part in OTHER_PARTS}


def adopt_other_parts(budget: Budget, attributes: Mapping[str, Any]) -> None:
    """A stored task's measured parts of ``other`` (its ``agent_latency.budget.other.*``
    attributes: what only the live process could measure) onto ``budget`` recomputed from
    its spans: each part at most what is left of ``other`` in priority order, ``idle`` the
    rest, so they still add up to ``other`` exactly.  Nothing changes without them."""
    claims: list[float] = []
    for part in OTHER_PARTS[:-1]:
        value = attributes.get(semconv.budget_other_part(part))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        claims.append(float(value))
    budget.other_claims = tuple(claims)
    budget.other_measured = True
