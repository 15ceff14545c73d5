"""Haystack: tool runs as ``execute_tool {tool}`` spans.

``Tool.invoke`` runs every tool a Haystack ``Agent`` or ``ToolInvoker`` calls (``Tool``,
``@tool`` functions, ``ComponentTool``): one span per run with the tool's name and
``gen_ai.tool.type = function``; ``Tool.invoke_async`` is the span for a tool with an
``async_function`` (for the others it runs ``invoke`` in a worker thread, which is the span).
A tool that raises has status ERROR (Haystack wraps the error in ``ToolInvocationError``).
Haystack's own tracer makes ``haystack.component.run`` spans with no GenAI tool attributes:
the budget does not read them as tools.

Patched when the program imports ``haystack``.
"""

from __future__ import annotations

from typing import Any

from ._frameworks import ToolInstrumentor


class HaystackInstrumentor(ToolInstrumentor):
    """``execute_tool`` spans for Haystack tools."""

    _instruments = ("haystack-ai >= 2.12",)
    SOURCE = "haystack"
    PATCHES = (("haystack.tools.tool", "Tool.invoke", "_tool"),
               ("haystack.tools.tool", "Tool.invoke_async", "_invoke_async"))

    async def _invoke_async(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                            kwargs: dict[str, Any]) -> Any:
        if getattr(instance, "async_function", None) is None:
            return await wrapped(*args, **kwargs)  # runs invoke in a thread: its span
        return await self._atool(wrapped, instance, args, kwargs)
