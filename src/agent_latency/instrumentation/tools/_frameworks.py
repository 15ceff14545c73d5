"""What the agent-framework instrumentations share: a run as a task, a tool call as a span.

* :class:`RunTask` / :func:`call_as_task`: a framework's run (Agents SDK ``Runner.run``,
  smolagents ``MultiStepAgent.run``, mini-swe-agent ``DefaultAgent.run``) opens a task named
  after the agent.  A run inside a run — of any of these frameworks — opens no second task.
  A run that returns a generator (smolagents with ``stream=True``) is a task until the
  generator is done.
* :func:`call_as_tool` / :func:`acall_as_tool`: one ``execute_tool`` span around a tool
  call.
* :class:`FrameworkInstrumentor`: the instrumentation base with wrappers named in its table;
  :class:`ToolInstrumentor`, one whose methods run tools.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable, Generator
from typing import Any, ClassVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.trace import Span

from ..._log import FAULTS, fault, internal_error
from ..._scope import detach, end_task, mark_error, start_task, start_tool, tool_attributes
from .._base import Instrumentor, Patch
from . import _threads

# True while an agent framework's run task is open in this context.
_in_run: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "agent_latency_framework_run", default=False)


def in_run() -> bool:
    """Whether an agent framework's run is open in the current context."""
    return _in_run.get()


def agent_name(agent: Any) -> str:
    """The agent's ``name`` when it has one, else its class name."""
    name = getattr(agent, "name", None)
    return str(name) if name else type(agent).__name__


class RunTask:
    """The task span of one framework run, started at construction.

    Inside ``with`` it is the current context and marked as a run (so nested runs add
    nothing); ``with`` can be entered again, one block at a time (each step of a stream).
    An exception out of a block ends the task with it; a normal exit leaves the end to the
    caller (a streamed run ends when its loop does).
    """

    __slots__ = ("_ctx", "_flag", "_token", "span")

    def __init__(self, name: str) -> None:
        self.span, self._ctx = start_task(name)
        self._token: object = None
        self._flag: contextvars.Token[bool] | None = None

    def __enter__(self) -> RunTask:
        self._token = otel_context.attach(self._ctx)
        self._flag = _in_run.set(True)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is not None:
            end_task(self.span, exc)
        if self._flag is not None:
            _in_run.reset(self._flag)
        detach(self._token)
        self._token = self._flag = None


def call_as_task(name_of: Callable[[], str], wrapped: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    """``wrapped(*args, **kwargs)`` as a task named ``name_of()``, unless a run is open."""
    if _in_run.get() or not is_instrumentation_enabled():
        return wrapped(*args, **kwargs)
    with RunTask(name_of()) as run:
        result = wrapped(*args, **kwargs)
    if inspect.isgenerator(result):
        return _steps_in_task(run, result)
    end_task(run.span)
    return result


async def acall_as_task(name_of: Callable[[], str], wrapped: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
    """:func:`call_as_task` for a coroutine function."""
    if _in_run.get() or not is_instrumentation_enabled():
        return await wrapped(*args, **kwargs)
    with RunTask(name_of()) as run:
        result = await wrapped(*args, **kwargs)
    end_task(run.span)
    return result


def _steps_in_task(run: RunTask, steps: Generator[Any, Any, Any]) -> Generator[Any, Any, Any]:
    """Yield ``steps`` with the run's task current while each step is computed (not while the
    caller handles it); the task ends with the generator: exhausted, failed or closed."""
    failure: BaseException | None = None
    try:
        while True:
            with run:  # a step that raises ends the task with its exception
                try:
                    step = next(steps)
                except StopIteration as stop:
                    return stop.value
            yield step
    except GeneratorExit:
        steps.close()  # closed early: not a failure; what the close raises passes through
        raise
    except BaseException as exc:
        failure = exc
        raise
    finally:
        end_task(run.span, failure)


def call_as_tool(start: Callable[[], Span], wrapped: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any], where: str,
                 check: Callable[[Span, Any], None] | None = None) -> Any:
    """``wrapped(*args, **kwargs)`` inside the tool span ``start()`` opens (current while it
    runs, so processes it starts nest in it); an exception marks the span ERROR and
    propagates unchanged; ``check(span, result)`` may mark the span before it ends (a tool
    that returned its failure instead of raising).  ``where`` names the place in an
    internal-error log."""
    span = _start_tool(start, where)
    if span is None:
        return wrapped(*args, **kwargs)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        _fail(span, exc)
        raise
    finally:
        detach(token)
    if check is not None:
        _check(check, span, result, where)
    span.end()
    return result


# The async twin of call_as_tool: the bodies differ only by ``await``, which one function
# cannot both do and not do without making the sync path a coroutine.
async def acall_as_tool(start: Callable[[], Span], wrapped: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any], where: str,
                        check: Callable[[Span, Any], None] | None = None, *,
                        prepare: Callable[[Span, dict[str, Any]], dict[str, Any]] | None = None,
                        on_error: Callable[[Span], None] | None = None,
                        finish: Callable[[Span, Any], None] | None = None) -> Any:
    """:func:`call_as_tool` for a coroutine function.

    ``check(span, result)`` may mark the span before it ends (a tool that returned its
    failure instead of raising); ``prepare(span, kwargs)`` returns the keyword arguments to
    call with (MCP puts the trace context into the request); ``on_error(span)`` runs before
    a failed span ends; ``finish(span, result)`` ends the span itself (MCP splits transport
    from server time)."""
    span = _start_tool(start, where)
    if span is None:
        return await wrapped(*args, **kwargs)
    if prepare is not None:
        try:
            if FAULTS:
                fault(where)
            kwargs = prepare(span, kwargs)
        except Exception:  # noqa: BLE001
            internal_error(where)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        if on_error is not None:
            try:
                if FAULTS:
                    fault(where)
                on_error(span)
            except Exception:  # noqa: BLE001
                internal_error(where)
        _fail(span, exc)
        raise
    finally:
        detach(token)
    if check is not None:
        _check(check, span, result, where)
    try:
        if FAULTS:
            fault(where)
        if finish is not None:
            finish(span, result)
            return result
    except Exception:  # noqa: BLE001
        internal_error(where)
    span.end()
    return result


