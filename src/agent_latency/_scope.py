"""``task()`` and ``tool()``: spans that are context managers and decorators, sync and async."""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from . import _hooks, semconv
from ._env import env_flag
from ._log import FAULTS, Guard, fault, internal_error, warn_once
from ._version import __version__

F = TypeVar("F", bound=Callable[..., Any])

# The innermost open task's span, in the context while it is open: tool() can tell it runs
# inside one, and an LLM call which task holds it.
_TASK_KEY = otel_context.create_key("agent_latency.task")
# Task spans open right now, so that a task left open at exit still gets its budget.
_open_tasks: dict[int, tuple[str, Span]] = {}
if hasattr(os, "register_at_fork"):
    # A forked child starts with no task of its own: the parent's are the parent's to end.
    os.register_at_fork(after_in_child=_open_tasks.clear)


_tracer_cache: list[Any] = [None, None]


def detach(token: object) -> None:
    """Detach a context token; one from another context (a generator resumed elsewhere)
    only logs in OpenTelemetry and must never raise into the program."""
    try:
        otel_context.detach(token)  # type: ignore[arg-type]  # a Token kept as object by its callers
    except Exception:  # noqa: BLE001, S110 - OpenTelemetry already logs it
        pass


def capture_command() -> bool:
    """Whether ``AGENT_LATENCY_CAPTURE_COMMAND`` lets command lines and error messages of
    tools, processes and tasks onto spans (read per error: errors are rare)."""
    return env_flag(semconv.ENV_CAPTURE_COMMAND, False)


def error_description(exc: BaseException, capture: bool | None = None) -> str:
    """A span status description for ``exc``: its message only where capture is on.

    A message carries what the failing code held: ``CalledProcessError`` the whole command
    line (``--token=...``), an SDK error the request URL or prompt text. Off, the type only.
    """
    if capture is None:
        capture = capture_command()
    name = type(exc).__name__
    if not capture:
        return name
    try:
        return str(exc) or name
    except Exception:  # noqa: BLE001 - a broken __str__ must not break the host
        return name


def mark_error(span: Span, exc: BaseException, capture: bool | None = None) -> None:
    """Status ERROR and ``error.type`` for an exception that ended the span's work; the
    message only with command capture on (``capture`` None: the environment decides)."""
    span.set_attribute(semconv.ERROR_TYPE, type(exc).__qualname__)
    span.set_status(Status(StatusCode.ERROR, error_description(exc, capture)))


def record_error(span: Span, exc: BaseException, capture: bool | None = None) -> None:
    """:func:`mark_error` plus the ``exception`` event: with capture on, OpenTelemetry's own
    (type, message, stack trace); off, the type alone, since a stack trace holds the message
    and the source lines around the raise (a literal ``--token=...`` among them)."""
    if capture is None:
        capture = capture_command()
    mark_error(span, exc, capture)
    if capture:
        span.record_exception(exc)
    else:
        span.add_event("exception", {"exception.type": type(exc).__qualname__})


def tracer() -> trace.Tracer:
    """Our tracer from the global provider, cached until the global provider changes.

    ``get_tracer`` builds a new tracer on every call; while no provider is set the proxy's
    tracer is not cached, so spans reach the real provider once one is set.
    """
    provider = trace.get_tracer_provider()
    if _tracer_cache[0] is provider:
        return _tracer_cache[1]
    fresh = provider.get_tracer("agent_latency", __version__)
    if type(provider).__name__ != "ProxyTracerProvider":
        _tracer_cache[0], _tracer_cache[1] = provider, fresh
    return fresh


