"""A SERVER span that serves a request with LLM calls or tools in it is a task of its own."""

from __future__ import annotations

import http.client
import io
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import agent_latency
from agent_latency import BudgetSpanProcessor, semconv
from agent_latency._local import JsonLinesSpanExporter, TaskSummaryPrinter
from agent_latency.instrumentation import _all
from agent_latency.processor import _set_on_ended_span
from agent_latency.report import read_spans
from agent_latency.simulator import Simulator, SimulatorConfig

SERVER_NAME = "POST /chat"


@pytest.fixture(scope="module")
def sim():
    with Simulator(SimulatorConfig(output_tps=2000, prefill_tps=50000,
                                   default_output_tokens=20)) as s:
        yield s


@pytest.fixture
def llm_otel(otel):
    instrumentors = _all.instrument_all(["httpx", "openai"])
    yield otel
    for i in reversed(instrumentors):
        i.uninstrument()


class _AgentHandler(BaseHTTPRequestHandler):
    """``POST /chat`` asks the model once; ``GET /health`` does no agent work.  Each request
    is a SERVER span whose parent comes from the request's headers, as a server
    instrumentation (ASGI, WSGI) makes it."""

    base_url = ""

    def do_POST(self) -> None:
        import openai

        self.rfile.read(int(self.headers.get("content-length") or 0))
        with self._server_span(SERVER_NAME):
            client = openai.OpenAI(base_url=self.base_url + "/v1", api_key="sk-test")
            answer = client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
            self._reply(answer.choices[0].message.content or "")

    def do_GET(self) -> None:
        with self._server_span("GET /health"):
            self._reply("ok")

    def _server_span(self, name: str):  # type: ignore[no-untyped-def]
        parent = propagate.extract(dict(self.headers))
        return trace.get_tracer("test-server").start_as_current_span(
            name, context=parent, kind=SpanKind.SERVER)

    def _reply(self, text: str) -> None:
        body = text.encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(sim):
    handler = type("Handler", (_AgentHandler,), {"base_url": sim.base_url})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def request(port: int, method: str, path: str, headers: dict[str, str] | None = None) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=b"{}" if method == "POST" else None,
                     headers=headers or {})
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def eventually(found, count: int):  # type: ignore[no-untyped-def]
    """``found()`` once it has ``count`` items (or after 10 s): the handler's thread ends its
    span, and the processors see it, after the response is out, so the client is earlier."""
    deadline = time.monotonic() + 10
    while len(items := found()) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    return items


def server_spans(otel, name: str = SERVER_NAME, count: int = 1):
    return eventually(lambda: [s for s in otel.spans()
                               if s.name == name and s.kind is SpanKind.SERVER], count)


def assert_request_task(span) -> None:
    a = span.attributes
    assert a[semconv.TASK_NAME] == span.name
    assert a[semconv.budget_count("llm_calls")] == 1
    assert sum(a[semconv.budget_share(c)] for c in semconv.COMPONENTS) == pytest.approx(
        a[semconv.BUDGET_WALL], abs=1e-9)
    assert a[semconv.BUDGET_WALL] == pytest.approx((span.end_time - span.start_time) / 1e9)
    assert a[semconv.budget_share(semconv.PREFILL)] > 0


class TestRequestTasks:
    """Each request that makes an LLM call gets its own budget; one that makes none, nothing."""

    def test_two_requests_are_two_tasks(self, llm_otel, server):
        printed = io.StringIO()
        llm_otel.provider.add_span_processor(TaskSummaryPrinter(printed))
        assert request(server, "POST", "/chat") and request(server, "POST", "/chat")
        spans = server_spans(llm_otel, count=2)
        assert len(spans) == 2
        for span in spans:
            assert_request_task(span)
            chat = [s for s in llm_otel.spans() if s.name.startswith("chat ")
                    and s.parent.span_id == span.context.span_id]
            assert len(chat) == 1
        lines = eventually(lambda: printed.getvalue().splitlines(), 2)
        assert [line.split(" = ")[0].rsplit(" ", 1)[0] for line in lines] == [
            f"task {SERVER_NAME}"] * 2
        counts = [p.count for p in llm_otel.metric_points(semconv.METRIC_TASK_DURATION)]
        assert counts == [2] * len(semconv.COMPONENTS)

    def test_request_without_agent_work_is_not_a_task(self, llm_otel, server):
        assert request(server, "GET", "/health") == "ok"
        [span] = server_spans(llm_otel, "GET /health")
        assert not any(k.startswith(("agent_latency.", "gen_ai.")) for k in span.attributes)
        assert llm_otel.metric_points(semconv.METRIC_TASK_DURATION) == []

    def test_remote_parent_is_still_a_request_task(self, llm_otel, server):
        remote = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        request(server, "POST", "/chat", {"traceparent": remote})
        [span] = server_spans(llm_otel)
        assert span.parent.is_remote and f"{span.parent.span_id:016x}" == remote.split("-")[2]
        assert_request_task(span)


