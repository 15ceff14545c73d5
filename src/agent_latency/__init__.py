"""agent-latency: see where a coding agent's time goes.

``agent_latency.instrument()`` once, then every ``task()`` gets a budget: its wall time split
into output generation, prefill, tool execution, network overhead and other, exactly.

Every name loads on first use: ``import agent_latency.budget`` (the pure engine, used
offline) stays free of OpenTelemetry, and ``agent-latency run``'s launcher imports nothing
it does not need.
"""

from __future__ import annotations

import importlib

from ._version import __version__

# Not ``typing.TYPE_CHECKING``: importing typing costs the launcher ~3 ms (type checkers
# treat any ``TYPE_CHECKING`` name alike).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from ._scope import task, tool
    from .budget import Budget, Interval, Projection, Scenario
    from .configure import instrument, is_instrumented, uninstrument
    from .processor import BudgetSpanProcessor

_LAZY = {
    "Budget": "agent_latency.budget",
    "BudgetSpanProcessor": "agent_latency.processor",
    "Interval": "agent_latency.budget",
    "Projection": "agent_latency.budget",
    "Scenario": "agent_latency.budget",
    "instrument": "agent_latency.configure",
    "is_instrumented": "agent_latency.configure",
    "task": "agent_latency._scope",
    "tool": "agent_latency._scope",
    "uninstrument": "agent_latency.configure",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_latency' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
