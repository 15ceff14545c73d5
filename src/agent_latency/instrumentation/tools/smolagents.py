"""smolagents: agent runs become tasks, tool calls ``execute_tool`` spans.

* ``MultiStepAgent.run`` (``CodeAgent``, ``ToolCallingAgent`` and any subclass that does not
  replace it) opens a task named after the agent (its ``name``, else its class).  With
  ``stream=True`` ``run`` returns a generator of steps: the task lasts until the generator
  is exhausted, fails or is closed, and is the current context only while a step is being
  computed.  A managed agent's run inside its manager's run opens no task of its own.
* ``Tool.__call__`` — every way an agent calls a tool (``ToolCallingAgent``'s tool calls, a
  ``CodeAgent``'s Python code calling tools through the local executor, ``final_answer``)
  — is an ``execute_tool {tool}`` span with ``gen_ai.tool.type = function``; shell commands
  the tool runs are process spans inside it.  Tools whose class replaces ``__call__``
  (``PipelineTool``) and tools run in a remote executor are not seen.

Patched when the program imports ``smolagents``.
"""

from __future__ import annotations

from typing import Any

from ..._scope import start_tool, tool_attributes
from ._frameworks import FrameworkInstrumentor, agent_name, call_as_task, call_as_tool


def _tool_span(tool: Any) -> Any:
    name = str(getattr(tool, "name", None) or type(tool).__name__)
    return start_tool(name, tool_attributes(name, source="smolagents"))


class SmolagentsInstrumentor(FrameworkInstrumentor):
    """Tasks for smolagents runs and ``execute_tool`` spans for its tools."""

    _instruments = ("smolagents >= 1.0",)
    PATCHES = (("smolagents.agents", "MultiStepAgent.run", "_run"),
               ("smolagents.tools", "Tool.__call__", "_call_tool"))

    @staticmethod
    def _run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return call_as_task(lambda: agent_name(instance), wrapped, args, kwargs)

    @staticmethod
    def _call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        return call_as_tool(lambda: _tool_span(instance), wrapped, args, kwargs,
                            "smolagents.tool")
