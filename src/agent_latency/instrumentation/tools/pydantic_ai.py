"""pydantic-ai: function tool runs as ``execute_tool {tool}`` spans.

``FunctionToolset.call_tool`` runs every function tool an agent has (``tools=[...]``,
``@agent.tool``, ``@agent.tool_plain``, a ``FunctionToolset`` of its own), whichever way the
agent runs (``run``, ``run_sync``, ``run_stream``, ``iter``): one span per run with the
tool's name, ``gen_ai.tool.type = function`` and the model's ``gen_ai.tool.call.id``.  The
tool's own timeout is inside the span; a tool that raises (``ModelRetry`` included) has
status ERROR.  MCP servers' tools are MCP client calls (the MCP instrumentation), output
tools are not tools.  With pydantic-ai's own instrumentation on, its ``execute_tool`` span
is around ours and counts; ours is nested in it.

Patched when the program imports ``pydantic_ai``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span

from ..._scope import start_tool, tool_attributes
from ._frameworks import FrameworkInstrumentor, acall_as_tool


def _start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Span:
    name = str(args[0] if args else kwargs.get("name") or "function")
    ctx = args[2] if len(args) > 2 else kwargs.get("ctx")
    return start_tool(name, tool_attributes(name, source="pydantic_ai",
                                            call_id=getattr(ctx, "tool_call_id", None)))


class PydanticAIInstrumentor(FrameworkInstrumentor):
    """``execute_tool`` spans for pydantic-ai function tools."""

    _instruments = ("pydantic-ai-slim >= 1.0",)
    TRIGGER = "pydantic_ai"
    PATCHES = (("pydantic_ai.toolsets.function", "FunctionToolset.call_tool", "_call_tool"),)

    @staticmethod
    async def _call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
        return await acall_as_tool(lambda: _start(args, kwargs), wrapped, args, kwargs,
                                   "pydantic_ai.tool")
