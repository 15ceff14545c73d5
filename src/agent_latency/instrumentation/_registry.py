"""Every integration of ours, once: its name, its instrumentor and the modules whose import
applies it.

Plain data, imported without the SDK: ``instrument()`` reads it to wait for each library's
import (openai and anthropic take seconds to import, a program that never imports one pays
nothing), and each instrumentor finds its own triggers here.  ``pyproject.toml`` registers
every entry as an ``opentelemetry_instrumentor`` entry point as well
(``agent_latency_<name>``), so ``opentelemetry-instrument`` and ``instrument(targets=…)``
see the same list (a test holds the two together).
"""

from __future__ import annotations

from typing import NamedTuple


class Integration(NamedTuple):
    """One integration: where its instrumentor is and what applies it."""

    #: ``"module:Class"`` of its instrumentor.
    instrumentor: str
    #: Modules whose import applies it (at once if one is imported already); none: at once.
    triggers: tuple[str, ...] = ()


_PACKAGE = "agent_latency.instrumentation"

INTEGRATIONS: dict[str, Integration] = {
    "httpx": Integration(f"{_PACKAGE}.httpx:HttpxInstrumentor", ("httpx", "httpx2")),
    "openai": Integration(f"{_PACKAGE}.llm.openai:OpenAIInstrumentor", ("openai",)),
    "anthropic": Integration(f"{_PACKAGE}.llm.anthropic:AnthropicInstrumentor", ("anthropic",)),
    "litellm": Integration(f"{_PACKAGE}.llm.litellm:LiteLLMInstrumentor", ("litellm",)),
    "google_genai": Integration(f"{_PACKAGE}.llm.google_genai:GoogleGenAIInstrumentor",
                                ("google.genai",)),
    "requests": Integration(f"{_PACKAGE}.llm.requests:RequestsInstrumentor",
                            ("requests", "urllib3")),
    # HTTP clients: the standard library's (urllib, urllib3, requests), the event loop's,
    # DSPy's own (not ``ssl``: asyncio imports it half-way through its own import).  A client
    # on bare sockets that imports none of them is not seen.
    "sockets": Integration(f"{_PACKAGE}.llm.sockets:SocketsInstrumentor",
                           ("http.client", "asyncio", "dspy")),
    # The first spawn applies it (tools._first_spawn): subprocess is imported by everything.
    "subprocess": Integration(f"{_PACKAGE}.tools.subprocess:SubprocessInstrumentor"),
    "mcp": Integration(f"{_PACKAGE}.tools.mcp:MCPInstrumentor", ("mcp",)),
    "openai_agents": Integration(f"{_PACKAGE}.tools.openai_agents:OpenAIAgentsInstrumentor",
                                 ("agents",)),
    "langchain": Integration(f"{_PACKAGE}.tools.langchain:LangChainInstrumentor",
                             ("langchain_core",)),
    "smolagents": Integration(f"{_PACKAGE}.tools.smolagents:SmolagentsInstrumentor",
                              ("smolagents",)),
    "minisweagent": Integration(f"{_PACKAGE}.tools.minisweagent:MiniSweAgentInstrumentor",
                                ("minisweagent",)),
    "gevent": Integration(f"{_PACKAGE}.tools.gevent:GeventInstrumentor", ("gevent",)),
    "pydantic_ai": Integration(f"{_PACKAGE}.tools.pydantic_ai:PydanticAIInstrumentor",
                               ("pydantic_ai",)),
    "dspy": Integration(f"{_PACKAGE}.tools.dspy:DSPyInstrumentor", ("dspy",)),
    "agno": Integration(f"{_PACKAGE}.tools.agno:AgnoInstrumentor", ("agno",)),
    "llama_index": Integration(f"{_PACKAGE}.tools.llama_index:LlamaIndexInstrumentor",
                               ("llama_index.core",)),
    "crewai": Integration(f"{_PACKAGE}.tools.crewai:CrewAIInstrumentor", ("crewai",)),
    "haystack": Integration(f"{_PACKAGE}.tools.haystack:HaystackInstrumentor", ("haystack",)),
}

#: The entry point's name of an integration in the ``opentelemetry_instrumentor`` group.
ENTRY_POINT_PREFIX = "agent_latency_"


def triggers_of(instrumentor: type) -> tuple[str, ...]:
    """The triggers of the integration whose instrumentor is ``instrumentor`` (none for a
    class that is not registered: a test's subclass, say)."""
    path = f"{instrumentor.__module__}:{instrumentor.__qualname__}"
    for integration in INTEGRATIONS.values():
        if integration.instrumentor == path:
            return integration.triggers
    return ()
