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

from ._frameworks import ToolInstrumentor

_BASE = "crewai.tools.base_tool"
_STRUCTURED = "crewai.tools.structured_tool"


class CrewAIInstrumentor(ToolInstrumentor):
    """``execute_tool`` spans for CrewAI tools."""

    _instruments = ("crewai >= 1.0",)
    SOURCE = "crewai"
    PATCHES = ((_BASE, "BaseTool.run", "_tool"), (_BASE, "BaseTool.arun", "_atool"),
               (_BASE, "Tool.run", "_tool"), (_BASE, "Tool.arun", "_atool"),
               (_STRUCTURED, "CrewStructuredTool.invoke", "_tool"),
               (_STRUCTURED, "CrewStructuredTool.ainvoke", "_atool"))
