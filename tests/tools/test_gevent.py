"""gevent: instrument() before or after monkey.patch_all() works, greenlets carry the task,
and processes started from greenlets never hang.  Each case runs in a fresh interpreter:
monkey-patching cannot be undone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import semconv

pytest.importorskip("gevent")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX processes")

ROOT = Path(__file__).resolve().parents[2]
PATCH = "from gevent import monkey; monkey.patch_all()\n"
INSTRUMENT = "import agent_latency\nagent_latency.instrument()\n"
# Processes from the main greenlet, from spawned greenlets, from a pool and from a thread,
# and a tool() in a greenlet, all inside one task.  One greenlet forks at a time: with
# several runnable, a child forked from one runs the others until it execs (the SDK's
# batch processor restarts its thread in the child and gevent's thread start yields to the
# hub: docs/reliability.md), which would start their processes twice.
WORK = """\
import subprocess, threading, gevent, gevent.pool
import agent_latency
with agent_latency.task("green"):
    subprocess.run(["true"])
    for _ in range(3):
        gevent.spawn(subprocess.run, ["sleep", "0.05"]).join()
    gevent.spawn_later(0.01, subprocess.run, ["true"]).join()
    pool = gevent.pool.Pool(1)
    pool.map(lambda _: subprocess.run(["true"]), range(2))
    def in_a_tool():
        with agent_latency.tool("green-tool"):
            gevent.sleep(0.01)
    gevent.spawn(in_a_tool).join()
    thread = threading.Thread(target=subprocess.run, args=(["true"],))
    thread.start()
    thread.join()
print("finished")
"""


def _run(program: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    script = tmp_path / "prog.py"
    script.write_text(program)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "AGENT_LAT", "PYTHON"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    env[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    env[semconv.ENV_PROCESS_TASK] = "false"
    proc = subprocess.run([sys.executable, str(script)], check=False, env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    spans = []
    path = tmp_path / "out" / "traces.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans.extend(ss["spans"])
    return proc, spans


def _task_and_children(spans: list[dict]) -> tuple[dict, list[str]]:
    task = next(s for s in spans if s["name"] == "invoke_agent green")
    children = sorted(s["name"] for s in spans if s.get("parentSpanId") == task["spanId"])
    return task, children


def _attribute(span: dict, key: str) -> object:
    for attr in span["attributes"]:
        if attr["key"] == key:
            return next(iter(attr["value"].values()))
    return None


class TestPatchedFirst:
    """monkey.patch_all() then instrument(): the supported order, everything counted."""

    def test_every_greenlet_and_thread_counts_in_the_task(self, tmp_path: Path) -> None:
        proc, spans = _run(PATCH + INSTRUMENT + WORK, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "finished" in proc.stdout
        assert "Traceback" not in proc.stderr and "KeyError" not in proc.stderr, proc.stderr
        task, children = _task_and_children(spans)
        assert children == sorted(["execute_tool true"] * 5 + ["execute_tool sleep"] * 3
                                  + ["execute_tool green-tool"]), children
        assert int(_attribute(task, semconv.budget_count("tool_calls"))) == 9


class TestInstrumentedFirst:
    """instrument() then monkey.patch_all(): no hang, one warning, spans still exported."""

    def test_processes_from_greenlets_do_not_hang(self, tmp_path: Path) -> None:
        proc, spans = _run(INSTRUMENT + PATCH + WORK, tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "finished" in proc.stdout
        assert proc.stderr.count("monkey.patch_all() ran after") == 1, proc.stderr
        _, children = _task_and_children(spans)
        # Greenlets carry the task: the tool() in one is the task's child.
        assert "execute_tool green-tool" in children


class TestThreadPatchOnASubclass:
    """The thread-context patch finds ``start`` where it is defined (gevent's Thread class
    inherits it) and puts back exactly what was there."""

    def test_applies_and_removes_on_an_inheriting_class(self, monkeypatch) -> None:
        import threading

        from agent_latency.instrumentation.tools import _threads

        class Inherits(threading.Thread):
            pass

        before = dict(threading.Thread.__dict__)
        monkeypatch.setattr(_threads, "_PATCHES", ((Inherits, "start", _threads._start),))
        _threads._apply()
        try:
            assert "start" not in Inherits.__dict__
            assert threading.Thread.__dict__["start"] is not before["start"]
        finally:
            _threads._remove()
        assert threading.Thread.__dict__["start"] is before["start"]
        assert "start" not in Inherits.__dict__
