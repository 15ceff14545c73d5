"""Agno: tool calls as ``execute_tool {tool}`` spans.

``FunctionCall.execute`` / ``aexecute`` run every tool call of an Agno agent or team (a
function in ``tools=[...]``, a ``Toolkit``'s methods, ``@tool`` functions): one span per call
with the tool's name, ``gen_ai.tool.type = function`` and the model's
``gen_ai.tool.call.id``.  A tool that raises, or whose call Agno reports as failed
(``status = "failure"``, e.g. arguments that do not validate), has status ERROR.  Agno's
own tracing (``tracing=True``) records to a provider of its own, which the budget does not
see.

Patched when the program imports ``agno``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from ... import semconv
from ..._scope import start_tool, tool_attributes
from ._frameworks import FrameworkInstrumentor, acall_as_tool, call_as_tool


def _start(call: Any) -> Span:
    function = getattr(call, "function", None)
    name = str(getattr(function, "name", None) or "function")
    return start_tool(name, tool_attributes(name, source="agno",
                                            call_id=getattr(call, "call_id", None)))


def _mark_failure(span: Span, result: Any) -> None:
    if getattr(result, "status", None) == "failure":
        span.set_attribute(semconv.ERROR_TYPE, "tool_error")
        span.set_status(Status(StatusCode.ERROR, "the tool call failed"))


class AgnoInstrumentor(FrameworkInstrumentor):
    """``execute_tool`` spans for Agno tool calls."""

    _instruments = ("agno >= 2.0",)
    TRIGGER = "agno"
    PATCHES = (("agno.tools.function", "FunctionCall.execute", "_execute"),
               ("agno.tools.function", "FunctionCall.aexecute", "_aexecute"))

    @staticmethod
    def _execute(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
        return call_as_tool(lambda: _start(instance), wrapped, args, kwargs, "agno.tool",
                            check=_mark_failure)

    @staticmethod
    async def _aexecute(wrapped: Any, instance: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
        return await acall_as_tool(lambda: _start(instance), wrapped, args, kwargs,
                                   "agno.atool", check=_mark_failure)