class TestNotARequestTask:
    """A SERVER span inside a task, or under a parent of this process, counts in that task."""

    @pytest.mark.parametrize("around", ["task", "local span"])
    def test_server_span_with_a_local_parent(self, otel, around):
        tracer = trace.get_tracer("test-server")
        outer = (agent_latency.task("t") if around == "task"
                 else tracer.start_as_current_span("outer"))
        with outer, tracer.start_as_current_span("handle", kind=SpanKind.SERVER):
            with agent_latency.tool("grep"):
                pass
        assert semconv.TASK_NAME not in otel.span("handle").attributes
        if around == "task":
            task = otel.span("invoke_agent t")
            assert task.attributes[semconv.budget_count("tool_calls")] == 1
            assert task.attributes[semconv.budget_count("subtasks")] == 0


def _provider_with(*processors) -> TracerProvider:
    provider = TracerProvider()
    for processor in processors:
        provider.add_span_processor(processor)
    return provider


def _serve_with_a_tool(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("test-server")
    with tracer.start_as_current_span("GET /fix", kind=SpanKind.SERVER):
        with tracer.start_as_current_span(
                "execute_tool pytest", attributes={semconv.COMPONENT: semconv.TOOL_EXECUTION}):
            pass


class TestBudgetReachesExporters:
    """The budget written onto the ended SERVER span is what every exporter exports."""

    @pytest.mark.parametrize("budget_first", [True, False])
    def test_in_memory_exporter_before_or_after_us(self, budget_first):
        exporter, budget = InMemorySpanExporter(), BudgetSpanProcessor()
        export = SimpleSpanProcessor(exporter)
        provider = _provider_with(*((budget, export) if budget_first else (export, budget)))
        try:
            _serve_with_a_tool(provider)
        finally:
            budget.shutdown()
        span = next(s for s in exporter.get_finished_spans() if s.name == "GET /fix")
        assert span.attributes[semconv.TASK_NAME] == "GET /fix"
        assert span.attributes[semconv.budget_count("tool_calls")] == 1

    def test_jsonl_file_exporter(self, tmp_path):
        path = tmp_path / "traces.jsonl"
        budget = BudgetSpanProcessor()
        provider = _provider_with(budget, BatchSpanProcessor(JsonLinesSpanExporter(path)))
        try:
            _serve_with_a_tool(provider)
            provider.force_flush()
        finally:
            budget.shutdown()
        span = next(s for s in read_spans(path).spans if s.name == "GET /fix")
        assert span.attributes[semconv.TASK_NAME] == "GET /fix"
        assert span.attributes[semconv.BUDGET_WALL] > 0


class TestSetOnEndedSpan:
    """The one write to the SDK's private attribute storage, and its fallback."""

    def test_plain_dict_storage(self):
        span = type("S", (), {"_attributes": {"a": 1}})()
        assert _set_on_ended_span(span, {"b": 2}) is True
        assert span._attributes == {"a": 1, "b": 2}

    def test_unknown_storage_writes_nothing_with_one_warning(self, caplog):
        from agent_latency import _log

        _log._said.discard("ended-span-attributes")
        span = type("Foreign", (), {"attributes": {}})()  # only the public API
        assert _set_on_ended_span(span, {"b": 2}) is False
        assert "cannot add attributes to an ended Foreign span" in caplog.text
