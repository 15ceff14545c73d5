"""agent-latency: see where a coding agent's time goes.

``agent_latency.instrument()`` once, then every ``task()`` gets a budget: its wall time split
into output generation, prefill, tool execution, network overhead and other, exactly.
"""

from ._scope import task, tool
from ._version import __version__
from .budget import Budget, Interval, Projection, Scenario
from .configure import instrument, is_instrumented, uninstrument
from .processor import BudgetSpanProcessor

__all__ = [
    "Budget",
    "BudgetSpanProcessor",
    "Interval",
    "Projection",
    "Scenario",
    "__version__",
    "instrument",
    "is_instrumented",
    "task",
    "tool",
    "uninstrument",
]