def _check(check: Callable[[Span, Any], None], span: Span, result: Any, where: str) -> None:
    try:
        if FAULTS:
            fault(where)
        check(span, result)
    except Exception:  # noqa: BLE001
        internal_error(where)


def _start_tool(start: Callable[[], Span], where: str) -> Span | None:
    if not is_instrumentation_enabled():
        return None
    try:
        if FAULTS:
            fault(where)
        return start()
    except Exception:  # noqa: BLE001
        internal_error(where)
        return None


def _fail(span: Span, exc: BaseException) -> None:
    mark_error(span, exc)
    span.end()


class FrameworkInstrumentor(Instrumentor):
    """An :class:`~.._base.Instrumentor` whose ``PATCHES`` name the wrapper as a method of
    the subclass: ``(module, "Class.method", wrapper name)``.  It carries the context into
    threads while instrumented (frameworks run tools in worker threads)."""

    SHARED = (_threads.PATCH,)
    PATCHES: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def patches(self) -> list[Patch]:
        return [(module, path, getattr(self, wrapper)) for module, path, wrapper in self.PATCHES]


class ToolInstrumentor(FrameworkInstrumentor):
    """A :class:`FrameworkInstrumentor` whose patched methods run a tool: ``_tool`` (sync) and
    ``_atool`` (async) wrap them in an ``execute_tool`` span named by :meth:`tool_name`, with
    ``gen_ai.tool.type = function``, the call id :meth:`call_id` finds and
    ``agent_latency.tool.source = SOURCE``; :meth:`check` may mark the span from the
    result.  ``PATCHES`` name ``_tool`` or ``_atool`` as the wrapper."""

    SOURCE: ClassVar[str] = ""

    def tool_name(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The tool's name: by default the ``name`` of the object the method runs on."""
        return str(getattr(instance, "name", None) or type(instance).__name__)

    def call_id(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The model's tool call id, when the framework hands it to the method."""
        return None

    def check(self, span: Span, result: Any) -> None:
        """Mark the span from what the tool returned (a failure it reports instead of
        raising)."""

    def _start(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Span:
        name = self.tool_name(instance, args, kwargs)
        return start_tool(name, tool_attributes(name, source=self.SOURCE,
                                                call_id=self.call_id(instance, args, kwargs)))

    def _tool(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        return call_as_tool(lambda: self._start(instance, args, kwargs), wrapped, args, kwargs,
                            f"{self.SOURCE}.tool", check=self.check)

    async def _atool(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
        return await acall_as_tool(lambda: self._start(instance, args, kwargs), wrapped, args,
                                   kwargs, f"{self.SOURCE}.atool", check=self.check)
