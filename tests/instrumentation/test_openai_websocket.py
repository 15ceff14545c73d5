"""openai 3.x Responses over a persistent WebSocket (``client.responses.connect()``) against the
simulator: setup span, one call per ``response.create``, phases, per-task counts."""

from __future__ import annotations

import asyncio
import sys
import time

import openai
import openai.resources.responses.responses as responses_module
import pytest
from llm_helpers import assert_phases_add_up, llm_spans
from machine_load import busy_slack

import agent_latency
from agent_latency import semconv
from agent_latency.simulator import Simulator, SimulatorConfig

pytestmark = pytest.mark.skipif(
    not hasattr(responses_module.Responses, "connect"),
    reason="this openai release has no responses.connect()")

TOOL_SCRIPT = {"turns": [{"content": "Checking.", "tool_calls": [
    {"name": "run_shell", "arguments": {"command": "ls"}}]}, {"content": "All done."}]}
_FINAL = ("response.completed", "response.incomplete", "response.failed", "error")
TOOLS = [{"type": "function", "name": "run_shell", "description": "Run a command",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                         "required": ["command"]}}]


def _read_one(conn):
    events = []
    for event in conn:
        events.append(event)
        if event.type in _FINAL:
            return events
    return events


async def _aread_one(conn):
    events = []
    async for event in conn:
        events.append(event)
        if event.type in _FINAL:
            return events
    return events


@pytest.fixture
def client(sim):
    c = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
    yield c
    c.close()


def _setup_span(otel):
    found = [s for s in otel.spans() if s.name == semconv.SPAN_CONNECTION_SETUP]
    assert len(found) == 1, [s.name for s in otel.spans()]
    return found[0]


def _check_call(span, truth_tokens=8):
    a = span.attributes
    assert a[semconv.LLM_TRANSPORT] == semconv.TRANSPORT_WEBSOCKET
    assert a[semconv.LLM_STREAMING] is True
    assert a[semconv.LLM_TIMING_SOURCE] == "measured"
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == truth_tokens
    assert a[semconv.LLM_OUTPUT_GENERATION] > 0
    assert a[semconv.LLM_CONNECT] == 0.0 and a[semconv.LLM_TLS] == 0.0
    assert a[semconv.LLM_WS_MESSAGES_SENT] == 1
    assert a[semconv.LLM_WS_MESSAGES_RECEIVED] >= truth_tokens
    assert a[semconv.LLM_BYTES_SENT] > 0 and a[semconv.LLM_BYTES_RECEIVED] > 0
    assert a[semconv.LLM_RTT_SOURCE] == semconv.RTT_SOURCE_TCP_INFO
    assert_phases_add_up(span)


