"""OpenAI-compatible calls over plain ``requests`` against the simulator: one call span with the
httpx path's phases, streamed or not; per-task network counts."""

from __future__ import annotations

import dis
import sys
from collections.abc import Iterator

import pytest

import agent_latency
from agent_latency import semconv
from agent_latency.simulator import Simulator, SimulatorConfig

requests = pytest.importorskip("requests")

from agent_latency.instrumentation.llm.requests import RequestsInstrumentor  # noqa: E402

BODY = {"model": "sim-q", "messages": [{"role": "user", "content": "hello " * 50}],
        "max_tokens": 8}


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig(prefill_tps=20000.0, output_tps=1000.0,
                                   default_output_tokens=8)) as server:
        yield server


@pytest.fixture(scope="module", autouse=True)
def instrumented() -> Iterator[None]:
    instrumentor = RequestsInstrumentor()
    instrumentor.instrument()
    yield
    instrumentor.uninstrument()


def _url(sim: Simulator, host: str = "localhost") -> str:
    return sim.base_url.replace("127.0.0.1", host) + "/v1/chat/completions"


def _calls(otel):
    return sorted((s for s in otel.spans() if semconv.LLM_CLIENT in s.attributes),
                  key=lambda s: s.start_time)


def _phases_add_up(span) -> None:
    total = sum(span.attributes[attr] for attr, _, _ in semconv.LLM_PHASES)
    assert total == pytest.approx((span.end_time - span.start_time) / 1e9, abs=2e-6)


class TestRequestsCalls:
    """requests.post to /chat/completions is one call, with the setup split out."""

    def test_non_streaming(self, otel, sim) -> None:
        response = requests.post(_url(sim), json=BODY, timeout=10)
        assert response.json()["usage"]["completion_tokens"] == 8
        (span,) = _calls(otel)
        a = span.attributes
        assert span.name == "chat sim-q"
        assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
        assert a[semconv.LLM_CONNECTION_REUSED] is False
        assert a[semconv.LLM_DNS] > 0 and a[semconv.LLM_CONNECT] > 0
        assert a[semconv.LLM_UPLOAD] > 0
        assert a[semconv.LLM_RTT_SOURCE] == semconv.RTT_SOURCE_TCP_INFO
        assert a[semconv.LLM_SERVER_REQUEST_ID]
        _phases_add_up(span)
        truth = sim.wait_truth(1)[-1]
        assert truth["traceparent"].split("-")[1] == format(span.context.trace_id, "032x")

    def test_streaming_over_a_session(self, otel, sim) -> None:
        body = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
        with agent_latency.task("req"), requests.Session() as session:
            for _ in range(2):
                response = session.post(_url(sim), json=body, stream=True, timeout=10)
                lines = [line for line in response.iter_lines() if line]
                assert lines[-1] == b"data: [DONE]"
        calls = _calls(otel)
        assert len(calls) == 2
        for span in calls:
            a = span.attributes
            assert a[semconv.LLM_TIMING_SOURCE] == "measured"
            assert a[semconv.LLM_TTFT] > 0 and a[semconv.LLM_OUTPUT_GENERATION] > 0
            assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
            _phases_add_up(span)
        assert [s.attributes[semconv.LLM_CONNECTION_REUSED] for s in calls] == [False, True]
        assert calls[1].attributes[semconv.LLM_ROUND_TRIPS_AVOIDED] == 1
        task = next(s for s in otel.spans() if s.name == "invoke_agent req").attributes
        assert task[semconv.budget_count("new_connections")] == 1
        assert task[semconv.budget_count("round_trips")] == 2
        assert task[semconv.budget_count("http_round_trips")] == 2
        assert task[semconv.BUDGET_CONNECTION_REUSE_RATIO] == pytest.approx(0.5)

    def test_content_of_a_streamed_response(self, otel, sim) -> None:
        response = requests.post(_url(sim), json={**BODY, "stream": True}, stream=True,
                                 timeout=10)
        assert b"[DONE]" in response.content
        (span,) = _calls(otel)
        assert span.attributes[semconv.LLM_OUTPUT_GENERATION] > 0

    def test_error_status(self, otel, sim) -> None:
        response = requests.post(_url(sim), json={"messages": "nope"}, timeout=10)
        assert response.status_code >= 400
        (span,) = _calls(otel)
        assert span.attributes[semconv.ERROR_TYPE] == "HTTPStatusError"

    def test_other_requests_are_not_calls(self, otel, sim) -> None:
        requests.get(sim.base_url + "/v1/models", timeout=10)
        requests.post(sim.base_url + "/v1/other", json={}, timeout=10)
        assert _calls(otel) == []

    def test_new_connection_per_call_counts(self, otel, sim) -> None:
        with agent_latency.task("fresh"):
            for _ in range(3):
                requests.post(_url(sim), json=BODY, timeout=10)
        task = next(s for s in otel.spans() if s.name == "invoke_agent fresh").attributes
        assert task[semconv.budget_count("new_connections")] == 3
        assert task[semconv.BUDGET_CONNECTION_REUSE_RATIO] == 0.0
        # Two of the three setups would have been saved by one persistent connection.
        assert task[semconv.BUDGET_CONNECTION_SETUP_SAVING] > 0


class TestInstrumentAfterImport:
    """instrument() with requests already imported (an OTLP exporter imports it) and httpx not:
    applying the patches imports httpx, whose import hook instruments another target that
    shares the patch; that must not deadlock."""

    def test_no_deadlock(self) -> None:
        import os
        import subprocess
        import sys

        code = ("import requests, agent_latency; agent_latency.instrument(); "
                "import httpx; print('ok')")
        env = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                timeout=120, env=env)
        assert result.stdout.strip() == "ok", result.stderr[-2000:]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="specialisation came with 3.11")
class TestPooledConnectionAfterTheTap:
    """A pooled connection whose response was tapped for arrival times is read as fast after
    it: its attributes are still where CPython specialises their reads (taken off as an
    attribute, never through its ``__dict__``, which would stay the object's for good)."""

    def test_attribute_reads_still_specialised(self, otel, sim) -> None:
        body = {**BODY, "stream": True}
        with requests.Session() as session:
            for _ in range(2):
                response = session.post(_url(sim), json=body, stream=True, timeout=10)
                assert [line for line in response.iter_lines() if line][-1] == b"data: [DONE]"
            manager = session.get_adapter(_url(sim)).poolmanager
            (key,) = manager.pools.keys()
            (connection,) = [c for c in manager.pools[key].pool.queue if c is not None]
        assert len(_calls(otel)) == 2

        def site(obj):
            return obj.sock, obj.port

        for _ in range(200):  # warm: the adaptive interpreter specialises after a few runs
            site(connection)
        assert [i.opname for i in dis.get_instructions(site, adaptive=True)
                if "ATTR" in i.opname] == ["LOAD_ATTR_INSTANCE_VALUE"] * 2
