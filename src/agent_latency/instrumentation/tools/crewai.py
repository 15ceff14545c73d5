"""CrewAI: tool runs as ``execute_tool {tool}`` spans.

CrewAI runs a tool one of two ways, and each is one span: native function calling calls
``BaseTool.run`` / ``arun`` (``Tool.run`` / ``arun`` for ``@tool`` functions, which replace
them), and the text protocol's ``ToolUsage`` calls ``CrewStructuredTool.invoke`` /
``ainvoke``.  The span has the tool's name and ``gen_ai.tool.type = function``; a tool that
raises has status ERROR.  CrewAI's own tool spans go to a tracer provider of its own, only
with its tracing on, and the budget does not read them.

Patched when the program imports ``crewai``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span

from ..._scope import start_tool, tool_attributes
from ._frameworks import FrameworkInstrumentor, acall_as_tool, call_as_tool


def _start(tool: Any) -> Span:
    name = str(getattr(tool, "name", None) or type(tool).__name__)
    return start_tool(name, tool_attributes(name, source="crewai"))


_BASE = "crewai.tools.base_tool"
_STRUCTURED = "crewai.tools.structured_tool"


class CrewAIInstrumentor(FrameworkInstrumentor):
    """``execute_tool`` spans for CrewAI tools."""

    _instruments = ("crewai >= 1.0",)
    TRIGGER = "crewai"
    PATCHES = ((_BASE, "BaseTool.run", "_run"), (_BASE, "BaseTool.arun", "_arun"),
               (_BASE, "Tool.run", "_run"), (_BASE, "Tool.arun", "_arun"),
               (_STRUCTURED, "CrewStructuredTool.invoke", "_run"),
               (_STRUCTURED, "CrewStructuredTool.ainvoke", "_arun"))

    @staticmethod
    def _run(wrapped: Any, instance: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
        return call_as_tool(lambda: _start(instance), wrapped, args, kwargs, "crewai.tool")

    @staticmethod
    async def _arun(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        return await acall_as_tool(lambda: _start(instance), wrapped, args, kwargs,
                                   "crewai.atool")
