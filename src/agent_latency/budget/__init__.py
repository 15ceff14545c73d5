"""The pure budget engine: standard library only, no OpenTelemetry.

It turns one LLM call's marks into phases (:func:`call_phases`), a task's busy intervals
into the five-component split of its wall time and the parts of its ``other`` time
(:func:`split`), and a recorded task into a what-if projection (:func:`project`).  The
span processor runs it in-process; the offline report runs it on stored traces.
It imports nothing else of the package: reading spans into its intervals and tasks is
``agent_latency.codec``'s.  The component and count names (``COMPONENTS``, ``COUNT_NAMES``)
are the engine's; ``semconv`` re-exports them.
"""

from ._call import (
    ESTIMATED,
    MEASURED,
    NOT_SPLIT,
    PHASE_ORDER,
    SERVER_REPORTED,
    CallMarks,
    CallPhases,
    call_phases,
    phases_to_intervals,
    split_server_time,
)
from ._interval import (
    COMPONENTS,
    CONNECTION_SETUP_PHASES,
    COUNT_NAMES,
    IMPORTS,
    OTHER_PARTS,
    OVERLAY_PHASES,
    PHASE_COMPONENT,
    PHASE_PART,
    SPLIT_COUNTS,
    Interval,
    UnknownComponentError,
    component_of,
)
from ._split import SPLIT_BOUND_SHOWN, Budget, RunningSplit, other_parts, split
from ._whatif import Projection, Scenario, connection_setup_saving, project

__all__ = [
    "Budget",
    "COMPONENTS",
    "CONNECTION_SETUP_PHASES",
    "COUNT_NAMES",
    "CallMarks",
    "CallPhases",
    "ESTIMATED",
    "IMPORTS",
    "Interval",
    "MEASURED",
    "NOT_SPLIT",
    "OTHER_PARTS",
    "OVERLAY_PHASES",
    "PHASE_COMPONENT",
    "PHASE_ORDER",
    "PHASE_PART",
    "Projection",
    "RunningSplit",
    "SERVER_REPORTED",
    "SPLIT_BOUND_SHOWN",
    "SPLIT_COUNTS",
    "Scenario",
    "UnknownComponentError",
    "call_phases",
    "component_of",
    "connection_setup_saving",
    "other_parts",
    "phases_to_intervals",
    "project",
    "split",
    "split_server_time",
]
