"""LangChain / LangGraph tools: ``BaseTool.run`` / ``arun`` as ``execute_tool {tool}``.

Every way a tool is called ends in these two (``invoke`` / ``ainvoke``, LangGraph's
``ToolNode``, agents' executors), so each call is one span with the tool's name,
``gen_ai.tool.type = function`` and the model's ``gen_ai.tool.call.id`` when LangChain
passes one.  A tool that fails raises as before and its span has status ERROR; a tool
whose error LangChain turns into a message (``handle_tool_error``) returns normally.
LangGraph runs sync tools in a thread pool that copies the context, so the spans land in
the task that runs the graph.  Patched when the program imports ``langchain_core``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span

from ..._scope import start_tool, tool_attributes
from ._frameworks import FrameworkInstrumentor, acall_as_tool, call_as_tool


def _start(instance: Any, kwargs: dict[str, Any]) -> Span:
    name = str(getattr(instance, "name", None) or type(instance).__name__)
    return start_tool(name, tool_attributes(name, source="langchain",
                                            call_id=kwargs.get("tool_call_id")))


class LangChainInstrumentor(FrameworkInstrumentor):
    """``execute_tool`` spans for LangChain / LangGraph tools."""

    _instruments = ("langchain-core >= 0.1",)
    PATCHES = (("langchain_core.tools", "BaseTool.run", "_run"),
               ("langchain_core.tools", "BaseTool.arun", "_arun"))

    @staticmethod
    def _run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return call_as_tool(lambda: _start(instance, kwargs), wrapped, args, kwargs,
                            "langchain.run")

    @staticmethod
    async def _arun(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        return await acall_as_tool(lambda: _start(instance, kwargs), wrapped, args, kwargs,
                                   "langchain.arun")
