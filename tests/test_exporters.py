"""Exporters by name through OpenTelemetry's entry points, backends that are down, slow or
take no metrics, and providers other tools set up first."""

from __future__ import annotations

import gzip
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

AGENT = textwrap.dedent("""
    import time, agent_latency
    agent_latency.instrument()
    with agent_latency.task("fix-tests"):
        with agent_latency.tool("pytest"):
            time.sleep(0.02)
""")


def run_python(code: str, cwd: Path, timeout: float = 60, **env: str
               ) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    full_env["AGENT_LATENCY_PROCESS_TASK"] = "false"
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@dataclass
class Backend:
    """An OTLP/HTTP receiver on 127.0.0.1 that answers each path with a chosen status."""

    url: str
    status: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[str, bytes]] = field(default_factory=list)

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]


def _serve(status: dict[str, int]) -> tuple[ThreadingHTTPServer, Backend]:
    backend = Backend("", status)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            backend.requests.append((self.path, body))
            self.send_response(backend.status.get(self.path, 200))
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    backend.url = f"http://127.0.0.1:{server.server_port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, backend


@pytest.fixture
def backend() -> Iterator[Backend]:
    server, made = _serve({})
    yield made
    server.shutdown()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TestNone:
    """``none`` means nothing leaves the process, whatever else is configured."""

    @pytest.mark.parametrize("env", [
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"},
        {"OTEL_TRACES_EXPORTER": "none,", "OTEL_METRICS_EXPORTER": " none "},
        {"OTEL_SDK_DISABLED": "true"},
    ], ids=["none", "empty-list", "sdk-disabled"])
    def test_a_listener_on_the_otlp_ports_receives_nothing(self, tmp_path, backend, env):
        # The endpoint is set, to our listener, so an exporter that ignored "none" would
        # send there; the default ports (4317 gRPC, 4318 HTTP) listen too.
        listeners = []
        for port in (4317, 4318):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            sock.listen(16)
            sock.settimeout(0)
            listeners.append(sock)
        try:
            result = run_python(AGENT, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=backend.url,
                                OTEL_METRIC_EXPORT_INTERVAL="100", **env)
            assert result.returncode == 0, result.stderr
            assert backend.requests == []
            for sock in listeners:
                with pytest.raises(BlockingIOError):
                    sock.accept()
            assert not (tmp_path / ".agent-latency").exists()
        finally:
            for sock in listeners:
                sock.close()

    def test_the_same_listener_hears_a_program_without_none(self, tmp_path, backend):
        result = run_python(AGENT, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=backend.url)
        assert result.returncode == 0, result.stderr
        assert "/v1/traces" in backend.paths() and "/v1/metrics" in backend.paths()


