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


def _run(program: str, tmp_path: Path,
         args: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    script = tmp_path / "prog.py"
    script.write_text(program)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "AGENT_LAT", "PYTHON"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    env[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    env[semconv.ENV_PROCESS_TASK] = "false"
    proc = subprocess.run([sys.executable, str(script), *args], check=False, env=env,
                          cwd=tmp_path,
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


# Model calls from eight greenlets at once (four streamed), each SDK's first request running
# ``uname -p`` in a process of its own (``platform.processor()`` for its headers), and a
# POST by urllib with a timeout (gevent's ``sendall`` calls ``send(..., timeout=)``).
GREENLET_CALLS = """\
import json, sys, time, urllib.request
import gevent, openai
base = sys.argv[1]
body = json.dumps({"model": "sim-a", "max_tokens": 4,
                   "messages": [{"role": "user", "content": "hi"}]}).encode()
request = urllib.request.Request(base + "/v1/chat/completions", data=body,
                                 headers={"content-type": "application/json"})
print("urlopen", urllib.request.urlopen(request, timeout=5).status)
client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0, timeout=5)
done = []
def one(i):
    reply = client.chat.completions.create(
        model="sim-a", messages=[{"role": "user", "content": "hi"}], stream=i % 2 == 0,
        max_tokens=4)
    if i % 2 == 0:
        for _ in reply:
            pass
    done.append(i)
started = time.perf_counter()
gevent.joinall([gevent.spawn(one, i) for i in range(8)], timeout=30)
print(f"{len(done)} of 8 in {time.perf_counter() - started:.2f}")
"""


@pytest.fixture(scope="module")
def sim():
    from agent_latency.simulator import SimulatorConfig, SimulatorProcess

    fast = SimulatorConfig(prefill_tps=20000.0, output_tps=1000.0, default_output_tokens=8)
    with SimulatorProcess(fast) as server:
        yield server


def _finished(proc: subprocess.CompletedProcess[str]) -> tuple[int, float]:
    line = next(line for line in proc.stdout.splitlines() if " of 8 in " in line)
    count, _, _, _, seconds = line.split()
    return int(count), float(seconds)


class TestModelCallsFromGreenlets:
    """Model calls and urllib under gevent: sent once (urllib's ``send`` keyword), never
    waiting on gevent's hub for the kernel's stamps, and a process forked from one greenlet
    runs none of the others in the child (the SDK's fork hooks yield to the hub)."""

    @pytest.mark.parametrize("order", ["patched-first", "instrumented-first"])
    def test_all_finish_at_once(self, tmp_path: Path, sim, order: str) -> None:
        # urllib imported before instrument(): its socket patch is applied at once.
        program = ("import urllib.request\n" + PATCH + INSTRUMENT
                   if order == "patched-first" else INSTRUMENT + PATCH) + GREENLET_CALLS
        proc, spans = _run(program, tmp_path, (sim.base_url,))
        assert proc.returncode == 0, proc.stderr
        assert "urlopen 200" in proc.stdout, proc.stderr
        count, seconds = _finished(proc)
        assert count == 8, proc.stderr
        # Without the library 8 of 8 take about 0.4 s here; a child running the others'
        # calls took 12 to 15 s, a wait on the hub for ever.
        assert seconds < 8.0, proc.stdout
        assert "AssertionError" not in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        calls = [s for s in spans if s["name"].startswith("chat ")]
        # Eight from the SDK; patched first, one more recognised on urllib's socket (patched
        # late, gevent's socket class replaces the one the socket layer patched).
        assert len(calls) == (9 if order == "patched-first" else 8)

    def test_urllib_imported_after_instrument(self, tmp_path: Path, sim) -> None:
        # wrapt imports asyncio while our own modules load: the socket layer still applies.
        proc, spans = _run(PATCH + INSTRUMENT + GREENLET_CALLS, tmp_path, (sim.base_url,))
        assert proc.returncode == 0, proc.stderr
        assert "urlopen 200" in proc.stdout
        assert len([s for s in spans if s["name"].startswith("chat ")]) == 9