class _Scope:
    """One span around a block or each call of a function, sync or async.

    As a context manager it is one span; as a decorator each call gets a fresh scope, so a
    decorated function can run concurrently and recursively.
    """

    __slots__ = ("_attributes", "_kind", "_name", "_pid", "_span", "_token")

    def __init__(self, name: str, attributes: dict[str, Any], kind: SpanKind) -> None:
        self._name = name
        self._attributes = attributes
        self._kind = kind
        self._span: Span | None = None
        self._token: object | None = None
        self._pid = 0

    def _fresh(self) -> _Scope:
        fresh = object.__new__(type(self))
        fresh._name, fresh._attributes, fresh._kind = self._name, self._attributes, self._kind
        fresh._span = fresh._token = None
        fresh._pid = 0
        return fresh

    def _context(self, span: Span) -> otel_context.Context:
        return trace.set_span_in_context(span)

    def _span_name(self) -> str:
        raise NotImplementedError

    def _before_end(self, span: Span, end_ns: int) -> None:
        """Called just before the span ends: last chance to set attributes."""

    # -- context manager -------------------------------------------------------------
    def __enter__(self) -> Span:
        if self._span is not None:
            raise RuntimeError(f"{self._span_name()!r} is already open; a scope is entered once "
                               "(use it as a decorator or create a new one)")
        span = tracer().start_span(self._span_name(), kind=self._kind,
                                   attributes=self._attributes)
        self._span = span
        self._pid = os.getpid()
        self._token = otel_context.attach(self._context(span))
        return span

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        span, token = self._span, self._token
        if span is None:
            return
        self._span = self._token = None
        if self._pid != os.getpid():
            # A forked child leaving a block its parent opened (sys.exit in the child, say):
            # the span is the parent's, ended there once.
            detach(token)
            return
        try:
            if FAULTS:
                fault(f"{type(self).__name__}.__exit__")
            if exc is not None:
                record_error(span, exc)
            end_ns = time.time_ns()
            self._before_end(span, end_ns)
            span.end(end_time=end_ns)
        except Exception:  # noqa: BLE001 - the user's exception (if any) propagates unchanged
            internal_error(f"{type(self).__name__}.__exit__")
        finally:
            detach(token)

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- decorator ---------------------------------------------------------------------
    def __call__(self, func: F) -> F:
        if inspect.iscoroutinefunction(func):
            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self._fresh():
                    return await func(*args, **kwargs)
            return async_wrapper  # type: ignore[return-value]  # the wrapper keeps func's signature
        if inspect.isasyncgenfunction(func):
            @functools.wraps(func)
            async def agen_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self._fresh():
                    async for item in func(*args, **kwargs):
                        yield item
            return agen_wrapper  # type: ignore[return-value]  # the wrapper keeps func's signature
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self._fresh():
                    return (yield from func(*args, **kwargs))
            return gen_wrapper  # type: ignore[return-value]  # the wrapper keeps func's signature

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return func(*args, **kwargs)
        return wrapper  # type: ignore[return-value]  # the wrapper keeps func's signature


class task(_Scope):  # lower case: reads as a function at the call site, like contextlib's
    """A task: a root of work whose wall time gets a budget.

    ``with agent_latency.task("fix-tests"): ...``, ``async with``, or ``@task("fix-tests")``
    on a sync or async function.  The span is ``invoke_agent {name}``; just before it ends
    the budget processor sets ``agent_latency.budget.*`` on it.  A task inside another task
    gets its own budget and also counts inside the outer one.
    """

    __slots__ = ()

    def __init__(self, name: str, *, attributes: dict[str, Any] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"task name must be a non-empty string, got {name!r}")
        super().__init__(name, task_attributes(name, attributes), SpanKind.INTERNAL)

    def _context(self, span: Span) -> otel_context.Context:
        _open_tasks[id(span)] = (self._name, span)
        return otel_context.set_value(_TASK_KEY, span, trace.set_span_in_context(span))

    def _span_name(self) -> str:
        return f"{semconv.OPERATION_INVOKE_AGENT} {self._name}"

    def _before_end(self, span: Span, end_ns: int) -> None:
        _open_tasks.pop(id(span), None)
        _finish_budget(span, end_ns)


