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

from collections.abc import Collection
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from opentelemetry.trace import Span

from ..._log import internal_error
from ..._scope import detach, mark_error, start_tool, tool_attributes
from .._imports import when_imported


def _start(instance: Any, kwargs: dict[str, Any]) -> Span:
    name = str(getattr(instance, "name", None) or type(instance).__name__)
    return start_tool(name, tool_attributes(name, source="langchain",
                                            call_id=kwargs.get("tool_call_id")))


def _fail(span: Span, exc: BaseException) -> None:
    mark_error(span, exc)
    span.end()


def _run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if not is_instrumentation_enabled():
        return wrapped(*args, **kwargs)
    try:
        span = _start(instance, kwargs)
    except Exception:  # noqa: BLE001
        internal_error("langchain.run")
        return wrapped(*args, **kwargs)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        detach(token)
    span.end()
    return result


async def _arun(wrapped: Any, instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    if not is_instrumentation_enabled():
        return await wrapped(*args, **kwargs)
    try:
        span = _start(instance, kwargs)
    except Exception:  # noqa: BLE001
        internal_error("langchain.arun")
        return await wrapped(*args, **kwargs)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        detach(token)
    span.end()
    return result


class LangChainInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """``execute_tool`` spans for LangChain / LangGraph tools."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("langchain-core >= 0.1",)

    def _instrument(self, **kwargs: Any) -> None:
        self._active = True
        self._cls: Any = None
        from ._threads import acquire

        acquire()
        when_imported("langchain_core", self._patch)

    def _patch(self, _module: Any = None) -> None:
        if not self._active or self._cls is not None:
            return
        import importlib

        from wrapt import wrap_function_wrapper

        cls = importlib.import_module("langchain_core.tools").BaseTool
        wrap_function_wrapper(cls, "run", _run)
        wrap_function_wrapper(cls, "arun", _arun)
        self._cls = cls

    def _uninstrument(self, **kwargs: Any) -> None:
        self._active = False
        if self._cls is not None:
            unwrap(self._cls, "run")
            unwrap(self._cls, "arun")
            self._cls = None
        from ._threads import release

        release()
