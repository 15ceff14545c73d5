"""DSPy: tool runs as ``execute_tool {tool}`` spans.

``dspy.Tool.__call__`` and ``Tool.acall`` run every tool a DSPy program calls: ``ReAct``'s
steps (its closing ``finish`` tool included), ``CodeAct``, native function calling through
``dspy.Tool``, MCP tools made with ``Tool.from_mcp_tool`` (their MCP call is nested in the
span).  One span per run with the tool's name and ``gen_ai.tool.type = function``; a tool
that raises has status ERROR (``ReAct`` turns the error into an observation and goes on).
A plain function handed to ``ToolCalls.ToolCall.execute`` is not a ``dspy.Tool`` and is not
seen.

Patched when the program imports ``dspy``.
"""

from __future__ import annotations

from ._frameworks import ToolInstrumentor

_TOOL = "dspy.adapters.types.tool"


class DSPyInstrumentor(ToolInstrumentor):
    """``execute_tool`` spans for DSPy tools."""

    _instruments = ("dspy >= 2.6",)
    SOURCE = "dspy"
    PATCHES = ((_TOOL, "Tool.__call__", "_tool"), (_TOOL, "Tool.acall", "_atool"))
