"""Cross-cutting behaviour: retries, propagation, metrics, content, safety, coexistence."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx
import openai
import pytest
from llm_helpers import FAST, assert_phases_add_up, one_llm_span
from opentelemetry import trace

import agent_latency
from agent_latency import semconv
from agent_latency.instrumentation import net
from agent_latency.simulator import Simulator

MESSAGES = [{"role": "user", "content": "hello " * 50}]


@pytest.fixture
def client(sim):
    c = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
    yield c
    c.close()


class TestRetries:
    def test_429_then_success(self, otel):
        with Simulator(FAST.replace(faults=("rate_limit:first=1,retry_after=0.05",))) as s:
            c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="x", max_retries=2)
            with agent_latency.task("t"):
                list(c.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                               max_tokens=8))
            c.close()
        span = one_llm_span(otel)
        a = span.attributes
        assert a[semconv.LLM_ATTEMPTS] == 2
        assert a[semconv.LLM_RETRY] >= 0.04  # the back-off sleep at least
        assert a[semconv.LLM_RETRY_ERRORS] == ("429",)
        assert a[semconv.LLM_TTFT] > a[semconv.LLM_RETRY]
        assert_phases_add_up(span)
        events = [e for e in span.events if e.name == semconv.LLM_ATTEMPT_EVENT]
        assert len(events) == 1
        assert events[0].attributes[semconv.HTTP_RESPONSE_STATUS_CODE] == 429
        assert events[0].attributes[semconv.LLM_ATTEMPT_DURATION] < a[semconv.LLM_RETRY]
        task = otel.span("invoke_agent t")
        assert task.attributes[semconv.budget_count("http_round_trips")] == 2
        assert task.attributes[semconv.budget_share("other")] >= a[semconv.LLM_RETRY] - 1e-3

    def test_exhausted_retries_raise_unchanged(self, otel):
        with Simulator(FAST.replace(faults=("server_error",))) as s:
            c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="x", max_retries=1)
            c._client  # noqa: B018
            with pytest.raises(openai.InternalServerError):
                c.chat.completions.create(model="m", messages=MESSAGES, max_tokens=8)
            c.close()
        span = one_llm_span(otel)
        assert span.attributes[semconv.LLM_ATTEMPTS] == 2
        assert span.attributes[semconv.ERROR_TYPE] == "InternalServerError"
        assert_phases_add_up(span)


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []
    body = json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }).encode()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).seen.append(dict(self.headers))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder():
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", _Recorder.seen
    server.shutdown()
    server.server_close()


class TestPropagation:
    def test_traceparent_reaches_the_server(self, otel, recorder):
        url, seen = recorder
        c = openai.OpenAI(base_url=url, api_key="x")
        c.chat.completions.create(model="m", messages=MESSAGES)
        span = one_llm_span(otel)
        headers = {k.lower(): v for k, v in seen[0].items()}
        trace_id = format(span.context.trace_id, "032x")
        assert headers["traceparent"].split("-")[1] == trace_id
        assert headers["traceparent"].split("-")[2] == format(span.context.span_id, "016x")
        assert "sk-" not in json.dumps(dict(span.attributes))

    def test_propagation_off(self, otel, recorder, setenv):
        setenv(semconv.ENV_PROPAGATE, "false")
        url, seen = recorder
        openai.OpenAI(base_url=url, api_key="x").chat.completions.create(
            model="m", messages=MESSAGES)
        assert "traceparent" not in {k.lower() for k in seen[0]}
        one_llm_span(otel)

    def test_user_trace_callback_is_chained(self, otel, sim):
        events: list[str] = []
        http = httpx.Client(event_hooks={"request": [
            lambda request: request.extensions.__setitem__(
                "trace", lambda name, info: events.append(name))]})
        c = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="x", http_client=http)
        c.chat.completions.create(model="m", messages=MESSAGES, max_tokens=8)
        assert any(e.endswith("send_request_headers.started") for e in events)
        span = one_llm_span(otel)
        assert span.attributes[semconv.LLM_UPLOAD] >= 0
        assert_phases_add_up(span)

    def test_requests_outside_calls_untouched(self, otel, sim):
        with httpx.Client() as http:
            request = http.build_request("GET", sim.base_url + "/health")
            http.send(request)
        assert "trace" not in request.extensions
        assert "traceparent" not in request.headers


class TestMetrics:
    def test_metrics_once_per_call(self, otel, client):
        list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                            stream_options={"include_usage": True},
                                            max_tokens=8))
        names = [semconv.GEN_AI_CLIENT_OPERATION_DURATION,
                 semconv.GEN_AI_CLIENT_TIME_TO_FIRST_CHUNK,
                 semconv.GEN_AI_CLIENT_TIME_PER_OUTPUT_CHUNK,
                 semconv.METRIC_LLM_TIME_TO_FIRST_TOKEN]
        # A speed needs output time on the wire: the server in this process can hold the
        # GIL and write its tokens in one burst, which the wire shows as none.
        if one_llm_span(otel).attributes[semconv.LLM_OUTPUT_GENERATION] > 0:
            names.append(semconv.METRIC_LLM_OUTPUT_TOKENS_PER_SECOND)
        for name in names:
            points = otel.metric_points(name)
            assert len(points) == 1 and points[0].count == 1, name
            assert points[0].attributes[semconv.GEN_AI_PROVIDER_NAME] == "openai"
        assert list(otel.metric_points(semconv.GEN_AI_CLIENT_OPERATION_DURATION)[0]
                    .explicit_bounds) == list(semconv.DURATION_BUCKETS)
        tokens = otel.metric_points(semconv.GEN_AI_CLIENT_TOKEN_USAGE)
        assert {p.attributes[semconv.GEN_AI_TOKEN_TYPE] for p in tokens} == {"input", "output"}


class TestContent:
    def test_off_by_default(self, otel, client):
        client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=8)
        attrs = one_llm_span(otel).attributes
        assert semconv.GEN_AI_INPUT_MESSAGES not in attrs
        assert semconv.GEN_AI_OUTPUT_MESSAGES not in attrs

    @pytest.mark.parametrize("stream", [False, True])
    def test_opt_in(self, otel, client, setenv, stream):
        setenv(semconv.ENV_CAPTURE_MESSAGE_CONTENT, "true")
        result = client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=8,
                                                stream=stream)
        if stream:
            text = "".join(c.choices[0].delta.content or "" for c in result if c.choices)
        else:
            text = result.choices[0].message.content
        attrs = one_llm_span(otel).attributes
        assert json.loads(attrs[semconv.GEN_AI_INPUT_MESSAGES])[0]["role"] == "user"
        output = json.loads(attrs[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert output[0]["parts"][0]["content"] == text


class TestSafety:
    """A failure of ours inside a call never reaches the program (provoked: expected)."""

    @pytest.mark.internal_errors
    def test_our_failure_never_reaches_the_program(self, otel, client, monkeypatch):
        from agent_latency.instrumentation.llm import openai as ours

        def broken(call, chunk):
            raise RuntimeError("ours")

        monkeypatch.setattr(ours.CHAT, "observe", broken)
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES,
                                                     stream=True, max_tokens=8))
        assert chunks
        assert_phases_add_up(one_llm_span(otel))

    @pytest.mark.internal_errors
    def test_broken_record_still_ends_span(self, otel, client, monkeypatch):
        from agent_latency.instrumentation.llm import _record

        monkeypatch.setattr(_record, "compute_phases", lambda *a: 1 / 0)
        client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=8)
        assert [s.name for s in otel.spans()] == ["chat m"]

    def test_no_context_leak_non_streaming(self, otel, client):
        before = trace.get_current_span()
        client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=8)
        assert trace.get_current_span() is before
        assert net.CURRENT.get() is None


class TestProviders:
    """instrument(tracer_provider=…, meter_provider=…) sends that instrumentor's telemetry
    there, not to the global providers."""

    def test_explicit_providers(self, otel, client):
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor

        exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        meters = MeterProvider(metric_readers=[reader])
        instrumentor = OpenAIInstrumentor()
        instrumentor.uninstrument()
        instrumentor.instrument(tracer_provider=provider, meter_provider=meters)
        try:
            client.chat.completions.create(model="m", messages=MESSAGES, max_tokens=8)
        finally:
            instrumentor.uninstrument()
            instrumentor.instrument()
        assert [s.name for s in exporter.get_finished_spans() if s.name == "chat m"]
        assert not [s for s in otel.spans() if s.name == "chat m"]
        names = {m.name for rm in reader.get_metrics_data().resource_metrics
                 for sm in rm.scope_metrics for m in sm.metrics}
        assert semconv.GEN_AI_CLIENT_OPERATION_DURATION in names
