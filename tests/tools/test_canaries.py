"""Canary scan: every byte an instrumented agent exports (OTLP/HTTP bodies, the local JSONL
file, the console exporter, a Prometheus endpoint, its stderr) is searched for secrets
planted in the API key, an ``Authorization`` header, URL credentials, prompts, tool
arguments, command lines and environment variables. None appears unless its capture switch
is on; with the switches on, the prompt and command canaries do appear (the scan works)."""

from __future__ import annotations

import gzip
import http.server
import os
import socket
import subprocess
import sys
import threading
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

import agent_latency
from agent_latency.simulator import Simulator, SimulatorConfig

pytest.importorskip("openai")
from canary_agent import READY  # (it imports openai: after the skip)

HERE = Path(__file__).resolve().parent
AGENT = HERE / "canary_agent.py"
SRC = Path(agent_latency.__file__).resolve().parents[1]  # the agent_latency under test

#: Each canary and the switch that may let it out (None: nothing ever may).
CANARIES = {
    "CANARY_KEY": None, "CANARY_AUTH": None, "CANARY_URL": None, "CANARY_ENV": None,
    "CANARY_PROMPT": "content", "CANARY_ARGS": "content", "CANARY_CMD": "command",
}


def _value(name: str) -> str:
    return f"{name.lower().replace('_', '-')}-7d1e9b"


class OtlpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 that keeps every raw request body (decompressed)."""

    __slots__ = ("bodies", "paths", "port", "server")

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                if encoding == "gzip":
                    raw = gzip.decompress(raw)
                elif encoding == "deflate":
                    raw = zlib.decompress(raw)
                receiver.bodies.append(raw)
                receiver.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


#: Seconds the agent may take to make its calls, run its tools and print ``ready``.
READY_TIMEOUT = 120.0


class _Drain:
    """Reads a child's pipe to its end on a thread of its own; ``ready`` is set once
    ``canary_agent.READY`` has been read, wherever it lands, or the pipe closes."""

    __slots__ = ("_chunks", "_thread", "ready")

    def __init__(self, pipe: IO[bytes]) -> None:
        self._chunks: list[bytes] = []
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: IO[bytes]) -> None:
        tail = b""
        for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
            self._chunks.append(chunk)
            if READY in tail + chunk:
                self.ready.set()
            tail = (tail + chunk)[-len(READY):]
        self.ready.set()

    def join(self) -> None:
        """Wait for the pipe's end (the child has exited or been killed)."""
        self._thread.join(timeout=30)

    def data(self) -> bytes:
        """Every byte read so far."""
        return b"".join(self._chunks)

    def text(self) -> str:
        """:meth:`data`, decoded for a failure's message."""
        return self.data().decode(errors="replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _registered(group: str) -> set[str]:
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group=group)}


def _unavailable() -> dict[str, str]:
    """Destinations this environment cannot export to, with why (the scan skips them)."""
    missing = {}
    if "prometheus" not in _registered("opentelemetry_metrics_exporter"):
        missing["prometheus"] = "opentelemetry-exporter-prometheus is not installed"
    if "jsonl" not in _registered("opentelemetry_traces_exporter"):
        missing["jsonl"] = ("agent-latency's 'jsonl' entry point is not registered "
                            "(an install older than pyproject.toml: pip install -e .)")
    return missing


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    """The simulator; its model answers with a tool call whose arguments hold a canary."""
    script = {"turns": [
        {"content": "Checking.", "tool_calls": [{"name": "run_shell", "arguments": {
            "command": f"deploy --key={_value('CANARY_ARGS')}"}}]},
        {"content": "All done."}]}
    with Simulator(SimulatorConfig(prefill_tps=1e6, output_tps=1e5, script=script)) as server:
        yield server


