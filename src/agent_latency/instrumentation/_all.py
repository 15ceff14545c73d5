"""Every instrumentation of ours, and the one entry point that loads them all."""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from .._log import logger
from ._imports import when_imported

if TYPE_CHECKING:  # importing it costs ~40 ms of start-up: only where a target is applied
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

# target name -> "module:Class"; a target whose library is not installed is skipped.
INSTRUMENTORS: dict[str, str] = {
    "httpx": "agent_latency.instrumentation.httpx:HttpxInstrumentor",
    "openai": "agent_latency.instrumentation.llm.openai:OpenAIInstrumentor",
    "anthropic": "agent_latency.instrumentation.llm.anthropic:AnthropicInstrumentor",
    "litellm": "agent_latency.instrumentation.llm.litellm:LiteLLMInstrumentor",
    "google_genai": "agent_latency.instrumentation.llm.google_genai:GoogleGenAIInstrumentor",
    "requests": "agent_latency.instrumentation.llm.requests:RequestsInstrumentor",
    "sockets": "agent_latency.instrumentation.llm.sockets:SocketsInstrumentor",
    "subprocess": "agent_latency.instrumentation.tools.subprocess:SubprocessInstrumentor",
    "mcp": "agent_latency.instrumentation.tools.mcp:MCPInstrumentor",
    "openai_agents": "agent_latency.instrumentation.tools.openai_agents:OpenAIAgentsInstrumentor",
    "langchain": "agent_latency.instrumentation.tools.langchain:LangChainInstrumentor",
    "smolagents": "agent_latency.instrumentation.tools.smolagents:SmolagentsInstrumentor",
    "minisweagent": "agent_latency.instrumentation.tools.minisweagent:MiniSweAgentInstrumentor",
    "gevent": "agent_latency.instrumentation.tools.gevent:GeventInstrumentor",
    "pydantic_ai": "agent_latency.instrumentation.tools.pydantic_ai:PydanticAIInstrumentor",
    "dspy": "agent_latency.instrumentation.tools.dspy:DSPyInstrumentor",
    "agno": "agent_latency.instrumentation.tools.agno:AgnoInstrumentor",
    "llama_index": "agent_latency.instrumentation.tools.llama_index:LlamaIndexInstrumentor",
    "crewai": "agent_latency.instrumentation.tools.crewai:CrewAIInstrumentor",
    "haystack": "agent_latency.instrumentation.tools.haystack:HaystackInstrumentor",
}


# Modules whose import triggers a target: a library the program has not imported yet is
# patched when it is imported, so instrument() costs no import time (openai and anthropic
# take seconds to import).  Targets not listed are instrumented at once.
TRIGGERS: dict[str, tuple[str, ...]] = {
    "httpx": ("httpx", "httpx2"),
    "openai": ("openai",),
    "anthropic": ("anthropic",),
    "litellm": ("litellm",),
    "google_genai": ("google.genai",),
    "requests": ("requests", "urllib3"),
    # HTTP clients: the standard library's (urllib, urllib3, requests), the event loop's, DSPy's
    # own (not ``ssl``: asyncio imports it half-way through its own import).  A client on bare
    # sockets that imports none of them is not seen.
    "sockets": ("http.client", "asyncio", "dspy"),
    "mcp": ("mcp",),
    "openai_agents": ("agents",),
    "langchain": ("langchain_core",),
    "smolagents": ("smolagents",),
    "minisweagent": ("minisweagent",),
    "gevent": ("gevent",),
    "pydantic_ai": ("pydantic_ai",),
    "dspy": ("dspy",),
    "agno": ("agno",),
    "llama_index": ("llama_index.core",),
    "crewai": ("crewai",),
    "haystack": ("haystack",),
}

# Bumped by cancel_pending(): hooks registered before it do nothing when they fire.
_generation = 0


def instrument_all(targets: list[str] | None = None) -> list[BaseInstrumentor]:
    """Instrument every known target (or ``targets``) whose library is installed.

    Returns the list of instrumentors applied; targets waiting for their library's import
    are appended to it when they fire.
    """
    done: list[BaseInstrumentor] = []
    names = list(INSTRUMENTORS) if targets is None else targets
    for name in names:
        if name not in INSTRUMENTORS:
            raise ValueError(f"unknown instrumentation target {name!r}; known: "
                             f"{', '.join(sorted(INSTRUMENTORS))}")
    for name in names:
        triggers = TRIGGERS.get(name, ())
        if name == "subprocess":
            from .tools import _first_spawn

            _first_spawn.defer(lambda: _apply("subprocess", done))
        elif not triggers or any(t in sys.modules for t in triggers):
            _apply(name, done)
        else:  # a library not installed is never imported: its hook never fires
            _defer(name, triggers, done)
    return done


def cancel_pending() -> None:
    """Forget targets still waiting for their library's import."""
    global _generation
    _generation += 1
    from .tools import _first_spawn

    _first_spawn.cancel()


def _defer(name: str, triggers: tuple[str, ...], done: list[BaseInstrumentor]) -> None:
    generation = _generation
    fired = [False]

    def on_import(_module: object) -> None:
        if fired[0] or generation != _generation:
            return
        fired[0] = True
        _apply(name, done)

    for module in triggers:
        when_imported(module, on_import)


def _apply(name: str, done: list[BaseInstrumentor]) -> None:
    module_name, _, class_name = INSTRUMENTORS[name].partition(":")
    try:
        instrumentor = getattr(importlib.import_module(module_name), class_name)()
    except ImportError as exc:
        logger.debug("agent-latency: %s not instrumented: %s", name, exc)
        return
    if instrumentor.is_instrumented_by_opentelemetry:
        return
    try:
        instrumentor.instrument()
    except Exception:  # noqa: BLE001 - one broken target must not stop the others
        logger.warning("agent-latency: instrumenting %s failed", name, exc_info=True)
        return
    if instrumentor.is_instrumented_by_opentelemetry:
        done.append(instrumentor)
