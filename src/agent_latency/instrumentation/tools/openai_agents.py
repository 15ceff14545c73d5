"""OpenAI Agents SDK (``openai-agents``): runs become tasks, function tools ``execute_tool``.

* ``Runner.run`` / ``run_sync`` / ``run_streamed`` (through ``AgentRunner``, which all of
  them use) open a task named after the starting agent: an ``invoke_agent {agent}`` span
  with ``agent_latency.task.name``, so it gets a budget.  A run inside a run (``run_sync``
  drives ``run``; an agent used as a tool) does not open a second task.  A streamed run's
  task ends when its background run loop finishes, not when ``run_streamed`` returns.
* Function tools: every invocation (``agents.tool._invoke_function_tool_with_metadata`` /
  ``invoke_function_tool``, which wrap ``FunctionTool.on_invoke_tool`` with the SDK's
  timeout handling) is an ``execute_tool {tool}`` span with ``gen_ai.tool.type =
  function`` and the model's ``gen_ai.tool.call.id``.  Shell commands the tool runs are
  process spans inside it.

Patched when the program imports ``agents``; the SDK's own tracing is left alone.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import Span, Status, StatusCode

from ... import semconv
from ..._log import FAULTS, fault, internal_error
from ..._scope import end_task, start_tool, tool_attributes
from .._base import Instrumentor, Patch
from . import _threads
from ._frameworks import RunTask, acall_as_task, acall_as_tool, call_as_task, in_run


def _agent_name(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    agent = args[0] if args else kwargs.get("starting_agent")
    name = getattr(agent, "name", None)
    return str(name) if name else "agent"


def _tool_span(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Span:
    tool = kwargs.get("function_tool", args[0] if args else None)
    context = kwargs.get("context", args[1] if len(args) > 1 else None)
    name = str(getattr(tool, "name", None) or "function")
    return start_tool(name, tool_attributes(
        name, source="openai_agents", call_id=getattr(context, "tool_call_id", None)))


def _mark_sdk_error(span: Span, result: Any) -> None:
    """The SDK turns a failing tool into an error message for the model: still an error."""
    if getattr(result, "is_sdk_generated_error", False):
        span.set_attribute(semconv.ERROR_TYPE, "tool_error")
        span.set_status(Status(StatusCode.ERROR, "the tool failed"))


def rebind(module_prefix: str, owner: Any, name: str, replacement: Any, original: Any,
           done: list[tuple[Any, str]]) -> None:
    """Point every ``from x import name`` copy under ``module_prefix`` at ``replacement``."""
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or mod is owner or not mod_name.startswith(module_prefix):
            continue
        try:
            if mod.__dict__.get(name) is original:
                setattr(mod, name, replacement)
                done.append((mod, name))
        except Exception:  # noqa: BLE001, S112 - a module we cannot patch
            continue


def _restore(done: list[tuple[Any, str]], originals: dict[str, Any]) -> None:
    for mod, name in done:
        if name in originals:
            setattr(mod, name, originals[name])


class OpenAIAgentsInstrumentor(Instrumentor):
    """Tasks for Agents SDK runs and ``execute_tool`` spans for their function tools."""

    _instruments = ("openai-agents >= 0.0.3",)
    SHARED = (_threads.PATCH,)

    def patches(self) -> list[Patch]:
        run_mod = importlib.import_module("agents.run")
        runner_cls = getattr(run_mod, "AgentRunner", None)
        runner = "AgentRunner" if runner_cls is not None else "Runner"  # early SDKs: classmethods
        rows: list[Patch] = [("agents.run", f"{runner}.{method}", wrapper)
                             for method, wrapper in (("run", self._run),
                                                     ("run_sync", self._run_sync),
                                                     ("run_streamed", self._run_streamed))]
        tool_mod = importlib.import_module("agents.tool")
        # The first one found is the innermost; wrapping both would double the spans.
        for fname in ("_invoke_function_tool_with_metadata", "invoke_function_tool"):
            if getattr(tool_mod, fname, None) is not None:
                rows.append(("agents.tool", fname, self._tool))
                break
        return rows

    def applied(self) -> None:
        # Modules that imported the tool function by name call the unwrapped one: rebound.
        self._rebound: list[tuple[Any, str]] = []
        self._originals: dict[str, Any] = {}
        tool_mod = importlib.import_module("agents.tool")
        for owner, fname in self._wrapped:
            if owner is tool_mod:
                original = getattr(tool_mod, fname).__wrapped__
                self._originals[fname] = original
                rebind("agents", tool_mod, fname, getattr(tool_mod, fname), original,
                       self._rebound)

    def removed(self) -> None:
        _restore(self._rebound, self._originals)
        self._rebound = []

    # -- runs ------------------------------------------------------------------------------
    async def _run(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        return await acall_as_task(lambda: _agent_name(args, kwargs), wrapped, args, kwargs)

    def _run_sync(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
        return call_as_task(lambda: _agent_name(args, kwargs), wrapped, args, kwargs)

    def _run_streamed(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        if in_run() or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        # The background run loop copies this context.
        with RunTask(_agent_name(args, kwargs)) as run:
            result = wrapped(*args, **kwargs)
        span = run.span
        try:
            if FAULTS:
                fault("openai_agents.run_streamed")
            loop_task = getattr(result, "run_loop_task", None) or getattr(
                result, "_run_impl_task", None)
            if loop_task is None:
                end_task(span)
            else:
                def done(task: Any) -> None:
                    exc = None
                    if not task.cancelled():
                        exc = task.exception()
                    end_task(span, exc)

                loop_task.add_done_callback(done)
        except Exception:  # noqa: BLE001
            internal_error("openai_agents.run_streamed")
            end_task(span)
        return result

    # -- function tools ------------------------------------------------------------------------
    async def _tool(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        return await acall_as_tool(lambda: _tool_span(args, kwargs), wrapped, args, kwargs,
                                   "openai_agents.tool", check=_mark_sdk_error)
