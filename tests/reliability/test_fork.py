"""Forked children start clean (no second end of the parent's tasks) and their own spans,
multiprocessing workers' included, reach the exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent_latency import semconv

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")

WORK = """
import multiprocessing, os, sys, concurrent.futures, subprocess
import agent_latency

def work(i):
    with agent_latency.task(f"w{i}"):
        with agent_latency.tool("t"):
            pass
    return i
"""

POOL = WORK + """
def main():
    ctx = multiprocessing.get_context(sys.argv[1])
    with agent_latency.task("main"):
        with agent_latency.tool("before"):
            pass
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])  # unwaited
        if sys.argv[2] == "pool":
            with ctx.Pool(2) as pool:
                assert pool.map(work, range(4)) == list(range(4))
        elif sys.argv[2] == "executor":
            with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as executor:
                assert list(executor.map(work, range(4))) == list(range(4))
        else:
            pid = os.fork()
            if pid == 0:
                work(0)
                sys.exit(0)  # a plain fork that exits normally: atexit hooks run
            os.waitpid(pid, 0)

if __name__ == "__main__":
    {instrument}
    main()
"""


def _spans(path: Path) -> list[dict[str, Any]]:
    spans = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line).get("resourceSpans", ()):
            for ss in rs.get("scopeSpans", ()):
                spans.extend(ss.get("spans", ()))
    return spans


def _run(tmp_path: Path, args: list[str], *, under_run: bool) -> tuple[list[dict[str, Any]], str]:
    script = tmp_path / "prog.py"
    instrument = "pass" if under_run else "agent_latency.instrument()"
    # spawn workers re-import the script as __mp_main__: instrument them at import there too
    script.write_text(POOL.replace("{instrument}", instrument) + (
        "" if under_run else "\nif __name__ == '__mp_main__':\n    agent_latency.instrument()\n"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    cmd = [sys.executable, str(script), *args]
    if under_run:
        cmd = [sys.executable, "-m", "agent_latency", "run", "--", *cmd]
    proc = subprocess.run(cmd, check=False, env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return _spans(tmp_path / "out" / "traces.jsonl"), proc.stderr


def _check(spans: list[dict[str, Any]], stderr: str, workers: int) -> None:
    ids = Counter(s["spanId"] for s in spans)
    assert not [i for i, n in ids.items() if n > 1], "a span was ended twice"
    names = Counter(s["name"] for s in spans)
    assert names["invoke_agent main"] == 1, names
    # the parent's process task once (a spawn worker is a fresh interpreter: its own
    # process task is "python -c")
    assert names["invoke_agent prog"] == 1, names
    # every worker's task reached the file, with its tool
    assert sum(names[f"invoke_agent w{i}"] for i in range(4)) == workers, names
    assert names["execute_tool t"] == workers, names
    assert names["execute_tool before"] == 1
    assert stderr.count("task main ") == 1, stderr
    assert stderr.count("task prog ") <= 1, stderr


class TestForkedWorkers:
    """multiprocessing fork/spawn, ProcessPoolExecutor and a bare fork: one end per span."""

    @pytest.mark.parametrize("method", ["fork", "spawn"])
    @pytest.mark.parametrize("kind", ["pool", "executor"])
    def test_instrument(self, tmp_path: Path, method: str, kind: str) -> None:
        spans, stderr = _run(tmp_path, [method, kind], under_run=False)
        _check(spans, stderr, 4)

    def test_bare_fork(self, tmp_path: Path) -> None:
        spans, stderr = _run(tmp_path, ["fork", "bare"], under_run=False)
        _check(spans, stderr, 1)

    @pytest.mark.parametrize("kind", ["pool", "executor", "bare"])
    def test_agent_latency_run_fork(self, tmp_path: Path, kind: str) -> None:
        spans, stderr = _run(tmp_path, ["fork", kind], under_run=True)
        _check(spans, stderr, 1 if kind == "bare" else 4)
        names = Counter(s["name"] for s in spans)
        assert names["invoke_agent prog"] == 1, names
        assert stderr.count("task prog ") == 1, stderr
