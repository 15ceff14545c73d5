"""Every process the program starts is an ``execute_tool {name}`` span from spawn to exit.

Patch points (all in the standard library, so this target is always available):

* ``subprocess.Popen._execute_child`` — the one place every ``Popen`` spawns, which also
  covers ``run``, ``call``, ``check_call``, ``check_output``, ``getoutput`` and asyncio's
  ``create_subprocess_exec`` / ``create_subprocess_shell`` (asyncio starts a ``Popen`` and
  copies the exit status into it).  The span starts just before the fork and carries the
  pid.
* ``subprocess._fork_exec`` (Python 3.11+) and ``Popen._posix_spawn`` — where
  ``TRACEPARENT`` / ``TRACESTATE`` join the child's environment.  ``Popen`` turns an
  ``env`` mapping into ``KEY=value`` bytes one entry at a time (~0.5 µs an entry, so 20–40 µs
  for a usual environment); handing the encoded list to ``fork_exec`` ourselves costs a few
  µs, and a program that passes no ``env`` keeps ``env=None`` everywhere else.  Python 3.10,
  which calls ``_posixsubprocess.fork_exec`` directly, gets a copy of the environment
  instead.
* ``Popen.returncode`` becomes a data descriptor whose setter ends the span: whoever learns
  the exit status first — ``wait``, ``communicate``, ``poll``, the context exit, asyncio's
  child watcher, ``Popen.__del__`` or ``subprocess._cleanup`` — ends it, so one span per
  process whatever API waited for it.  The value is still kept in the instance dictionary,
  so reading ``returncode`` gives exactly what it would without us.
* ``Popen.wait`` / ``communicate`` note a ``TimeoutExpired`` and ``send_signal`` (also
  behind ``kill`` / ``terminate``) notes the signal, so a timed-out-then-killed tool ends
  ``timed_out`` with ``error.type = "timeout"``.
* ``os.system`` — its own span; the trace context reaches the shell as an ``export`` prefix
  on the command (``os.system`` has no environment argument, and ``os.environ`` is never
  changed).

A process that is never waited for ends its span when something notices its exit (a later
``poll``, ``Popen.__del__``, ``subprocess._cleanup`` on the next spawn), or at interpreter
exit: there its state is peeked with ``waitid(WNOWAIT)``, which does not reap it, and a
process still running ends with ``agent_latency.tool.running_at_exit = true``.
"""

from __future__ import annotations

import atexit
import inspect
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import weakref
from functools import partial
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, unwrap
from opentelemetry.trace import Status, StatusCode
from wrapt import wrap_function_wrapper

from ... import _hooks, semconv
from ..._child_context import (
    _fork_exec_hook,
    _pending,
    _posix_spawn_hook,
    auto_instrumentation_dir,
    child_env,
    child_env_list,
    context_env,
    parent_context_from_env,
    without_dir,
)
from ..._env import env_flag
from ..._log import FAULTS, Guard, fault, internal_error
from ..._pauses import PAUSES
from ..._scope import mark_error, start_tool, tool_attributes
from .._base import Instrumentor, Patch
from . import _threads
from ._probes import library_probe

_SPAN = "_agent_latency_span"
_TIMED_OUT = "_agent_latency_timed_out"
_SIGNALLED = "_agent_latency_signal"
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})

# Popen objects whose span is still open (for the exit sweep); weak, so never kept alive.
_live: weakref.WeakSet[subprocess.Popen[Any]] = weakref.WeakSet()
if hasattr(os, "register_at_fork"):
    # A forked child did not start its parent's processes: their spans are the parent's.
    os.register_at_fork(after_in_child=_live.clear)
_atexit_registered = False
_atexit_lock = threading.Lock()


# Programs that run the next word as the real command. The value is the options that take
# an argument (``sudo -u alice make``, ``nice -n 5 make``), which are skipped with it.
_WRAPPERS: dict[str, frozenset[str]] = {
    "exec": frozenset({"-a"}), "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir"}),
    "command": frozenset(), "builtin": frozenset(), "time": frozenset({"-f", "-o"}),
    "nice": frozenset({"-n", "--adjustment"}), "nohup": frozenset(), "setsid": frozenset(),
    "sudo": frozenset({"-u", "-g", "-C", "-h", "-p", "-U", "-r", "-t", "-D", "-R"}),
    "doas": frozenset({"-u", "-C"}), "stdbuf": frozenset({"-i", "-o", "-e"}),
    "ionice": frozenset({"-c", "-n", "-p"}), "chrt": frozenset(),
}
_QUOTING = frozenset("'\"\\")


