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
    """Loaded by ``opentelemetry-instrument``: adds budgets and every instrumentation."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        instrument(meter_provider=kwargs.get("meter_provider"))

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument()
