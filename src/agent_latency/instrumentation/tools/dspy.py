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

from typing import Any

from opentelemetry.trace import Span

from ..._scope import start_tool, tool_attributes
from ._frameworks import FrameworkInstrumentor, acall_as_tool, call_as_tool


def _start(tool: Any) -> Span:
    name = str(getattr(tool, "name", None) or type(tool).__name__)
    return start_tool(name, tool_attributes(name, source="dspy"))


class DSPyInstrumentor(FrameworkInstrumentor):
    """``execute_tool`` spans for DSPy tools."""

    _instruments = ("dspy >= 2.6",)
    TRIGGER = "dspy"
    PATCHES = (("dspy.adapters.types.tool", "Tool.__call__", "_call"),
               ("dspy.adapters.types.tool", "Tool.acall", "_acall"))

    @staticmethod
    def _call(wrapped: Any, instance: Any, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        return call_as_tool(lambda: _start(instance), wrapped, args, kwargs, "dspy.tool")

    @staticmethod
    async def _acall(wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
        return await acall_as_tool(lambda: _start(instance), wrapped, args, kwargs,
                                   "dspy.acall")
