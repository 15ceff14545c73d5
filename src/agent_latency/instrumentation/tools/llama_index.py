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

from ._frameworks import ToolInstrumentor

_FUNCTION_TOOL = "llama_index.core.tools.function_tool"


class LlamaIndexInstrumentor(ToolInstrumentor):
    """``execute_tool`` spans for LlamaIndex function tools."""

    _instruments = ("llama-index-core >= 0.12",)
    SOURCE = "llama_index"
    PATCHES = ((_FUNCTION_TOOL, "FunctionTool.call", "_tool"),
               (_FUNCTION_TOOL, "FunctionTool.acall", "_atool"))

    def tool_name(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        name = getattr(getattr(instance, "metadata", None), "name", None)
        return str(name or type(instance).__name__)
