"""``os.fork()`` warns (Python 3.12+: "This process … is multi-threaded") only where the
program's own threads would make it warn: our export worker and arrival watcher stop for
the fork and start again after it, in the parent and in the child."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_exit_pythons import INTERPRETERS, _env, _venv_for

# The export worker runs (a task was exported) and the arrival watcher watches a
# connection, as after a streamed model call; then the program forks twice, each child
# records a task of its own, and one more task ends in the parent after the forks.
PROGRAM = """\
import os, socket, sys, threading, warnings
warnings.simplefilter("always", DeprecationWarning)
import agent_latency
from agent_latency.instrumentation.net._arrivals import Arrivals
from agent_latency.instrumentation.net._watcher import WATCHER
agent_latency.instrument()
with agent_latency.task("before"):
    pass
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
WATCHER.watch(Arrivals(client))
names = sorted(t.name for t in threading.enumerate())
print("threads", names, flush=True)
if "--own-thread" in sys.argv:
    threading.Thread(target=threading.Event().wait, daemon=True).start()
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        with agent_latency.task("child"):
            pass
        sys.exit(0)
    os.waitpid(pid, 0)
with agent_latency.task("after"):
    pass
print("threads after", sorted(t.name for t in threading.enumerate()), flush=True)
"""


@pytest.fixture(params=[pytest.param(None, id="this"), *INTERPRETERS])
def python(request: pytest.FixtureRequest) -> str:
    if request.param is None:
        return sys.executable
    return str(_venv_for(request.param))


def _run(python: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    return subprocess.run([python, str(script), *args], check=False,
                          env=_env(tmp_path, AGENT_LATENCY_PROCESS_TASK="false"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


def _version(python: str) -> tuple[int, int]:
    out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


class TestForkWithOnlyOurThreads:
    """Our threads never make the program's fork warn; its own still do."""

    def test_no_warning_and_everything_exported(self, python: str, tmp_path: Path) -> None:
        proc = _run(python, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "agent-latency-watcher" in proc.stdout  # both of ours ran before the fork
        assert "multi-threaded" not in proc.stderr, proc.stderr
        # Both running again after the forks.
        after = next(line for line in proc.stdout.splitlines() if "threads after" in line)
        assert "agent-latency-watcher" in after and "OtelBatchSpanRecordProcessor" in after
        traces = (tmp_path / "out" / "traces.jsonl").read_text()
        assert traces.count("invoke_agent child") == 2
        assert "invoke_agent before" in traces and "invoke_agent after" in traces

    def test_the_programs_own_thread_still_warns(self, python: str, tmp_path: Path) -> None:
        if _version(python) < (3, 12):
            pytest.skip("Python 3.12 added the warning")
        proc = _run(python, tmp_path, "--own-thread")
        assert "multi-threaded" in proc.stderr, proc.stderr