def _is_assignment(word: str) -> bool:
    name, sep, _ = word.partition("=")
    return bool(sep) and bool(name) and not name[0].isdigit() \
        and name.replace("_", "a").isalnum()


def program_name(words: list[str]) -> str:
    """The base name of the program a command's words run, past ``NAME=value`` assignments
    and wrappers (``env``, ``exec``, ``sudo -u root``, ``nice -n 5`` ...); "sh" when none.

    Only the base name: everything else in a command line (arguments, assignments such as
    ``AUTH="Bearer ..."``) may be a secret and goes on a span only with command capture on.
    """
    skip_value: frozenset[str] = frozenset()
    wrapped = False
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if wrapped and word.startswith("-"):
            if word in skip_value:
                i += 1  # the option's own argument
            continue
        if _is_assignment(word):
            continue
        base = os.path.basename(word.lstrip("({")) or ""
        if base in _WRAPPERS:
            skip_value, wrapped = _WRAPPERS[base], True
            continue
        if "=" in base or any(c.isspace() for c in base):
            return "sh"  # ``A\ B=x ls`` runs "A B=x": a name like that is data, not a program
        return base or "sh"
    return "sh"


def _first_word(command: str) -> str:
    """The program a shell command line runs: ``FOO="a b" sudo -u x pytest -q`` -> ``pytest``.

    Words are split with the shell's quoting rules (:mod:`shlex`); a line those rules cannot
    split (an unclosed quote) is named "sh", never after a piece of it.
    """
    if _QUOTING.isdisjoint(command):
        words = command.split()  # the common case, ~20x cheaper than shlex
    else:
        try:
            words = shlex.split(command)
        except ValueError:
            return "sh"
    return program_name(words)


