"""LlamaIndex: function tool runs as ``execute_tool {tool}`` spans.

``FunctionTool.call`` / ``acall`` run every function tool (``FunctionTool.from_defaults``,
plain functions handed to ``FunctionAgent``, ``ReActAgent``, ``CodeActAgent`` or an
``AgentWorkflow``, ``llm.predict_and_call``): one span per run with the tool's name and
``gen_ai.tool.type = function``.  A tool that raises has status ERROR (the agent turns the
error into a tool message and goes on).  Other tool classes (``QueryEngineTool``, …) run
LLM calls and retrieval of their own, which the LLM instrumentation sees.  LlamaIndex's
own instrumentation (its dispatcher) makes no OpenTelemetry spans unless a handler is added.

Patched when the program imports ``llama_index.core``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span

from ..._scope import start_tool, tool_attributes
from ._frameworks import FrameworkInstrumentor, acall_as_tool, call_as_tool


def _start(tool: Any) -> Span:
    metadata = getattr(tool, "metadata", None)
    name = str(getattr(metadata, "name", None) or type(tool).__name__)
    return start_tool(name, tool_attributes(name, source="llama_index"))


class LlamaIndexInstrumentor(FrameworkInstrumentor):
    """``execute_tool`` spans for LlamaIndex function tools."""

    _instruments = ("llama-index-core >= 0.12",)
    TRIGGER = "llama_index.core"
    PATCHES = (("llama_index.core.tools.function_tool", "FunctionTool.call", "_call"),
               ("llama_index.core.tools.function_tool", "FunctionTool.acall", "_acall"))

    @staticmethod
    def _call(wrapped: Any, instance: Any, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        return call_as_tool(lambda: _start(instance), wrapped, args, kwargs,
                            "llama_index.tool")

    @staticmethod
    async def _acall(wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
        return await acall_as_tool(lambda: _start(instance), wrapped, args, kwargs,
                                   "llama_index.atool")