class TestSyncConnection:
    """One setup span per connection, one call span per response.create, in order."""

    def test_two_responses_on_one_connection(self, otel, client, sim):
        with agent_latency.task("ws"):
            with client.responses.connect() as conn:
                for _ in range(2):
                    conn.response.create(model="sim-r", input="hello there",
                                         max_output_tokens=8)
                    assert _read_one(conn)[-1].type in ("response.completed",
                                                        "response.incomplete")
        setup = _setup_span(otel)
        assert setup.attributes[semconv.COMPONENT] == semconv.NETWORK_OVERHEAD
        assert setup.attributes[semconv.LLM_CONNECT] > 0
        assert setup.attributes[semconv.NET_UPGRADE] > 0
        calls = sorted(llm_spans(otel), key=lambda s: s.start_time)
        assert [s.name for s in calls] == ["chat sim-r", "chat sim-r"]
        for span in calls:
            _check_call(span)
            assert span.parent.span_id == setup.parent.span_id  # the task
        assert [s.attributes[semconv.LLM_CONNECTION_REUSED] for s in calls] == [False, True]
        assert [s.attributes[semconv.LLM_ROUND_TRIPS_AVOIDED] for s in calls] == [0, 1]
        # The call starts when its response.create is sent, after the setup ended.
        assert calls[0].start_time >= setup.end_time
        task = otel.span("invoke_agent ws").attributes
        assert task[semconv.budget_count("llm_calls")] == 2
        assert task[semconv.budget_count("round_trips")] == 2
        assert task[semconv.budget_count("http_round_trips")] == 0
        assert task[semconv.budget_count("new_connections")] == 1
        assert task[semconv.budget_count("ws_messages_sent")] == 2
        assert task[semconv.budget_count("ws_messages_received")] >= 16
        assert task[semconv.budget_count("bytes_received")] > 0
        assert task[semconv.BUDGET_CONNECTION_REUSE_RATIO] == pytest.approx(0.5)
        # One connection: nothing a persistent connection would save.
        assert task[semconv.BUDGET_CONNECTION_SETUP_SAVING] == 0.0

    @pytest.mark.skipif(not sys.platform.startswith("linux"), reason="TCP_INFO is Linux's")
    def test_client_work_before_the_request_is_not_upgrade(self, otel, client, monkeypatch):
        """The upgrade is the request's round trip as the kernel saw it: the client's work
        between the connect and the request (here 40 ms building it) is client time."""
        from websockets.client import ClientProtocol

        building = ClientProtocol.connect

        def slow_connect(self):
            time.sleep(0.04)
            return building(self)

        monkeypatch.setattr(ClientProtocol, "connect", slow_connect)
        with client.responses.connect() as conn:
            conn.response.create(model="sim-r", input="hi", max_output_tokens=8)
            _read_one(conn)
        a = _setup_span(otel).attributes
        # A local round trip is ~1 ms; the kernel counts it in ticks (up to 10 ms).
        assert a[semconv.NET_UPGRADE] < 0.02 + busy_slack()
        assert a[semconv.NET_CLIENT] >= 0.04 - 0.01

    def test_completed_parse_is_client_tail(self, otel, client):
        with client.responses.connect() as conn:
            conn.response.create(model="sim-r", input="hi", max_output_tokens=8)
            _read_one(conn)
        (span,) = llm_spans(otel)
        a = span.attributes
        # The SDK parses response.completed after its bytes came: client time, not network.
        assert a[semconv.LLM_TAIL] < 0.05 + busy_slack()
        assert a[semconv.LLM_CLIENT_TAIL] >= 0.0
        assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS]

    def test_function_call_round_trip(self, otel, make_ws_sim):
        sim = make_ws_sim(script=TOOL_SCRIPT)
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk", max_retries=0)
        with client.responses.connect() as conn:
            conn.response.create(model="m", input="hi", tools=TOOLS)
            first = _read_one(conn)[-1].response
            call_id = next(o.call_id for o in first.output if o.type == "function_call")
            conn.response.create(model="m", previous_response_id=first.id, tools=TOOLS,
                                 input=[{"type": "function_call_output", "call_id": call_id,
                                         "output": "x"}])
            _read_one(conn)
        calls = llm_spans(otel)
        assert len(calls) == 2
        for span in calls:
            assert_phases_add_up(span)
            # The function call's name is the first output of the tool-call response.
            assert span.attributes[semconv.LLM_TTFT] > 0

    def test_stopped_reading_ends_at_close(self, otel, client):
        with client.responses.connect() as conn:
            conn.response.create(model="sim-r", input="hi", max_output_tokens=8)
            for event in conn:
                if event.type == "response.output_text.delta":
                    break
        (span,) = llm_spans(otel)
        assert span.attributes[semconv.LLM_CHUNKS] >= 1
        assert_phases_add_up(span)

    def test_server_error_event(self, otel, make_ws_sim):
        sim = make_ws_sim(faults=("rate_limit:first=1",))
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk", max_retries=0)
        with client.responses.connect() as conn:
            conn.send({"type": "response.create", "model": "m", "input": "hi"})
            events = _read_one(conn)
        assert events[-1].type == "error"
        (span,) = llm_spans(otel)
        assert span.attributes[semconv.ERROR_TYPE] == "WebSocketResponseError"
        assert_phases_add_up(span)

    def test_connect_failure_is_a_setup_span_with_error(self, otel):
        client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk", max_retries=0)
        with pytest.raises(Exception):  # noqa: B017 - whichever the SDK raises when refused
            with client.responses.connect():
                pass
        setup = _setup_span(otel)
        assert semconv.ERROR_TYPE in setup.attributes
        assert llm_spans(otel) == []

    def test_other_messages_are_not_calls(self, otel, client):
        with client.responses.connect() as conn:
            conn.send({"type": "unknown.event"})
            assert _read_one(conn)[-1].type == "error"
        assert llm_spans(otel) == []


class TestAsyncConnection:
    """The async client: same spans, same phases."""

    def test_two_responses(self, otel, sim):
        async def run():
            client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk",
                                        max_retries=0)
            with agent_latency.task("aws"):
                async with client.responses.connect() as conn:
                    for _ in range(2):
                        await conn.response.create(model="sim-r", input="hello",
                                                   max_output_tokens=8)
                        await _aread_one(conn)
            await client.close()

        asyncio.run(run())
        setup = _setup_span(otel)
        assert setup.attributes[semconv.LLM_CONNECT] > 0
        calls = sorted(llm_spans(otel), key=lambda s: s.start_time)
        assert len(calls) == 2
        for span in calls:
            _check_call(span)
        assert [s.attributes[semconv.LLM_CONNECTION_REUSED] for s in calls] == [False, True]
        task = otel.span("invoke_agent aws").attributes
        assert task[semconv.budget_count("new_connections")] == 1
        assert task[semconv.budget_count("ws_messages_sent")] == 2


@pytest.fixture
def make_ws_sim():
    started = []

    def make(**overrides):
        server = Simulator(SimulatorConfig(prefill_tps=20000.0, output_tps=1000.0,
                                           default_output_tokens=8), **overrides).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


class TestPipelined:
    """A response.create sent before the previous response was read: events in order."""

    def test_two_sent_then_read(self, otel, client):
        with client.responses.connect() as conn:
            conn.response.create(model="sim-r", input="one", max_output_tokens=8)
            conn.response.create(model="sim-r", input="two", max_output_tokens=8)
            first, second = _read_one(conn), _read_one(conn)
        assert first[-1].response.id != second[-1].response.id
        calls = sorted(llm_spans(otel), key=lambda s: s.start_time)
        assert [c.attributes[semconv.GEN_AI_RESPONSE_ID] for c in calls] == [
            first[-1].response.id, second[-1].response.id]
        for span in calls:
            assert_phases_add_up(span)
            assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
