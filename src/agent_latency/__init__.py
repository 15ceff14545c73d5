"""agent-latency: see where a coding agent's time goes.

``agent_latency.instrument()`` once, then every ``task()`` gets a budget: its wall time split
into output generation, prefill, tool execution, network overhead and other, exactly.

Names that need OpenTelemetry load on first use, so ``import agent_latency.budget`` (the
pure engine, used offline) stays free of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .budget import Budget, Interval, Projection, Scenario

if TYPE_CHECKING:
    from ._scope import task, tool
    from .configure import instrument, is_instrumented, uninstrument
    from .processor import BudgetSpanProcessor

_LAZY = {
    "BudgetSpanProcessor": "agent_latency.processor",
    "instrument": "agent_latency.configure",
    "is_instrumented": "agent_latency.configure",
    "task": "agent_latency._scope",
    "tool": "agent_latency._scope",
    "uninstrument": "agent_latency.configure",
}


def __getattr__(name: str) -> Any:
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