class TestByName:
    """Every installed exporter works by its entry-point name; a wrong one is one warning."""

    def test_unknown_name_is_one_warning_naming_the_installed_choices(self, tmp_path):
        result = run_python(AGENT, tmp_path, OTEL_TRACES_EXPORTER="nosuch,console",
                            OTEL_METRICS_EXPORTER="nosuch2")
        assert result.returncode == 0, result.stderr
        lines = [x for x in result.stderr.splitlines() if "no installed package" in x]
        assert len(lines) == 2, result.stderr
        assert "'nosuch'" in lines[0] and "console" in lines[0] and "jsonl" in lines[0]
        assert "prometheus" in lines[1]
        assert '"name": "invoke_agent fix-tests"' in result.stdout  # console still exports

    def test_jsonl_by_name_writes_where_it_was_resolved(self, tmp_path):
        code = AGENT.replace("agent_latency.instrument()",
                             "agent_latency.instrument(); import os; os.chdir('elsewhere')")
        (tmp_path / "elsewhere").mkdir()
        result = run_python(code, tmp_path, OTEL_TRACES_EXPORTER="jsonl")
        assert result.returncode == 0, result.stderr
        assert "invoke_agent fix-tests" in (tmp_path / ".agent-latency" / "traces.jsonl"
                                            ).read_text()
        assert not (tmp_path / "elsewhere" / ".agent-latency").exists()

    def test_jsonl_under_opentelemetry_instrument(self, tmp_path):
        # The SDK's own configurator makes our exporter from its entry point; our
        # instrumentor (also an entry point) computes the budgets.
        script = tmp_path / "agent.py"
        script.write_text(AGENT.replace("agent_latency.instrument()\n", ""))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
        env.update(OTEL_TRACES_EXPORTER="jsonl", OTEL_METRICS_EXPORTER="none",
                   OTEL_LOGS_EXPORTER="none", AGENT_LATENCY_PROCESS_TASK="false")
        bindir = Path(sys.executable).parent
        result = subprocess.run([str(bindir / "opentelemetry-instrument"), sys.executable,
                                 str(script)], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        text = (tmp_path / ".agent-latency" / "traces.jsonl").read_text()
        assert "invoke_agent fix-tests" in text
        assert "agent_latency.budget.tool_execution" in text

    def test_prometheus_pull_endpoint_serves_our_metrics(self, tmp_path):
        port = _free_port()
        code = AGENT + textwrap.dedent(f"""
            import urllib.request
            body = urllib.request.urlopen("http://127.0.0.1:{port}/metrics").read().decode()
            print(body)
        """)
        result = run_python(code, tmp_path, OTEL_METRICS_EXPORTER="prometheus",
                            OTEL_TRACES_EXPORTER="none", OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
                            OTEL_EXPORTER_PROMETHEUS_PORT=str(port))
        assert result.returncode == 0, result.stderr
        assert "agent_latency_task_duration_seconds_bucket" in result.stdout
        assert 'agent_latency_component="tool_execution"' in result.stdout


class TestFailingBackends:
    """A backend that is down, black-holed or trace-only: one warning, a bounded exit."""

    def test_refused_backend_is_one_warning_a_count_and_a_bounded_exit(self, tmp_path):
        port = _free_port()  # nothing listens there
        code = textwrap.dedent("""
            import time, agent_latency
            agent_latency.instrument()
            for i in range(3):
                with agent_latency.task(f"t{i}"):
                    with agent_latency.tool("pytest"):
                        time.sleep(0.02)
                time.sleep(0.3)
        """)
        started = time.monotonic()
        result = run_python(code, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                            OTEL_BSP_SCHEDULE_DELAY="100", OTEL_METRIC_EXPORT_INTERVAL="200")
        elapsed = time.monotonic() - started
        assert result.returncode == 0, result.stderr
        warnings = [x for x in result.stderr.splitlines() if x.strip()]
        # Per destination (spans, metrics): the first failure, and the count at exit.
        assert len(warnings) <= 4, result.stderr
        assert sum("cannot export spans" in x for x in warnings) == 1, result.stderr
        assert any("exports of spans" in x and "failed" in x for x in warnings), result.stderr
        # 1 s of program; the exit bound is 2 s; start-up and interpreter exit on a busy box.
        assert elapsed < 1 + 2 + 6, elapsed

    def test_black_holed_backend_exit_is_bounded(self, tmp_path):
        hole = socket.socket()
        hole.bind(("127.0.0.1", 0))
        hole.listen(64)  # accepts connections in the kernel, never reads or answers
        try:
            started = time.monotonic()
            result = run_python(AGENT, tmp_path,
                                OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:"
                                                            f"{hole.getsockname()[1]}",
                                AGENT_LATENCY_EXIT_TIMEOUT="1")
            elapsed = time.monotonic() - started
        finally:
            hole.close()
        assert result.returncode == 0, result.stderr
        assert "did not finish within" in result.stderr
        assert elapsed < 1 + 6, elapsed  # the OTLP timeout alone would be 10 s

    def test_trace_only_backend_says_so_once_and_stops_metrics(self, tmp_path):
        server, made = _serve({"/v1/metrics": 405})
        try:
            code = AGENT + "\ntime.sleep(1.0)\n"
            result = run_python(code, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=made.url,
                                OTEL_METRIC_EXPORT_INTERVAL="100")
        finally:
            server.shutdown()
        assert result.returncode == 0, result.stderr
        assert result.stderr.count("OTEL_METRICS_EXPORTER=none") == 1, result.stderr
        assert "405" in result.stderr
        assert len([x for x in result.stderr.splitlines() if x.strip()]) == 1, result.stderr
        # One refused export, then no more tries, while traces went through.
        assert made.paths().count("/v1/metrics") == 1, made.paths()
        assert "/v1/traces" in made.paths()


class TestOtherToolsProviders:
    """A provider another tool set up keeps every processor it had; ours is added beside."""

    def test_phoenix_register_keeps_its_exporter(self, tmp_path, backend):
        pytest.importorskip("phoenix.otel")
        code = textwrap.dedent(f"""
            import time, agent_latency
            from phoenix.otel import register
            register(endpoint="{backend.url}/v1/traces", protocol="http/protobuf",
                     project_name="budgets", batch=False, verbose=False)
            agent_latency.instrument()
            with agent_latency.task("fix-tests"):
                with agent_latency.tool("pytest"):
                    time.sleep(0.02)
        """)
        result = run_python(code, tmp_path, PHOENIX_COLLECTOR_ENDPOINT=backend.url)
        assert result.returncode == 0, result.stderr
        traces = b"".join(body for path, body in backend.requests if path == "/v1/traces")
        assert b"invoke_agent fix-tests" in traces
        assert b"agent_latency.budget.tool_execution" in traces

    def test_logfire_configure_keeps_its_processors(self, tmp_path):
        pytest.importorskip("logfire")
        code = textwrap.dedent("""
            import time, agent_latency, logfire
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter)
            exporter = InMemorySpanExporter()
            logfire.configure(send_to_logfire=False, console=False,
                              additional_span_processors=[SimpleSpanProcessor(exporter)])
            agent_latency.instrument()
            with agent_latency.task("fix-tests"):
                with agent_latency.tool("pytest"):
                    time.sleep(0.02)
            spans = exporter.get_finished_spans()
            task = [s for s in spans if s.name == "invoke_agent fix-tests"]
            tool = [s for s in spans if s.name == "execute_tool pytest"]
            print(task[0].attributes["agent_latency.budget.tool_execution"],
                  (tool[0].end_time - tool[0].start_time) / 1e9)
        """)
        result = run_python(code, tmp_path)
        assert result.returncode == 0, result.stderr
        # The tool's share is its span (the sleep, however long a loaded machine made it).
        share, tool = map(float, result.stdout.strip().splitlines()[-1].split())
        assert share == pytest.approx(tool, abs=1e-6)
        assert share >= 0.02


def test_prometheus_endpoint_answers_over_http(tmp_path):
    """The pull endpoint stays up while the program runs (what Prometheus scrapes)."""
    port = _free_port()
    code = AGENT + "\nimport time; time.sleep(3)\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env.update(OTEL_METRICS_EXPORTER="prometheus", OTEL_TRACES_EXPORTER="none",
               OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
               OTEL_EXPORTER_PROMETHEUS_PORT=str(port), AGENT_LATENCY_PROCESS_TASK="false")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        body = ""
        while time.monotonic() < deadline and "agent_latency_task_duration" not in body:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                              timeout=2).read().decode()
            except OSError:
                time.sleep(0.1)
        assert "agent_latency_task_duration_seconds_count" in body
    finally:
        child.wait(timeout=30)


