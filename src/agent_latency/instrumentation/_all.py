"""Every instrumentation of ours, and the one entry point that loads them all."""

from __future__ import annotations

import importlib
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .._log import logger

# target name -> "module:Class"; a target whose library is not installed is skipped.
INSTRUMENTORS: dict[str, str] = {
    "httpx": "agent_latency.instrumentation.httpx:HttpxInstrumentor",
    "openai": "agent_latency.instrumentation.openai:OpenAIInstrumentor",
    "anthropic": "agent_latency.instrumentation.anthropic:AnthropicInstrumentor",
    "subprocess": "agent_latency.instrumentation.subprocess:SubprocessInstrumentor",
    "mcp": "agent_latency.instrumentation.mcp:MCPInstrumentor",
    "openai_agents": "agent_latency.instrumentation.openai_agents:OpenAIAgentsInstrumentor",
    "langchain": "agent_latency.instrumentation.langchain:LangChainInstrumentor",
}


def instrument_all(targets: list[str] | None = None) -> list[BaseInstrumentor]:
    """Instrument every known target (or ``targets``) whose library is importable."""
    done: list[BaseInstrumentor] = []
    names = list(INSTRUMENTORS) if targets is None else targets
    for name in names:
        spec = INSTRUMENTORS.get(name)
        if spec is None:
            raise ValueError(f"unknown instrumentation target {name!r}; known: "
                             f"{', '.join(sorted(INSTRUMENTORS)) or 'none'}")
        module_name, _, class_name = spec.partition(":")
        try:
            instrumentor = getattr(importlib.import_module(module_name), class_name)()
        except ImportError as exc:
            logger.debug("agent-latency: %s not instrumented: %s", name, exc)
            continue
        if instrumentor.is_instrumented_by_opentelemetry:
            continue
        try:
            instrumentor.instrument()
        except Exception:  # noqa: BLE001 - one broken target must not stop the others
            logger.warning("agent-latency: instrumenting %s failed", name, exc_info=True)
            continue
        if instrumentor.is_instrumented_by_opentelemetry:
            done.append(instrumentor)
    return done


class AgentLatencyInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Loaded by ``opentelemetry-instrument``: adds budgets and every instrumentation."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        from ..configure import instrument

        instrument()

    def _uninstrument(self, **kwargs: Any) -> None:
        from ..configure import uninstrument

        uninstrument()