def _str(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return os.fsdecode(value)
    except TypeError:
        return str(value)


def describe(args: Any, executable: Any, shell: bool) -> tuple[str, str, list[str] | str]:
    """``(tool name, executable, argv-or-command)`` of a spawn, cheaply and without raising.

    The tool name is the basename of the program: ``pytest`` for ``["pytest", "-q"]``,
    ``/usr/bin/git`` -> ``git``.  Two wrappers are seen through: a shell command
    (``shell=True``, or ``["bash", "-c", "pytest -q"]``) is named after the command it runs,
    and ``python -m pytest`` is named ``pytest``.  ``executable`` keeps what really runs.
    """
    if isinstance(args, (str, bytes, os.PathLike)):
        argv: list[str] = [_str(args)]
    elif isinstance(args, (list, tuple)):
        argv = [_str(a) for a in args]
    else:  # any other iterable: Popen consumes it, we must not
        argv = [_str(executable)] if executable is not None else []
    if shell:
        command = " ".join(argv)
        exe = _str(executable) if executable is not None else "/bin/sh"
        return _first_word(command), exe, command
    exe = _str(executable) if executable is not None else (argv[0] if argv else "")
    base = os.path.basename(argv[0]) if argv else os.path.basename(exe)
    if base in _WRAPPERS and len(argv) > 1:  # ["env", "TOKEN=...", "sudo", "make"]
        argv_name = program_name(argv)
        if argv_name not in _SHELLS:
            return argv_name, exe, argv
        base = argv_name
    if base in _SHELLS and len(argv) >= 3 and argv[1].startswith("-") \
            and argv[1].endswith("c") and " " not in argv[1]:
        return _first_word(argv[2]), exe, argv
    if base.startswith("python") and len(argv) >= 3 and argv[1] == "-m":
        return argv[2], exe, argv
    return base or "process", exe, argv


# -- ending a process span ------------------------------------------------------------------
def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except (ValueError, AttributeError):
        return f"signal {number}"


@Guard("subprocess.finish")
def finish(span: trace.Span, returncode: int | None, *, timed_out: float | None = None,
           signalled: int | None = None, running: bool = False,
           end_ns: int | None = None, pid: int | None = None) -> None:
    """Set a process span's outcome and end it (never raises).

    Everything learnt after the spawn (pid, exit code) is set in one ``set_attributes``:
    this runs right after the kernel reaped a child, with cold caches, where each SDK call
    costs two to three times what it costs warm.

    Inside a garbage collection (``Popen.__del__`` learning the status) it ends at the next
    safe point instead, at the time of now: ending a span there may wait on a lock the SDK
    held when the collection began.
    """
    if PAUSES.collecting():
        _hooks.later(partial(finish, span, returncode, timed_out=timed_out, signalled=signalled,
                             running=running, pid=pid,
                             end_ns=time.time_ns() if end_ns is None else end_ns))
        return
    attrs: dict[str, Any] = {}
    if pid is not None:
        attrs[semconv.TOOL_PID] = pid
    if running:
        attrs[semconv.TOOL_RUNNING_AT_EXIT] = True
    elif returncode is not None and returncode != sys.maxsize:
        attrs[semconv.TOOL_EXIT_CODE] = returncode
        if returncode != 0:
            if returncode < 0:
                name = _signal_name(-returncode)
                attrs[semconv.TOOL_SIGNAL] = name
                if timed_out is not None and signalled is not None:
                    attrs[semconv.TOOL_TIMED_OUT] = True
                    attrs[semconv.ERROR_TYPE] = "timeout"
                    desc = f"timed out after {timed_out:.3g} s; killed by {name}"
                else:
                    attrs[semconv.ERROR_TYPE] = name
                    desc = f"killed by {name}"
            else:
                attrs[semconv.ERROR_TYPE] = "exit_code"
                desc = f"exit code {returncode}"
            span.set_status(Status(StatusCode.ERROR, desc))
    if attrs:
        span.set_attributes(attrs)
    span.end(end_time=end_ns)


def _returncode_get(self: Any) -> Any:
    return self.__dict__.get("returncode")


def _returncode_set(self: Any, value: Any) -> None:
    d = self.__dict__
    d["returncode"] = value
    if value is not None and _SPAN in d:
        span = d.pop(_SPAN, None)
        if span is not None:
            finish(span, value, timed_out=d.get(_TIMED_OUT), signalled=d.get(_SIGNALLED),
                   pid=d.get("pid"))


_RETURNCODE = property(_returncode_get, _returncode_set,
                       doc="Exit status; agent-latency ends the process span when it is set.")


def finish_unwaited() -> int:
    """End the span of every process not yet waited for (at exit); returns how many.

    A child that has exited is seen with ``waitid(WNOWAIT)``, which leaves it for the
    program to reap; one still running ends with ``running_at_exit``.
    """
    ended = 0
    for proc in list(_live):
        span = proc.__dict__.pop(_SPAN, None)
        if span is None:
            continue
        code: int | None = None
        running = True
        try:
            if proc.__dict__.get("returncode") is not None:
                code, running = proc.__dict__["returncode"], False
            elif hasattr(os, "waitid"):
                info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is not None:
                    running = False
                    code = (info.si_status if info.si_code == os.CLD_EXITED
                            else -info.si_status)
        except ChildProcessError:
            running = False
        except Exception:  # noqa: BLE001, S110 - status unknown: still running
            pass
        finish(span, code, running=running, timed_out=proc.__dict__.get(_TIMED_OUT),
               signalled=proc.__dict__.get(_SIGNALLED), pid=proc.__dict__.get("pid"))
        ended += 1
    return ended


def _register_atexit() -> None:
    # Registered at the first spawn, i.e. after instrument()'s own exit hook, so it runs
    # before the open tasks are ended at exit (atexit runs last-registered first).
    global _atexit_registered
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(finish_unwaited)
            _atexit_registered = True


# -- the wrappers ---------------------------------------------------------------------------
class _Positions:
    """Where ``_execute_child``'s parameters sit (it is always called positionally)."""

    def __init__(self) -> None:
        try:
            spawn = subprocess.Popen._execute_child  # type: ignore[attr-defined]  # private, not in typeshed
            names = list(inspect.signature(spawn).parameters)[1:]
            self.args = names.index("args")
            self.executable = names.index("executable")
            self.env = names.index("env")
            self.shell = names.index("shell")
        except (ValueError, TypeError):  # wrapped by someone as (*args): CPython's order
            self.args, self.executable, self.env, self.shell = 0, 1, 6, 9


_POSITIONS = _Positions()


def _get(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[index] if index < len(args) else None


# The children's PYTHONPATH entry to drop has not been looked for yet.
_NOT_YET = object()


class SubprocessInstrumentor(Instrumentor):
    """Process spans for ``subprocess``, ``asyncio`` subprocesses and ``os.system``."""

    SHARED = (_threads.PATCH,)
    _pos: _Positions | None = None
    _env_token: object | None = None
    _hooked = False

    def setup(self, **kwargs: Any) -> None:
        self._pos = _POSITIONS
        self._capture = env_flag(semconv.ENV_CAPTURE_COMMAND, False)
        self._propagate = env_flag(semconv.ENV_PROPAGATE, True)
        self._strip: str | object | None = _NOT_YET

    def _strip_dir(self) -> str | None:
        # Read at the first spawn, not at instrument(): opentelemetry-instrument loads us
        # while its start-up has its directory off PYTHONPATH, and puts it back after.
        strip = self._strip
        if strip is _NOT_YET:
            strip = self._strip = auto_instrumentation_dir()
        return strip  # type: ignore[return-value]  # a str or None once read

    def patches(self) -> list[Patch]:
        rows: list[Patch] = [("subprocess", "Popen._execute_child", self._execute_child),
                             ("subprocess", "Popen.wait", _note_timeout),
                             ("subprocess", "Popen.communicate", _note_timeout),
                             ("subprocess", "Popen.send_signal", _note_signal)]
        if os.name == "posix":
            rows.append(("os", "system", self._system))
        return rows

    def applied(self) -> None:
        subprocess.Popen.returncode = _RETURNCODE
        self._hooked = False
        real = getattr(subprocess, "_fork_exec", None)
        if callable(real) and hasattr(subprocess.Popen, "_posix_spawn"):
            subprocess._fork_exec = _fork_exec_hook(real)  # type: ignore[attr-defined]  # private, not in typeshed
            wrap_function_wrapper(subprocess.Popen, "_posix_spawn", _posix_spawn_hook)
            self._hooked = True
        # A process started by an instrumented parent joins the parent's trace.
        if trace.get_current_span().get_span_context().is_valid is False:
            ctx = parent_context_from_env()
            if ctx is not None:
                self._env_token = otel_context.attach(ctx)

    def removed(self) -> None:
        if self._hooked:
            unwrap(subprocess.Popen, "_posix_spawn")
            hook = getattr(subprocess, "_fork_exec", None)
            real = getattr(hook, "__wrapped__", None)
            if real is not None:
                subprocess._fork_exec = real  # type: ignore[attr-defined]  # private, not in typeshed
            self._hooked = False
        if isinstance(subprocess.Popen.__dict__.get("returncode"), property):
            del subprocess.Popen.returncode
        if self._env_token is not None:
            try:
                otel_context.detach(self._env_token)  # type: ignore[arg-type]  # a Token kept as object
            except Exception:  # noqa: BLE001, S110 - OpenTelemetry logs it
                pass
            self._env_token = None

    def _execute_child(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> Any:
        if not is_instrumentation_enabled() or library_probe():
            return wrapped(*args, **kwargs)
        span = None
        try:
            if FAULTS:
                fault("subprocess._execute_child")
            pos = self._pos
            assert pos is not None  # noqa: S101 - set before the wrapper is installed
            name, exe, argv = describe(_get(args, kwargs, pos.args, "args"),
                                       _get(args, kwargs, pos.executable, "executable"),
                                       bool(_get(args, kwargs, pos.shell, "shell")))
            attributes = tool_attributes(name, tool_type=semconv.TOOL_TYPE_EXTENSION,
                                         source="subprocess")
            if exe != name:  # each attribute costs the SDK ~3 µs: no repeats
                attributes[semconv.TOOL_EXECUTABLE] = exe
            if self._capture:
                attributes[semconv.TOOL_COMMAND] = (
                    argv if isinstance(argv, str) else _join(argv))
            span = start_tool(name, attributes)
            extra = context_env(span) if self._propagate else {}
            strip = self._strip_dir()
            if extra or strip is not None:
                if self._hooked:
                    _pending.extra, _pending.strip = extra, strip
                else:
                    env = child_env(_get(args, kwargs, pos.env, "env"), extra, strip)
                    if "env" in kwargs or pos.env >= len(args):
                        kwargs = {**kwargs, "env": env}
                    else:
                        args = (*args[:pos.env], env, *args[pos.env + 1:])
        except Exception:  # noqa: BLE001 - never break the spawn
            internal_error("subprocess._execute_child")
            if span is None:
                return wrapped(*args, **kwargs)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            try:
                if FAULTS:
                    fault("subprocess._execute_child.error")
                mark_error(span, exc)
                span.end()
            except Exception:  # noqa: BLE001
                internal_error("subprocess._execute_child.error")
            raise
        finally:
            _pending.extra = None
        try:
            if FAULTS:
                fault("subprocess._execute_child.after")
            d = instance.__dict__
            rc = d.get("returncode")
            if rc is not None:  # already reaped (cannot happen today; be safe)
                finish(span, rc, pid=d.get("pid"))
            else:
                d[_SPAN] = span
                _live.add(instance)
                if not _atexit_registered:
                    _register_atexit()
        except Exception:  # noqa: BLE001
            internal_error("subprocess._execute_child.after")
        return result

    def _system(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        if not is_instrumentation_enabled() or len(args) != 1 or kwargs:
            return wrapped(*args, **kwargs)
        command = args[0]
        span = None
        try:
            if FAULTS:
                fault("subprocess.os_system")
            text = _str(command)
            name = _first_word(text)
            attributes = tool_attributes(name, tool_type=semconv.TOOL_TYPE_EXTENSION,
                                         source="os.system",
                                         extra={semconv.TOOL_EXECUTABLE: "/bin/sh"})
            if self._capture:
                attributes[semconv.TOOL_COMMAND] = text
            span = start_tool(name, attributes)
            extra = context_env(span) if self._propagate else {}
            prefix = ""
            strip = self._strip_dir()
            if strip is not None and "PYTHONPATH" in os.environ:
                kept = without_dir(os.environ["PYTHONPATH"], strip)
                if kept is None:
                    prefix = "unset PYTHONPATH; "
                else:
                    extra = {**extra, "PYTHONPATH": kept}
            if extra:
                prefix += "export " + " ".join(f"{k}='{v}'" for k, v in extra.items()
                                               if "'" not in v) + "; "
            if prefix:
                command = (prefix.encode() + command if isinstance(command, bytes)
                           else prefix + command)
        except Exception:  # noqa: BLE001
            internal_error("subprocess.os_system")
            if span is None:
                return wrapped(*args)
            command = args[0]
        try:
            status = wrapped(command)
        except BaseException as exc:
            mark_error(span, exc)
            span.end()
            raise
        try:
            if FAULTS:
                fault("subprocess.os_system.after")
            code: int | None
            try:
                code = os.waitstatus_to_exitcode(status)
            except ValueError:
                code = None
            finish(span, code)
        except Exception:  # noqa: BLE001
            internal_error("subprocess.os_system.after")
        return status


def _join(argv: list[str]) -> str:
    return shlex.join(argv)


def _note_timeout(wrapped: Any, instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    try:
        return wrapped(*args, **kwargs)
    except subprocess.TimeoutExpired as exc:
        try:
            if _SPAN in instance.__dict__:
                instance.__dict__[_TIMED_OUT] = exc.timeout
        except Exception:  # noqa: BLE001, S110 - the timeout still propagates
            pass
        raise


def _note_signal(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    try:
        if _SPAN in instance.__dict__:
            instance.__dict__[_SIGNALLED] = args[0] if args else kwargs.get("sig")
    except Exception:  # noqa: BLE001, S110 - the signal is still sent
        pass
    return wrapped(*args, **kwargs)


__all__ = [
    "SubprocessInstrumentor", "child_env", "child_env_list", "context_env", "describe",
    "finish_unwaited", "parent_context_from_env",
]