def _run_agent(sim: Simulator, tmp_path: Path, capture: bool) -> dict[str, bytes]:
    """Run the agent in a child process; return every exported byte by where it went."""
    receiver = OtlpReceiver()
    missing = _unavailable()
    prom_skip = missing.get("prometheus")
    prom_port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "AGENT_LATENCY_"))}
    env.update({name: _value(name) for name in CANARIES})
    env.update({
        "PYTHONPATH": os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_EXPORTER": "otlp,console" + ("" if "jsonl" in missing else ",jsonl"),
        "OTEL_METRICS_EXPORTER": "otlp,console" + ("" if prom_skip else ",prometheus"),
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
        "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(prom_port),
        "AGENT_LATENCY_DIR": str(tmp_path / "out"),
        "AGENT_LATENCY_SUMMARY": "true",
        "AGENT_LATENCY_CAPTURE_COMMAND": "true" if capture else "false",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true" if capture else "false",
    })
    proc = subprocess.Popen([sys.executable, str(AGENT), sim.base_url], env=env,
                            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    # Both pipes are read all along: the console exporters write to stdout every 200 ms
    # and the agent may warn on stderr, and a full pipe would block the agent's writer.
    out, err = _Drain(proc.stdout), _Drain(proc.stderr)
    exported: dict[str, bytes] = {}
    try:
        assert out.ready.wait(READY_TIMEOUT) and READY in out.data(), (
            f"the agent wrote no {READY!r} in {READY_TIMEOUT:.0f} s",
            out.text()[-2000:], err.text()[-2000:])
        if prom_skip is None:
            with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/metrics",
                                        timeout=30) as r:
                exported["prometheus"] = r.read()
        proc.stdin.write(b"done\n")
        proc.stdin.close()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.join()
        err.join()
        receiver.close()
    assert proc.returncode == 0, err.text()
    exported["console (stdout)"] = out.data()
    exported["stderr"] = err.data()
    exported["otlp"] = b"".join(receiver.bodies)
    jsonl = tmp_path / "out" / "traces.jsonl"
    exported["jsonl"] = jsonl.read_bytes() if jsonl.exists() else b""
    assert any("/v1/traces" in p for p in receiver.paths), receiver.paths
    assert any("/v1/metrics" in p for p in receiver.paths), receiver.paths
    assert exported["jsonl"] or "jsonl" in missing, "the local JSONL file got no spans"
    assert b"execute_tool" in exported["console (stdout)"]
    if prom_skip is None:
        assert b"gen_ai" in exported["prometheus"] or b"agent_latency" in exported["prometheus"]
    return exported


def _found(exported: dict[str, bytes]) -> dict[str, list[str]]:
    return {name: [where for where, data in exported.items() if _value(name).encode() in data]
            for name in CANARIES}


class TestCanaries:
    """No planted secret in any exported byte unless its switch lets it out."""

    def test_every_destination_included(self) -> None:
        missing = _unavailable()
        if missing:
            pytest.skip("not scanned here: " + "; ".join(f"{k}: {v}" for k, v in missing.items()))

    def test_nothing_leaks_by_default(self, sim, tmp_path) -> None:
        exported = _run_agent(sim, tmp_path, capture=False)
        assert all(exported[k] for k in ("otlp", "console (stdout)"))
        leaks = {name: where for name, where in _found(exported).items() if where}
        assert leaks == {}

    def test_switches_on_let_content_out_and_nothing_else(self, sim, tmp_path) -> None:
        exported = _run_agent(sim, tmp_path, capture=True)
        found = _found(exported)
        for name, switch in CANARIES.items():
            if switch is None:
                assert found[name] == [], (name, found[name])
        # the scan sees what is there: the switched canaries are exported, OTLP included
        files = {"otlp", "console (stdout)"} | ({"jsonl"} - set(_unavailable()))
        assert files <= set(found["CANARY_PROMPT"]), found["CANARY_PROMPT"]
        assert files <= set(found["CANARY_CMD"]), found["CANARY_CMD"]
        # CANARY_ARGS stays out even here: content capture records message text, not the
        # tool calls' arguments (docs/reliability.md)
