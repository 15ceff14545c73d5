"""The ``opentelemetry_instrumentor`` entry point: ``opentelemetry-instrument`` loads it.

It sits above both ``configure`` (which loads the instrumentations) and ``instrumentation``
(which never imports ``configure``), so neither imports the other.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .configure import instrument, uninstrument
from .instrumentation._registry import ENTRY_POINT_PREFIX, INTEGRATIONS


class AgentLatencyInstrumentor(BaseInstrumentor):
    """Loaded by ``opentelemetry-instrument``: adds budgets and every instrumentation."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        # The names opentelemetry-instrument was told to leave out hold for our own loader too.
        disabled = {name.strip() for name in
                    os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",")}
        targets = [name for name in INTEGRATIONS if ENTRY_POINT_PREFIX + name not in disabled]
        instrument(meter_provider=kwargs.get("meter_provider"), targets=targets)

    def _uninstrument(self, **kwargs: Any) -> None:
        uninstrument()
