"""The interval model: a piece of a task's time that one budget component was busy."""

from __future__ import annotations

from typing import NamedTuple

OUTPUT_GENERATION = "output_generation"
PREFILL = "prefill"
TOOL_EXECUTION = "tool_execution"
NETWORK_OVERHEAD = "network_overhead"
OTHER = "other"

#: The five budget components, in report order.  ``other`` is also what every instant of a
#: task with nothing active counts as: the agent's own work and waits.
COMPONENTS = (OUTPUT_GENERATION, PREFILL, TOOL_EXECUTION, NETWORK_OVERHEAD, OTHER)

#: A task's counts, in report order.  ``tool_calls`` counts outermost tools only (a tool run
#: by a tool is tool time, not another call); ``subtasks`` the tasks nested in it at any depth.
#: Per task: round trips of any transport, WebSocket messages and bytes each way.
NETWORK_COUNTS = ("round_trips", "ws_messages_sent", "ws_messages_received", "bytes_sent",
                  "bytes_received")
#: ``not_split_calls``: non-streamed LLM calls whose server time nothing could split into
#: prefill and output generation (no learned rates, no server timing): all of it is booked
#: as prefill.  ``estimated_calls``: non-streamed calls split with rates learned from streams.
#: ``split_bound_us``: microseconds, the sum of the streamed calls' first-token bounds: how
#: far the split point between prefill and output generation may be off (a first token that
#: arrived while a pause held the client is dated by estimate).
SPLIT_COUNTS = ("not_split_calls", "estimated_calls", "split_bound_us")
COUNT_NAMES = ("llm_calls", "tool_calls", "http_round_trips", "new_connections",
               "tls_handshakes", "input_tokens", "output_tokens", "subtasks", *NETWORK_COUNTS,
               *SPLIT_COUNTS)

#: The phase of an interval (what it was) and the component it counts as.
PHASE_COMPONENT = {
    "retry": OTHER,
    "client": OTHER,
    "dns": NETWORK_OVERHEAD,
    "connect": NETWORK_OVERHEAD,
    "tls": NETWORK_OVERHEAD,
    "upload": NETWORK_OVERHEAD,
    "rtt": NETWORK_OVERHEAD,
    "prefill": PREFILL,
    "output_generation": OUTPUT_GENERATION,
    "tail": NETWORK_OVERHEAD,
    # A persistent connection's WebSocket upgrade (its own setup span, once per connection).
    "upgrade": NETWORK_OVERHEAD,
    # The client's own work after the response's last byte (an SDK parsing a final event).
    "client_tail": OTHER,
    "tool": TOOL_EXECUTION,
    "network": NETWORK_OVERHEAD,
    "other": OTHER,
}

#: The parts of ``other`` (the client's own time), in priority order: an instant of
#: ``other`` that two parts claim goes to the earlier one.  ``gc``: garbage-collection
#: pauses; ``imports``: interpreter start-up and module imports; ``lag``: the program behind
#: the wire (a response's bytes all arrived, the program still reading them); ``cpu``: the
#: agent's own CPU time; ``idle``: the rest (waiting on nothing the budget sees).
GC = "gc"
IMPORTS = "imports"
LAG = "lag"
CPU = "cpu"
IDLE = "idle"
OTHER_PARTS = (GC, IMPORTS, LAG, CPU, IDLE)

#: Phases that mark a stretch of the client's own time without making any component
#: active: a ``gc`` pause or an ``imports`` stretch during an LLM call's prefill is not on
#: the task's path and takes nothing from the call; only where the task's time is ``other``
#: does it name that time's part.  They go to the split alone, never into a what-if.
OVERLAY_PHASES = frozenset({GC, IMPORTS})

#: Phases of ``other`` that are a part of ``other`` by themselves.
PHASE_PART = {"client_tail": LAG}

#: Phases that a persistent connection would remove (after the first connection).
CONNECTION_SETUP_PHASES = frozenset({"dns", "connect", "tls", "upgrade"})


class UnknownComponentError(ValueError):
    """A component or phase name that the budget model does not know."""


def component_of(phase: str) -> str:
    """The budget component a phase counts as; a component name maps to itself."""
    try:
        return PHASE_COMPONENT[phase]
    except KeyError:
        if phase in COMPONENTS:
            return phase
        raise UnknownComponentError(
            f"unknown budget phase or component {phase!r}; expected one of "
            f"{', '.join(sorted(set(PHASE_COMPONENT) | set(COMPONENTS)))}"
        ) from None


class Interval(NamedTuple):
    """One busy stretch of a task, in integer nanoseconds of one monotonic-ish clock.

    ``phase`` says what it was (``prefill``, ``tool``, ``dns`` …, see ``PHASE_COMPONENT``);
    ``call`` groups the phases of one LLM call or tool run, so a what-if can find the call's
    token count (``tokens``: output tokens for ``output_generation``, input tokens for
    ``prefill``) and ``name`` (model or tool name).  On a ``client_tail``, ``tokens`` holds
    the :attr:`lag` instead (it has no tokens of its own).
    """

    start: int
    end: int
    phase: str
    call: int = 0
    tokens: int = 0
    name: str = ""

    @property
    def component(self) -> str:
        """The budget component this interval counts as."""
        return component_of(self.phase)

    @property
    def lag(self) -> int:
        """A ``client_tail``'s: how far behind the wire the program was at the call's last
        output token (ns); a client that could not keep up with the stream keeps its pace
        in a what-if.  0 for any other phase."""
        return self.tokens if self.phase == "client_tail" else 0

    @property
    def duration(self) -> int:
        """Length in nanoseconds (0 for a backwards interval)."""
        return max(0, self.end - self.start)
