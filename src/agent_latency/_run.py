"""``agent-latency run [--name NAME] [--children] -- CMD ARGS…``: zero-code instrumentation.

How it works (the technique ``opentelemetry-instrument`` uses):

1. This command puts ``agent_latency/_bootstrap`` first on ``PYTHONPATH``, describes the run
   in one environment variable (``AGENT_LATENCY_RUN``: task name, the start time, the
   original ``PYTHONPATH``) and *replaces itself* with ``CMD`` (``os.execvpe``).  There is no
   wrapper process left: the exit status, signals, stdin/stdout/stderr, the pid and the
   process group are ``CMD``'s own, so the exit code passes through on a normal exit,
   ``sys.exit``, an uncaught exception or a signal alike.
2. The first Python interpreter that starts (``CMD`` itself when it is ``python …`` or a
   console script) imports our ``sitecustomize``, which restores the original environment
   (``PYTHONPATH``, no ``AGENT_LATENCY_RUN``) and ``sys.path``, runs any other
   ``sitecustomize`` that was shadowed, calls :func:`agent_latency.instrument` and opens one
   task for the whole process, started at the moment ``agent-latency run`` replaced itself
   with ``CMD`` (so the program's interpreter start-up counts, as *other*; the launcher's
   own start-up before that moment is not the program's time and is not booked).
3. The task ends at exit (``atexit``: normal end, ``sys.exit``, uncaught exception — then
   with status ERROR), or on ``SIGTERM`` / ``SIGHUP`` when the program left those at their
   default action: the task is ended and flushed, then the signal is re-raised with the
   default action so the exit status is still "killed by SIGTERM".  ``SIGKILL`` and
   ``os._exit`` end the process before anything can be written.  (``_process.py``: the
   same code opens ``instrument()``'s implicit process task.)

Tasks the program opens itself nest inside the process task: each gets its own budget and
also counts inside the process task's.

A program that is not Python (``agent-latency run -- node cli.js``, ``-- ls``: an executable
that is not a Python interpreter, or a script whose ``#!`` line names another interpreter)
cannot load the bootstrap.  ``run`` says so in one line and, instead of replacing itself,
records the program's run as the process task from here (instrumented, it starts the
program as a child, passes signals on and its exit status through): its wall time from the
child's start to its exit, all *other*, since its own LLM calls and tools cannot be seen.
Setting up the instrumentation first takes the launcher a moment (a second on a loaded
machine): that is not the program's, so the task starts when the child does.  With
``--children`` the Python processes it starts are instrumented as tasks of their own nested
in that one.  A shell,
a shell script or a launcher (``env``, ``uv``, ``timeout`` …) is taken to start Python and
is run as a Python program is.

Child processes: every process is an ``execute_tool`` span in the process task, and gets
``TRACEPARENT``.  Child *Python* processes are not instrumented by default (the environment
they inherit is the original one): a test suite an agent runs must not print budget lines
into the output the agent reads.  ``--children`` (or ``AGENT_LATENCY_RUN_CHILDREN=true``)
instruments them too: each then records a task of its own, a child of the tool span that
started it (same trace), without a summary line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time

from . import semconv
from ._names import default_name

USAGE = """usage: agent-latency run [-h] [--name NAME] [--children] [--] CMD [ARGS...]

Run a Python program (python script.py, python -m module, or a console script) with every
agent-latency instrumentation on and the whole process as one task; its budget line is
printed on stderr at exit.  CMD's exit status is passed through.  A program that is not
Python is recorded as one task of its wall time (its LLM calls and tools cannot be seen).

positional arguments:
  CMD [ARGS...]         the program to run and its arguments

options:
  -h, --help            show this help message and exit
  --name NAME, -n NAME  task name (default: the script or command name)
  --children            also instrument child Python processes (each becomes a task of
                        its own)

examples:
  agent-latency run -- python agent.py --task fix-tests
  agent-latency run --name nightly -- python -m my_agent
  agent-latency run --children -- mini-swe-agent -t "fix the failing test"
