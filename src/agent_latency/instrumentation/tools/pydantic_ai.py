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

from ._frameworks import ToolInstrumentor


class PydanticAIInstrumentor(ToolInstrumentor):
    """``execute_tool`` spans for pydantic-ai function tools."""

    _instruments = ("pydantic-ai-slim >= 1.0",)
    SOURCE = "pydantic_ai"
    PATCHES = (("pydantic_ai.toolsets.function", "FunctionToolset.call_tool", "_atool"),)

    # call_tool(name, tool_args, ctx, tool)
    def tool_name(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        return str(args[0] if args else kwargs.get("name") or "function")

    def call_id(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        ctx = args[2] if len(args) > 2 else kwargs.get("ctx")
        return getattr(ctx, "tool_call_id", None)
