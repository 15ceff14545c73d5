"""The ``opentelemetry_instrumentor`` entry point: ``opentelemetry-instrument`` loads it.

It sits above both ``configure`` (which loads the instrumentations) and ``instrumentation``
(which never imports ``configure``), so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .configure import instrument, uninstrument


class AgentLatencyInstrumentor(BaseInstrumentor):
    """Loaded by ``opentelemetry-instrument``: set-up (budgets, the local default); every
    integration comes as an entry point of its own (``agent_latency_<name>``)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        # Set-up only: each integration is an entry point of its own, which
        # opentelemetry-instrument loads (or leaves out, by OTEL_PYTHON_DISABLED_INSTRUMENTATIONS).
        instrument(meter_provider=kwargs.get("meter_provider"), targets=[])

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument()
