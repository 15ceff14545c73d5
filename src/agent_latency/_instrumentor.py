"""The ``opentelemetry_instrumentor`` entry point: ``opentelemetry-instrument`` loads it.

It sits above both ``configure`` (which loads the instrumentations) and ``instrumentation``
(which never imports ``configure``), so neither imports the other.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from importlib.metadata import entry_points
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .configure import instrument, uninstrument
from .instrumentation._registry import ENTRY_POINT_PREFIX, INTEGRATIONS


class AgentLatencyInstrumentor(BaseInstrumentor):
    """Loaded by ``opentelemetry-instrument``: set-up (budgets, the local default); every
    integration comes as an entry point of its own (``agent_latency_<name>``)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        # Each integration is an entry point of its own, which opentelemetry-instrument loads
        # (or leaves out, by OTEL_PYTHON_DISABLED_INSTRUMENTATIONS): set-up loads only those
        # it will not see (an install whose metadata predates them), none of those left out.
        names = {point.name for point in entry_points(group="opentelemetry_instrumentor")}
        disabled = {name.strip() for name in
                    os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",")}
        targets = [name for name in INTEGRATIONS
                   if ENTRY_POINT_PREFIX + name not in names | disabled]
        instrument(meter_provider=kwargs.get("meter_provider"), targets=targets)

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument()
