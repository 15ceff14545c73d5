"""The whole process as one task: opened at start-up, ended exactly once at exit or a signal.

Two places open it, with the same machinery:

* ``agent-latency run`` (its bootstrap, ``_run.bootstrap``): named after the command, started
  when ``agent-latency run`` was invoked, marked ``agent_latency.run``;
* ``instrument()`` on its own, when nothing else made the process a task (the *implicit*
  process task, ``AGENT_LATENCY_PROCESS_TASK``): named after the script or module, started
  when the kernel says the process started, marked ``agent_latency.process``.

The task's parent is the ``TRACEPARENT`` the process was started with, if any, and its
context is attached as the main thread's for the program's whole life.  It ends at exit
(``atexit``: normal end, ``sys.exit``, an uncaught exception — then with status ERROR), or
on ``SIGTERM`` / ``SIGHUP`` when the program left those at their default action: the task is
ended and flushed, then the signal is re-raised with the default action so the exit status
is still "killed by SIGTERM".  ``SIGKILL`` and ``os._exit`` end the process before anything
can be written.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from . import _scope, semconv
from ._child_context import parent_context_from_env
from ._lifecycle import flush_provider
from ._log import FAULTS, Guard, fault, internal_error
from ._names import default_name


class ProcessTask:
    """The whole-process task: opened once, ended once (at exit, on a signal, or by hand)."""

    __slots__ = ("ended", "error", "implicit", "name", "pid", "span")

    def __init__(self) -> None:
        self.span: Any = None
        self.name = ""
        self.pid = 0
        self.implicit = False
        self.ended = False
        self.error: tuple[str, str] | None = None

    @property
    def is_open(self) -> bool:
        """Whether it was opened and has not ended yet."""
        return self.span is not None and not self.ended

    def open(self, name: str, start_ns: int, attributes: dict[str, Any]) -> None:
        """Start the task span and make it the current context of the calling thread."""
        # Loaded with the SDK already: a look-up.
        from opentelemetry import context as otel_context

        span, ctx = _scope.start_task(
            name, attributes={**attributes, semconv.TOOL_PID: os.getpid()},
            context=parent_context_from_env(), start_time=min(start_ns, time.time_ns()))
        self.span, self.name, self.pid = span, name, os.getpid()
        self.implicit = bool(attributes.get(semconv.PROCESS_TASK))
        otel_context.attach(ctx)  # never detached: the program's whole life is inside it

    def end(self) -> None:
        """End it with its budget (and the error that ended the process, if any); once."""
        # A forked child inherits this object and our atexit hook: only the opener ends it.
        if self.ended or self.span is None or os.getpid() != self.pid:
            return
        self.ended = True
        # Nothing is imported here: this runs at exit and in a signal handler.  What is not
        # loaded yet was not used.
        subprocess_module = sys.modules.get("agent_latency.instrumentation.tools.subprocess")
        try:
            if FAULTS:
                fault("process_task.finish_unwaited")
            if subprocess_module is not None:
                subprocess_module.finish_unwaited()
        except Exception:  # noqa: BLE001
            internal_error("process_task.finish_unwaited")
        span = self.span
        try:
            if FAULTS:
                fault("process_task.end")
            if self.error is not None:
                from opentelemetry.trace import Status, StatusCode  # loaded with the span

                span.set_attribute(semconv.ERROR_TYPE, self.error[0])
                span.set_status(Status(StatusCode.ERROR, self.error[1]))
        except Exception:  # noqa: BLE001
            internal_error("process_task.end")
        _scope.end_task(span)

    def forget(self) -> None:
        """Back to never opened (a forked child: the parent's process task is the parent's)."""
        self.span, self.name, self.pid = None, "", 0
        self.implicit = self.ended = False
        self.error = None


process_task = ProcessTask()


@Guard("process_task.after_fork")
def _after_fork_in_child() -> None:
    """A forked child starts clean: no process task, and fatal signals at their default
    action again (our handler would end the parent's task in the child)."""
    process_task.forget()
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is _on_signal:
            signal.signal(sig, signal.SIG_DFL)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def open_process_task(name: str, start_ns: int, attributes: dict[str, Any]) -> bool:
    """Open :data:`process_task` and hook its end to exit, uncaught exceptions and fatal
    signals; False (and nothing done) when it was already opened in this process."""
    # Only when a process task opens.
    import atexit

    if process_task.span is not None:
        return False
    process_task.open(name, start_ns, attributes)
    # Registered after instrument()'s own exit hook, so it runs first (atexit is LIFO).
    atexit.register(process_task.end)
    sys.excepthook = _excepthook_wrapper(sys.excepthook)
    if on_main_thread():
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_signal)
    return True


def process_name() -> str:
    """The task name for this process: ``agent`` for ``python agent.py``, ``pkg.main`` for
    ``python -m pkg.main``, ``python -c``, or a console script's name."""
    # ``sys.orig_argv`` (3.10+) still has ``-m pkg.main``; ``sys.argv[0]`` is the file by then.
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    return default_name(argv) if argv and argv[0] else "python"


def process_start_ns(*, latest: bool = False) -> int | None:
    """When the kernel started this process, in epoch nanoseconds (Linux, to the clock tick:
    10 ms); None where ``/proc`` does not say.

    The kernel's figure is cut down to a whole tick, so the process started within the tick
    after it.  ``latest`` gives that tick's end: never before the true start, so a child's
    task does not begin before the parent's span that started it (which a report would take
    for clock skew between hosts)."""
    try:
        with open("/proc/self/stat", "rb") as stat_file:
            stat = stat_file.read()
        # Field 2, the command name, may hold spaces and parentheses: count after its ")".
        fields = stat[stat.rindex(b")") + 2:].split()
        start_ticks = int(fields[19]) + (1 if latest else 0)  # field 22, ``starttime``
        age_s = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time_ns() - int(max(age_s, 0.0) * 1e9)


def on_main_thread() -> bool:
    """Whether the caller runs on the main thread (signals and the process context live there)."""
    return threading.current_thread() is threading.main_thread()


def _excepthook_wrapper(original: Any) -> Any:
    def excepthook(exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            if process_task.is_open:
                # Loaded with the task already: a look-up in an exception hook.
                from ._scope import capture_command, error_description

                capture = capture_command()
                process_task.error = (exc_type.__qualname__, error_description(exc, capture))
                if capture:
                    process_task.span.record_exception(exc)
                else:
                    process_task.span.add_event(
                        "exception", {"exception.type": exc_type.__qualname__})
        except Exception:  # noqa: BLE001, S110 - the exit goes on without the event
            pass
        return original(exc_type, exc, tb)

    excepthook.__wrapped__ = original  # type: ignore[attr-defined]  # a function takes attributes
    return excepthook


def _on_signal(signum: int, frame: Any) -> None:
    """A fatal signal with the default action: end the task, flush (at most
    ``AGENT_LATENCY_EXIT_TIMEOUT``), die of the signal.  Imports nothing: the main thread
    may have been inside an import when the signal came."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    if process_task.error is None:
        process_task.error = (name, f"killed by {name}")
    try:
        if FAULTS:
            fault("process_task.on_signal")
        process_task.end()
        configure = sys.modules.get("agent_latency.configure")
        if configure is not None:
            configure.end_open_tasks()
        flush_provider()
    except Exception:  # noqa: BLE001
        internal_error("process_task.on_signal")
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