"""

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "_bootstrap")


# -- the command ---------------------------------------------------------------------------
def parse(argv: list[str]) -> tuple[str | None, bool, list[str]]:
    """``(name, children, cmd)``; raises ``ValueError`` with a message on bad usage."""
    name: str | None = None
    children = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in {"-h", "--help"}:
            raise SystemExit(0)
        if arg == "--children":
            children = True
        elif arg == "--name" or arg == "-n":
            if i + 1 >= len(argv):
                raise ValueError("--name needs a value")
            name = argv[i + 1]
            i += 1
        elif arg.startswith("--name="):
            name = arg.split("=", 1)[1]
        elif arg.startswith("-"):
            raise ValueError(f"unknown option {arg!r}")
        else:
            break
        i += 1
    cmd = argv[i:]
    if not cmd:
        raise ValueError("no command given")
    if name is not None and not name:
        raise ValueError("--name must not be empty")
    return name, children, cmd


def run_environment(name: str, children: bool, environ: dict[str, str] | None = None,
                    start_ns: int | None = None) -> dict[str, str]:
    """The environment ``CMD`` runs in: the bootstrap first on ``PYTHONPATH``, the run spec."""
    env = dict(os.environ if environ is None else environ)
    original = env.get("PYTHONPATH")
    spec = {
        "name": name,
        "start_ns": time.time_ns() if start_ns is None else start_ns,
        "pythonpath": original,
        "bootstrap": BOOTSTRAP_DIR,
        "children": children,
        "depth": 0,
    }
    env[semconv.ENV_RUN] = json.dumps(spec, separators=(",", ":"))
    env["PYTHONPATH"] = BOOTSTRAP_DIR + (os.pathsep + original if original else "")
    return env


def main(argv: list[str]) -> int:
    """Entry point of ``agent-latency run``; on POSIX it does not return when CMD starts."""
    try:
        name, children, cmd = parse(argv)
    except SystemExit:
        print(USAGE)
        return 0
    except ValueError as exc:
        _say(f"agent-latency run: {exc}\n\n{USAGE}")
        return 2
    if not children and os.environ.get(semconv.ENV_RUN_CHILDREN):
        from ._env import env_flag  # only when set: the launcher stays light

        children = env_flag(semconv.ENV_RUN_CHILDREN, False)
    name = name or default_name(cmd)
    why = not_python(cmd[0])
    if why:
        _say(f"agent-latency run: {cmd[0]} is not a Python program ({why}): its LLM calls "
             "and tools cannot be instrumented; recording its run as one task")
        return run_not_python(name, children, cmd)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # None: the descriptor was closed (``2>&-``)
            stream.flush()
    # The program's time starts now, with its exec: not with this launcher's own start-up.
    env = run_environment(name, children, start_ns=time.time_ns())
    if hasattr(os, "execvpe") and os.name == "posix":
        try:
            os.execvpe(cmd[0], cmd, env)  # noqa: S606 - runs the user's command on purpose
        except FileNotFoundError:
            _say(f"agent-latency run: {cmd[0]}: command not found")
            return 127
        except PermissionError as exc:
            _say(f"agent-latency run: {cmd[0]}: {exc.strerror}")
            return 126
        except OSError as exc:
            _say(f"agent-latency run: {cmd[0]}: {exc}")
            return 126
    # No exec (Windows): run CMD as a child and pass its exit status through.
    import subprocess

    try:
        proc = subprocess.Popen(cmd, env=env)  # noqa: S603 - runs the user's command on purpose
    except FileNotFoundError:
        _say(f"agent-latency run: {cmd[0]}: command not found")
        return 127
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:
            continue  # the child got the same Ctrl-C; wait for it to decide
    return code if code >= 0 else 128 - code


_PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*$")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
# Programs that start another program, often Python: run as a Python program is (the
# bootstrap reaches the Python process they start through the environment).
_LAUNCHERS = _SHELLS | frozenset({
    "env", "uv", "uvx", "pipx", "pdm", "hatch", "rye", "poetry", "conda", "mamba",
    "micromamba", "pixi", "timeout", "nice", "nohup", "time", "stdbuf", "taskset", "ionice",
    "chrt", "setsid", "sudo", "xvfb-run", "direnv"})


def not_python(program: str) -> str | None:
    """Why ``program`` (a command name or path) cannot load the bootstrap, in a few words;
    None when it is Python, a launcher or shell script (taken to start Python) or cannot be
    told (not found or unreadable: the exec says so)."""
    path = shutil.which(program)
    if path is None:
        return None
    real = os.path.realpath(path)
    names = {os.path.basename(program), os.path.basename(real)}
    if any(_PYTHON_NAME.match(n) for n in names) or names & _LAUNCHERS:
        return None
    try:
        with open(real, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if head.startswith(b"#!"):
        words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
        if not words:
            return None
        interpreter = os.path.basename(words[0])
        if interpreter == "env":  # #!/usr/bin/env [-S] node
            args = [w for w in words[1:] if not w.startswith("-")]
            interpreter = os.path.basename(args[0]) if args else interpreter
        if "python" in interpreter or interpreter in _LAUNCHERS:
            return None
        return f"a {interpreter} script"
    if head.startswith(b"\x7fELF"):
        return "a native executable"
    return None


def run_not_python(name: str, children: bool, cmd: list[str]) -> int:
    """Record ``cmd``'s run as the process task of this process, which starts it as a child
    (not as a tool: the run is the agent's own time) and passes signals on; returns its
    exit status as a shell reports it.  The task starts with the child, after this
    process's set-up (``instrument()``), which is not the program's time."""
    # Only for a program that is not Python: the launcher, light otherwise, is instrumented.
    import signal
    import subprocess

    from opentelemetry.instrumentation.utils import suppress_instrumentation

    from ._process import open_process_task, process_task
    from .configure import instrument

    env = dict(os.environ)
    instrumented = instrument(summary=True, process_task=False)
    start_ns = time.time_ns()  # the program's time: from here, its start, to its exit
    if instrumented:
        open_process_task(name, start_ns, {semconv.RUN_TASK: True})
        if children and process_task.span is not None:
            from ._child_context import context_env  # with the SDK, loaded just above

            # Python children load the bootstrap as children (no summary line of theirs),
            # nested in this task through TRACEPARENT.
            env = run_environment(name, True, start_ns=start_ns)
            spec = json.loads(env[semconv.ENV_RUN])
            env[semconv.ENV_RUN] = json.dumps({**spec, "depth": 1}, separators=(",", ":"))
            env.update(context_env(process_task.span))
    try:
        with suppress_instrumentation():
            proc = subprocess.Popen(cmd, env=env)  # noqa: S603 - the user's command
    except OSError as exc:
        _say(f"agent-latency run: {cmd[0]}: {exc.strerror or exc}")
        return 126

    def forward(signum: int, _frame: object) -> None:
        try:
            proc.send_signal(signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None), signal.SIGINT):
        if sig is not None:
            try:
                signal.signal(sig, forward)
            except (OSError, ValueError):
                pass
    code = proc.wait()
    process_task.end()  # at the program's exit, not this launcher's (its exit path is ours)
    return code if code >= 0 else 128 - code


def _say(text: str) -> None:
    """A message on stderr; none when stderr is closed (``print(file=None)`` would put it on
    stdout, into the output the program's reader parses)."""
    if sys.stderr is not None:
        print(text, file=sys.stderr)