BURST = textwrap.dedent("""
    import agent_latency
    agent_latency.instrument()
    with agent_latency.task("burst"):
        for i in range({n}):
            with agent_latency.tool("t"):
                pass
""")
_LOST = re.compile(r"agent-latency: .*?(\d+) spans (?:never reached|lost)")


def _stored_spans(directory: Path) -> list[str]:
    names = []
    for path in directory.glob("traces.jsonl*"):
        for line in path.read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    names += [span["name"] for span in ss["spans"]]
    return names


class TestSpansLostInABurst:
    """Every span that never reaches the destination is counted: at exit on stderr, and in
    the report (a span saying how many)."""

    def test_a_full_queue_is_counted_and_reported(self, tmp_path):
        n = 20_000
        result = run_python(BURST.format(n=n), tmp_path, timeout=180,
                            OTEL_BSP_MAX_QUEUE_SIZE="64", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="64")
        assert result.returncode == 0, result.stderr
        (line,) = [x for x in result.stderr.splitlines() if x.startswith("agent-latency:")]
        assert "a burst filled the export queue (raise OTEL_BSP_MAX_QUEUE_SIZE)" in line, line
        lost = int(_LOST.search(line).group(1))
        stored = _stored_spans(tmp_path / ".agent-latency")
        assert stored.count("agent-latency spans lost") == 1
        assert lost > 0 and len(stored) - 1 + lost == n + 1, (lost, len(stored))
        report = subprocess.run([sys.executable, "-m", "agent_latency", "report"],
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert f"lost {lost:,} spans before export" in report.stderr, report.stderr
        assert "Queue full" not in result.stderr

    def test_a_closed_port_counts_every_span(self, tmp_path):
        n = 5_000
        port = _free_port()  # nothing listens there
        result = run_python(BURST.format(n=n), tmp_path, timeout=180,
                            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                            OTEL_METRICS_EXPORTER="none")
        assert result.returncode == 0, result.stderr
        (line,) = [x for x in result.stderr.splitlines() if _LOST.search(x)]
        # The spans made: the tools, the task and, when the queue dropped some, the span
        # saying so (lost as well: the backend is down).
        made = n + 1 + ("because a burst filled the export queue" in line)
        assert int(_LOST.search(line).group(1)) == made, result.stderr
