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
from ._frameworks import ToolInstrumentor


class AgnoInstrumentor(ToolInstrumentor):
    """``execute_tool`` spans for Agno tool calls."""

    _instruments = ("agno >= 2.0",)
    SOURCE = "agno"
    PATCHES = (("agno.tools.function", "FunctionCall.execute", "_tool"),
               ("agno.tools.function", "FunctionCall.aexecute", "_atool"))

    def tool_name(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        return str(getattr(getattr(instance, "function", None), "name", None) or "function")

    def call_id(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return getattr(instance, "call_id", None)

    def check(self, span: Span, result: Any) -> None:
        if getattr(result, "status", None) == "failure":
            span.set_attribute(semconv.ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool call failed"))