def tool_attributes(
    name: str, *, tool_type: str = semconv.TOOL_TYPE_FUNCTION, call_id: object = None,
    source: str | None = None, counted: bool = True, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The attributes of an ``execute_tool`` span: the GenAI conventions' and ours.

    ``counted=False`` leaves out ``agent_latency.component`` for a span that decides at its
    end how it counts (MCP splits transport from server time when the server says).
    """
    attrs: dict[str, Any] = {
        **(extra or {}),
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_EXECUTE_TOOL,
        semconv.GEN_AI_TOOL_NAME: name,
        semconv.GEN_AI_TOOL_TYPE: tool_type,
    }
    if counted:
        attrs[semconv.COMPONENT] = semconv.TOOL_EXECUTION
    if source is not None:
        attrs[semconv.TOOL_SOURCE] = source
    if call_id:
        attrs[semconv.GEN_AI_TOOL_CALL_ID] = str(call_id)
    return attrs


def start_tool(name: str, attributes: dict[str, Any], *, kind: SpanKind = SpanKind.INTERNAL,
               start_time: int | None = None) -> Span:
    """Start an ``execute_tool {name}`` span with :func:`tool_attributes`."""
    return tracer().start_span(f"{semconv.OPERATION_EXECUTE_TOOL} {name}", kind=kind,
                               attributes=attributes, start_time=start_time)


def task_attributes(name: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The attributes that make a span a task (``invoke_agent``, ``agent_latency.task.name``)."""
    return {
        **(extra or {}),
        semconv.GEN_AI_OPERATION_NAME: semconv.OPERATION_INVOKE_AGENT,
        semconv.GEN_AI_AGENT_NAME: name,
        semconv.TASK_NAME: name,
    }


def start_task(
    name: str, *, attributes: dict[str, Any] | None = None,
    context: otel_context.Context | None = None, start_time: int | None = None,
) -> tuple[Span, otel_context.Context]:
    """Start a task span outside a ``with`` block (an agent run that ends elsewhere, the
    whole process); returns it and the context to attach.  End it with :func:`end_task`."""
    span = tracer().start_span(f"{semconv.OPERATION_INVOKE_AGENT} {name}",
                               kind=SpanKind.INTERNAL, context=context,
                               attributes=task_attributes(name, attributes),
                               start_time=start_time)
    _open_tasks[id(span)] = (name, span)
    ctx = otel_context.set_value(_TASK_KEY, span, trace.set_span_in_context(span, context))
    return span, ctx


@Guard("end_task", default=False)
def end_task(span: Span, exc: BaseException | None = None) -> bool:
    """Status, budget and end for a task from :func:`start_task`; False when it had already
    ended (at exit, say).  Never raises."""
    if _open_tasks.pop(id(span), None) is None:
        return False
    if exc is not None:
        record_error(span, exc)
    end_ns = time.time_ns()
    _finish_budget(span, end_ns)
    span.end(end_time=end_ns)
    return True


def _finish_budget(span: Span, end_ns: int) -> None:
    if _hooks._later:
        _hooks.run_later()  # streams collected unfinished end before their task
    if _hooks._held:
        _hooks.end_held(span.get_span_context().span_id)
    for finisher in list(_hooks.finishers):
        finisher(span, end_ns)


class tool(_Scope):
    """A tool run inside a task: ``execute_tool {name}``, counted as tool execution.

    ``tool_type`` is the GenAI convention's ``gen_ai.tool.type`` (``function``,
    ``extension``, ``datastore``); ``call_id`` is the model's tool-call id when known.
    """

    __slots__ = ()

    def __init__(self, name: str, *, call_id: str | None = None, tool_type: str = "function",
                 attributes: dict[str, Any] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"tool name must be a non-empty string, got {name!r}")
        super().__init__(name, tool_attributes(name, tool_type=tool_type, call_id=call_id,
                                               extra=attributes), SpanKind.INTERNAL)

    def _span_name(self) -> str:
        return f"{semconv.OPERATION_EXECUTE_TOOL} {self._name}"

    def __enter__(self) -> Span:
        span = super().__enter__()
        if span.is_recording() and not in_task():
            warn_once("tool-outside-task", "agent-latency: tool %r ran outside any task; its "
                      "span is exported but counts in no budget (wrap the work in "
                      "agent_latency.task())", self._name)
        return span


def in_task() -> bool:
    """Whether a task is open in the current context (any ancestor task span)."""
    return otel_context.get_value(_TASK_KEY) is not None


def current_task_id() -> int:
    """The span id of the innermost task open in the current context; 0 outside any."""
    span = otel_context.get_value(_TASK_KEY)
    try:
        return span.get_span_context().span_id if span is not None else 0  # type: ignore[attr-defined]  # a Span by construction
    except Exception:  # noqa: BLE001 - a value someone else put there
        return 0


def end_open_tasks() -> int:
    """End every task still open (at exit), with its budget; returns how many."""
    ended = 0
    for name, span in list(_open_tasks.values()):
        warn_once(f"open-at-exit-{name}", "agent-latency: task %r was still open at exit; "
                  "ended it there so its budget and spans are kept", name)
        ended += end_task(span)
    return ended
