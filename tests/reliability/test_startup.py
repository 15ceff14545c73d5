"""Start-up stays light: instrument() imports no instrumentation framework and no target
library; the subprocess instrumentation arrives at the first process, which gets its span."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_latency import semconv

HEAVY = ["wrapt", "opentelemetry.instrumentation", "openai", "anthropic", "httpx",
         "google.protobuf", "rich", "importlib.metadata", "asyncio", "packaging"]


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                          capture_output=True, text=True, check=False, timeout=60)


def _printed(code: str, tmp_path: Path) -> str:
    """What ``code`` printed, run as its own program (which must exit 0)."""
    proc = _run(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


class TestLightStart:
    """What instrument() leaves out of the process until it is needed."""

    def test_no_heavy_imports(self, tmp_path: Path) -> None:
        printed = _printed("import sys, json, agent_latency\nagent_latency.instrument()\n"
                           f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))",
                           tmp_path)
        assert json.loads(printed) == []

    def test_the_sdk_shape_module_leaves_the_metrics_sdk_out(self, tmp_path: Path) -> None:
        # _sdk.py is imported with the first span processed or library patched: what it
        # checks of the metrics SDK waits for a histogram (the metrics SDK is ~30 modules).
        assert _printed("import sys, agent_latency\nagent_latency.instrument()\n"
                        "import agent_latency._sdk\n"
                        "print('opentelemetry.sdk.metrics' in sys.modules)",
                        tmp_path) == "False"

    def test_library_patched_when_imported_later(self, tmp_path: Path) -> None:
        assert _printed("import agent_latency\nagent_latency.instrument()\nimport httpx\n"
                        "from agent_latency.instrumentation.httpx import HttpxInstrumentor\n"
                        "print(HttpxInstrumentor().is_instrumented_by_opentelemetry)",
                        tmp_path) == "True"


class TestFirstSpawn:
    """The first process, by any route, already gets its span; threads carry the task
    before any process was started."""

    def test_first_process_has_its_span(self, tmp_path: Path) -> None:
        code = """
import os, subprocess, sys, threading, agent_latency
agent_latency.instrument()
with agent_latency.task("t"):
    def in_thread():
        with agent_latency.tool("threaded"):
            pass
    t = threading.Thread(target=in_thread); t.start(); t.join()
    subprocess.run(["true"], check=True)
    subprocess.run(["sh", "-c", "exit 0"], check=True)
    assert os.system("exit 3") >> 8 == 3
agent_latency.uninstrument()
import subprocess as s
assert s.Popen._execute_child.__qualname__ == "Popen._execute_child", s.Popen._execute_child
"""
        proc = _run(code, tmp_path)
        assert proc.returncode == 0, proc.stderr
        lines = (tmp_path / "out" / "traces.jsonl").read_text().splitlines()
        spans = [s for line in lines for rs in json.loads(line)["resourceSpans"]
                 for ss in rs["scopeSpans"] for s in ss["spans"]]
        task_id = next(s["spanId"] for s in spans if s["name"] == "invoke_agent t")
        tools = sorted(s["name"] for s in spans if s["name"].startswith("execute_tool"))
        # a shell command is named after its first word
        assert tools == ["execute_tool exit", "execute_tool exit", "execute_tool threaded",
                         "execute_tool true"]
        assert all(s["parentSpanId"] == task_id for s in spans
                   if s["name"].startswith("execute_tool"))
