"""instrument(): the local default, OTLP from the environment, and the host's own providers."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

AGENT = textwrap.dedent("""
    import time, agent_latency
    agent_latency.instrument()
    with agent_latency.task("fix-tests"):
        with agent_latency.tool("pytest"):
            time.sleep(0.05)
        time.sleep(0.01)
""")


def run_python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    # The tasks are the program's own (tests/test_process_task.py: the process as a task).
    full_env["AGENT_LATENCY_PROCESS_TASK"] = "false"
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=full_env,
                          capture_output=True, text=True, timeout=60)


def read_jsonl_spans(path: Path) -> list[dict]:
    spans = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                spans.extend(ss["spans"])
    return spans


def attrs(span: dict) -> dict:
    out = {}
    for kv in span.get("attributes", []):
        value = kv["value"]
        out[kv["key"]] = next(iter(value.values())) if value else None
    return out


class TestLocalDefault:
    """With nothing configured: a JSONL file and one summary line per task."""

    def test_summary_line_and_jsonl_file(self, tmp_path):
        result = run_python(AGENT, tmp_path)
        assert result.returncode == 0, result.stderr
        line = [x for x in result.stderr.splitlines() if x.startswith("task fix-tests")]
        assert len(line) == 1, result.stderr
        spans = read_jsonl_spans(tmp_path / ".agent-latency" / "traces.jsonl")
        names = sorted(s["name"] for s in spans)
        assert names == ["execute_tool pytest", "invoke_agent fix-tests"]
        task = next(s for s in spans if s["name"].startswith("invoke_agent"))
        tool = next(s for s in spans if s["name"].startswith("execute_tool"))
        tool_seconds = (int(tool["endTimeUnixNano"]) - int(tool["startTimeUnixNano"])) / 1e9
        # The line shows the tool's own time (0.05 s of sleep, more on a busy machine).
        assert f"= output 0.00 | prefill 0.00 | tools {tool_seconds:.2f} | network 0.00 | " \
               "other" in line[0], (line[0], tool_seconds)
        a = attrs(task)
        assert a["agent_latency.budget.tool_execution"] == pytest.approx(tool_seconds, abs=1e-6)
        assert len(task["traceId"]) == 32 and len(task["spanId"]) == 16
        int(task["traceId"], 16)

    def test_output_dir_and_summary_switch(self, tmp_path):
        result = run_python(AGENT, tmp_path, AGENT_LATENCY_DIR="out",
                            AGENT_LATENCY_SUMMARY="false")
        assert result.returncode == 0, result.stderr
        assert "task fix-tests" not in result.stderr
        assert (tmp_path / "out" / "traces.jsonl").exists()

    def test_unwritable_directory_is_one_warning_and_the_program_goes_on(self, tmp_path):
        (tmp_path / "blocker").write_text("a file, not a directory")
        result = run_python(AGENT + "\nprint('still here')", tmp_path,
                            AGENT_LATENCY_DIR="blocker/sub")
        assert result.returncode == 0
        assert "still here" in result.stdout
        assert result.stderr.count("cannot write spans") == 1

    def test_task_left_open_at_exit_is_ended_with_its_budget(self, tmp_path):
        code = textwrap.dedent("""
            import time, agent_latency
            agent_latency.instrument()
            agent_latency.task("never-closed").__enter__()
            with agent_latency.tool("t"):
                time.sleep(0.02)
        """)
        result = run_python(code, tmp_path)
        assert result.returncode == 0, result.stderr
        assert "still open at exit" in result.stderr
        assert "task never-closed" in result.stderr
        spans = read_jsonl_spans(tmp_path / ".agent-latency" / "traces.jsonl")
        assert any(s["name"] == "invoke_agent never-closed" for s in spans)


class TestDisabled:
    """OTEL_SDK_DISABLED turns everything off."""

    def test_sdk_disabled(self, tmp_path):
        code = AGENT + "\nprint(agent_latency.is_instrumented())"
        result = run_python(code, tmp_path, OTEL_SDK_DISABLED="true")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "False"
        assert not (tmp_path / ".agent-latency").exists()
        assert "task fix-tests" not in result.stderr


class TestHostProviders:
    """A provider the program set is kept, and gets our processor."""

    def test_host_provider_is_not_replaced_and_gets_budgets(self, tmp_path):
        code = textwrap.dedent("""
            import time, agent_latency
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            agent_latency.instrument()
            assert trace.get_tracer_provider() is provider
            with agent_latency.task("mine"):
                with agent_latency.tool("x"):
                    time.sleep(0.02)
            spans = exporter.get_finished_spans()
            span = [s for s in spans if s.name == "invoke_agent mine"][0]
            tool = [s for s in spans if s.name == "execute_tool x"][0]
            print(span.attributes["agent_latency.budget.tool_execution"],
                  (tool.end_time - tool.start_time) / 1e9)
        """)
        result = run_python(code, tmp_path)
        assert result.returncode == 0, result.stderr
        share, tool_seconds = map(float, result.stdout.split())
        assert share == pytest.approx(tool_seconds, abs=1e-6) and share >= 0.02
        assert not (tmp_path / ".agent-latency").exists()
        assert "task mine" not in result.stderr  # no summary unless asked

    def test_host_meter_provider_receives_task_duration(self, tmp_path):
        code = textwrap.dedent("""
            import agent_latency
            from opentelemetry import metrics
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader
            reader = InMemoryMetricReader()
            metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
            agent_latency.instrument()
            with agent_latency.task("m"):
                pass
            names = {m.name for rm in reader.get_metrics_data().resource_metrics
                     for sm in rm.scope_metrics for m in sm.metrics}
            print("agent_latency.task.duration" in names)
        """)
        result = run_python(code, tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "True"


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]] = []

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.bodies.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def otlp_receiver():
    _Receiver.bodies = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", _Receiver.bodies
    server.shutdown()


class TestOtlpFromEnvironment:
    """OTEL_EXPORTER_OTLP_* send spans and metrics to a real OTLP/HTTP receiver."""

    def test_spans_and_metrics_reach_the_endpoint(self, tmp_path, otlp_receiver):
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        endpoint, bodies = otlp_receiver
        result = run_python(AGENT, tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
                            OTEL_SERVICE_NAME="my-agent")
        assert result.returncode == 0, result.stderr
        assert not (tmp_path / ".agent-latency").exists()
        traces = [b for p, b in bodies if p == "/v1/traces"]
        names, services = [], set()
        for body in traces:
            req = ExportTraceServiceRequest.FromString(body)
            for rs in req.resource_spans:
                services.update(a.value.string_value for a in rs.resource.attributes
                                if a.key == "service.name")
                for ss in rs.scope_spans:
                    names.extend(s.name for s in ss.spans)
        assert sorted(names) == ["execute_tool pytest", "invoke_agent fix-tests"]
        assert services == {"my-agent"}
        metric_names = set()
        for p, body in bodies:
            if p == "/v1/metrics":
                req = ExportMetricsServiceRequest.FromString(body)
                metric_names.update(m.name for rm in req.resource_metrics
                                    for sm in rm.scope_metrics for m in sm.metrics)
        assert "agent_latency.task.duration" in metric_names

    def test_backend_down_loses_nothing_of_the_program(self, tmp_path):
        result = run_python(AGENT + "\nprint('done')", tmp_path,
                            OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
                            OTEL_EXPORTER_OTLP_TIMEOUT="1")
        assert result.returncode == 0
        assert "done" in result.stdout


class TestUninstrument:
    """uninstrument() stops budgets; instrument() twice is harmless."""

    def test_uninstrument_stops_budgets(self, tmp_path):
        code = textwrap.dedent("""
            import agent_latency
            assert agent_latency.instrument() and agent_latency.instrument()
            with agent_latency.task("before"):
                pass
            agent_latency.uninstrument()
            print(agent_latency.is_instrumented())
            with agent_latency.task("after"):
                pass
        """)
        result = run_python(code, tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "False"
        assert "task before" in result.stderr and "task after" not in result.stderr
        spans = read_jsonl_spans(tmp_path / ".agent-latency" / "traces.jsonl")
        after = next(s for s in spans if s["name"] == "invoke_agent after")
        assert "agent_latency.budget.wall" not in attrs(after)

    def test_bad_numbers_in_environment_keep_defaults(self, tmp_path):
        result = run_python(AGENT, tmp_path, AGENT_LATENCY_MAX_OPEN_TASKS="many",
                            AGENT_LATENCY_SUMMARY="maybe")
        assert result.returncode == 0, result.stderr
        assert "AGENT_LATENCY_MAX_OPEN_TASKS='many' is not a positive number" in result.stderr
        assert "AGENT_LATENCY_SUMMARY='maybe' is not a boolean" in result.stderr
        assert "task fix-tests" in result.stderr
