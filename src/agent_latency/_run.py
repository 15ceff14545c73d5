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
   task for the whole process, started at the moment ``agent-latency run`` was invoked (so
   interpreter start-up counts, as *other*).
3. The task ends at exit (``atexit``: normal end, ``sys.exit``, uncaught exception — then
   with status ERROR), or on ``SIGTERM`` / ``SIGHUP`` when the program left those at their
   default action: the task is ended and flushed, then the signal is re-raised with the
   default action so the exit status is still "killed by SIGTERM".  ``SIGKILL`` and
   ``os._exit`` end the process before anything can be written.  (``_process.py``: the
   same code opens ``instrument()``'s implicit process task.)

Tasks the program opens itself nest inside the process task: each gets its own budget and
also counts inside the process task's.

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
import sys
import time

from . import semconv

USAGE = """usage: agent-latency run [--name NAME] [--children] [--] CMD [ARGS...]

Run a Python program (python script.py, python -m module, or a console script) with every
agent-latency instrumentation on and the whole process as one task; its budget line is
printed on stderr at exit.  CMD's exit status is passed through.

  --name NAME   task name (default: the script or command name)
  --children    also instrument child Python processes (each becomes a task of its own)
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


def default_name(cmd: list[str]) -> str:
    """``python agent.py`` -> ``agent``; ``python -m pkg.main`` -> ``pkg.main``;
    ``tool`` -> ``tool``."""
    base = os.path.basename(cmd[0])
    if base.startswith("python") or base in {"pypy", "pypy3"}:
        args = cmd[1:]
        while args:
            arg = args.pop(0)
            if arg == "-m" and args:
                return args[0]
            if arg == "-c":
                return "python -c"
            if arg in {"-W", "-X", "-Q"}:
                args[:1] = []
                continue
            if arg.startswith("-"):
                continue
            stem = os.path.basename(arg)
            return stem[:-3] if stem.endswith(".py") else stem
        return base
    return base


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
    start_ns = time.time_ns()
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
    env = run_environment(name or default_name(cmd), children, start_ns=start_ns)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # None: the descriptor was closed (``2>&-``)
            stream.flush()
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


def _say(text: str) -> None:
    """A message on stderr; none when stderr is closed (``print(file=None)`` would put it on
    stdout, into the output the program's reader parses)."""
    if sys.stderr is not None:
        print(text, file=sys.stderr)


# -- inside the program (called from the bootstrap sitecustomize) ---------------------------
def bootstrap(spec_text: str) -> None:
    """Called by the bootstrap ``sitecustomize`` with ``AGENT_LATENCY_RUN``'s value."""
    from ._import_times import IMPORTS, startup_attributes
    from ._process import open_process_task, process_name

    IMPORTS.install()  # from here on imports are timed; before, interpreter start-up
    spec = json.loads(spec_text)
    child = int(spec.get("depth", 0)) > 0
    if spec.get("children"):
        # Children inherit the bootstrap, marked as children: no summary line of theirs.
        os.environ[semconv.ENV_RUN] = json.dumps({**spec, "depth": int(spec.get("depth", 0)) + 1},
                                                 separators=(",", ":"))
    from . import configure
    from .configure import instrument

    # The service is the run's (children under --children included: one service, so one
    # host's spans are never compared for clock skew), unless OTEL_* names one.
    configure.default_service_name = str(spec.get("name") or "") or None
    # Our own process task below, not instrument()'s implicit one.
    if child:
        name = process_name()
        start_ns = time.time_ns()
        if not instrument(summary=False, process_task=False):
            return
    else:
        name = str(spec.get("name") or "python")
        start_ns = int(spec.get("start_ns") or time.time_ns())
        if not instrument(summary=True, process_task=False):
            return
    startup = startup_attributes(start_ns) if not child else {}
    open_process_task(name, start_ns, {semconv.RUN_TASK: True, **startup})
