"""google-genai (Gemini API) against the simulator: sync and async, streaming or not, function
calls, broken streams, errors and content capture — one span per model request.

The SDK sends sync calls through its httpx2 client; async calls go through aiohttp (its
default when aiohttp is installed: no HTTP attempt is seen, so no network phases and no
``traceparent``) or through httpx when the program passes ``httpx_async_client``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Callable, Iterator

import pytest
from llm_helpers import (
    FAST,
    assert_phases_add_up,
    llm_spans,
    loopback_tolerance,
    one_llm_span,
    truth_of,
)

import agent_latency
from agent_latency import semconv
from agent_latency.simulator import Simulator

genai = pytest.importorskip("google.genai")
httpx = pytest.importorskip("httpx")
from google.genai import errors, types  # noqa: E402

from agent_latency.instrumentation.llm.google_genai import GoogleGenAIInstrumentor  # noqa: E402

CONTENTS = "explain " * 200
TOOL_SCRIPT = {"turns": [{"content": "Checking.", "tool_calls": [
    {"name": "run_shell", "arguments": {"command": "ls"}}]}, {"content": "All done."}]}
TOOLS = [types.Tool(function_declarations=[types.FunctionDeclaration(
    name="run_shell", description="Run a shell command",
    parameters={"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]})])]
#: The simulator answers 400 INVALID_ARGUMENT to a body whose ``contents`` is not a list.
BAD_REQUEST = types.GenerateContentConfig(
    http_options=types.HttpOptions(extra_body={"contents": 5}))


def _client(sim: Simulator, transport: str = "aiohttp") -> genai.Client:
    """A client for ``sim``; its async calls use aiohttp (the SDK's default) or httpx.
    Keep it in a variable: a collected Client closes its HTTP client mid-call."""
    extra = {"httpx_async_client": httpx.AsyncClient()} if transport == "httpx" else {}
    return genai.Client(api_key="x", http_options=types.HttpOptions(base_url=sim.base_url,
                                                                    **extra))


def _reinstrument() -> None:
    instrumentor = GoogleGenAIInstrumentor()  # a singleton: settings are read at instrument()
    instrumentor.uninstrument()
    instrumentor.instrument()


@pytest.fixture(scope="module", autouse=True)
def genai_instrumented(sim: Simulator) -> Iterator[None]:
    instrumentor = GoogleGenAIInstrumentor()
    instrumentor.instrument()
    # First calls import and build pydantic schemas (client CPU before the first token).
    client = _client(sim)
    list(client.models.generate_content_stream(model="warm", contents="hi"))

    async def warm() -> None:
        async for _ in await client.aio.models.generate_content_stream(model="warm",
                                                                        contents="hi"):
            pass

    asyncio.run(warm())
    yield
    instrumentor.uninstrument()


@pytest.fixture(autouse=True)
def _fresh_truth(sim: Simulator) -> None:
    sim.clear_truth()


@pytest.fixture
def client(sim: Simulator) -> genai.Client:
    return _client(sim)


@pytest.fixture(scope="module")
def tool_sim() -> Iterator[Simulator]:
    with Simulator(FAST, script=TOOL_SCRIPT) as server:
        yield server


@pytest.fixture
def capture(setenv: Callable[[str, str | None], None],
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], None]]:
    """The conftest's ``setenv`` for the content-capture variable, re-instrumenting ours too."""

    def set_capture(value: str | None) -> None:
        setenv(semconv.ENV_CAPTURE_MESSAGE_CONTENT, value)
        _reinstrument()

    yield set_capture
    monkeypatch.undo()  # before setenv's own teardown, so ours reads the restored environment
    _reinstrument()


def _check(span, sim: Simulator, *, streamed: bool, timed: bool = True) -> dict:
    """The span's GenAI attributes, phases and — on the httpx paths (``timed``) — the truth.

    Returns the simulator's truth record of the request."""
    a = span.attributes
    assert span.name == "chat gemini-x"
    assert a[semconv.GEN_AI_PROVIDER_NAME] == "gcp.gemini"
    assert a[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert a[semconv.GEN_AI_REQUEST_STREAM] is streamed
    assert a[semconv.GEN_AI_RESPONSE_MODEL] == "gemini-x"
    assert a[semconv.GEN_AI_RESPONSE_ID]
    assert a[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("STOP",)
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 8
    assert (a[semconv.SERVER_ADDRESS], a[semconv.SERVER_PORT]) == ("127.0.0.1", sim.port)
    assert_phases_add_up(span)
    truth = truth_of(sim, a[semconv.LLM_SERVER_REQUEST_ID])
    # Every attempt carries the call's traceparent; aiohttp's (``timed`` False) is seen
    # through aiohttp's TraceConfig, whose last request byte may be the headers' (upload 0).
    assert truth["traceparent"].split("-")[1] == format(span.context.trace_id, "032x")
    assert a[semconv.LLM_UPLOAD] > 0 if timed else a[semconv.LLM_UPLOAD] >= 0
    assert a[semconv.LLM_RTT_SOURCE] != "none"
    assert truth["input_tokens"] == a[semconv.GEN_AI_USAGE_INPUT_TOKENS] > 100
    if streamed:
        assert a[semconv.LLM_TIMING_SOURCE] == "measured"
        assert a[semconv.LLM_CHUNKS] == 8
        # Gemini has no opening events: the first chunk is the first token.
        assert a[semconv.LLM_TTFT] == a[semconv.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
        # The first token reached the program when the server wrote it (same wall clock).
        first_token = span.start_time / 1e9 + a[semconv.LLM_TTFT]
        assert first_token == pytest.approx(truth["first_token_at"], abs=loopback_tolerance())
        # Loopback: the truth, but for scheduling delays on a busy machine.
        assert a[semconv.LLM_PREFILL] == pytest.approx(truth["queue_s"] + truth["prefill_s"],
                                                       abs=loopback_tolerance())
        assert a[semconv.LLM_OUTPUT_GENERATION] == pytest.approx(
            truth["output_generation_s"], abs=loopback_tolerance())
    else:
        # Split by rates an earlier stream taught, or left whole when none did.
        assert a[semconv.LLM_TIMING_SOURCE] in ("estimated", "not-split")
    return truth


class TestSync:
    """``client.models``: httpx2 under the SDK, every attempt timed."""

    def test_stream_in_a_task(self, otel, client, sim):
        with agent_latency.task("t"):
            chunks = list(client.models.generate_content_stream(model="gemini-x",
                                                                contents=CONTENTS))
        assert "".join(c.text for c in chunks)
        _check(one_llm_span(otel), sim, streamed=True)
        task = otel.span("invoke_agent t")
        assert task.attributes[semconv.budget_count("llm_calls")] == 1

    def test_generate_content(self, otel, client, sim):
        config = types.GenerateContentConfig(max_output_tokens=64, temperature=0.5)
        response = client.models.generate_content(model="gemini-x", contents=CONTENTS,
                                                  config=config)
        assert response.text
        span = one_llm_span(otel)
        _check(span, sim, streamed=False)
        assert span.attributes[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 64
        assert span.attributes[semconv.GEN_AI_REQUEST_TEMPERATURE] == 0.5

    def test_dict_config_and_resource_name(self, otel, client, sim):
        client.models.generate_content(model="models/gemini-x", contents=CONTENTS,
                                       config={"max_output_tokens": 8})
        span = one_llm_span(otel)
        assert span.name == "chat gemini-x"
        assert span.attributes[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 8

    def test_chat_session(self, otel, client, sim):
        chat = client.chats.create(model="gemini-x")
        chat.send_message(CONTENTS)
        chat.send_message("and then?")
        assert len(llm_spans(otel)) == 2


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
class TestAsync:
    """``client.aio.models``: ``generate_content_stream`` is ``async def`` returning an async
    generator (nothing is sent until it is iterated)."""

    def test_stream(self, otel, sim, transport):
        async def main() -> list:
            client = _client(sim, transport)
            stream = await client.aio.models.generate_content_stream(model="gemini-x",
                                                                     contents=CONTENTS)
            return [chunk async for chunk in stream]

        with agent_latency.task("t"):
            assert asyncio.run(main())
        _check(one_llm_span(otel), sim, streamed=True, timed=transport == "httpx")
        task = otel.span("invoke_agent t")
        assert task.attributes[semconv.budget_count("llm_calls")] == 1

    def test_generate_content(self, otel, sim, transport):
        async def main() -> str:
            client = _client(sim, transport)
            response = await client.aio.models.generate_content(model="gemini-x",
                                                                contents=CONTENTS)
            return response.text

        assert asyncio.run(main())
        _check(one_llm_span(otel), sim, streamed=False, timed=transport == "httpx")

    def test_break_then_close(self, otel, sim, transport):
        async def main() -> None:
            client = _client(sim, transport)
            stream = await client.aio.models.generate_content_stream(model="gemini-x",
                                                                     contents=CONTENTS)
            async for _ in stream:
                break
            await stream.aclose()

        asyncio.run(main())
        gc.collect()
        # An end a collection found is recorded at the next safe point, not inside it.
        with agent_latency.task("next"):
            pass
        span = one_llm_span(otel)
        assert span.attributes[semconv.LLM_CHUNKS] == 1
        assert_phases_add_up(span)


class TestFunctionCalls:
    """A script turn with a function call: the call goes out whole, as the last chunk."""

    def test_streamed_function_call_is_output(self, otel, tool_sim):
        client = _client(tool_sim)
        config = types.GenerateContentConfig(tools=TOOLS)
        chunks = list(client.models.generate_content_stream(model="gemini-x",
                                                            contents="list files",
                                                            config=config))
        assert chunks[-1].function_calls[0].name == "run_shell"
        span = one_llm_span(otel)
        a = span.attributes
        assert a[semconv.LLM_CHUNKS] == len(chunks)
        # The text and the function call are both output: generation runs to the call.
        assert a[semconv.LLM_TIME_PER_OUTPUT_CHUNK] > 0
        truth = truth_of(tool_sim, a[semconv.LLM_SERVER_REQUEST_ID])
        assert a[semconv.LLM_OUTPUT_GENERATION] == pytest.approx(
            truth["output_generation_s"], abs=loopback_tolerance())
        assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == truth["output_tokens"]
        assert_phases_add_up(span)

    def test_tool_turn_captured(self, otel, tool_sim, capture):
        capture("true")
        client = _client(tool_sim)
        config = types.GenerateContentConfig(tools=TOOLS, system_instruction="Be brief.")
        first = client.models.generate_content(model="gemini-x", contents="list files",
                                               config=config)
        contents = [types.Content(role="user", parts=[types.Part(text="list files")]),
                    first.candidates[0].content,
                    types.Content(role="user", parts=[types.Part.from_function_response(
                        name="run_shell", response={"output": "a.txt"})])]
        second = client.models.generate_content(model="gemini-x", contents=contents,
                                                config=config)
        assert second.text == "All done."
        spans = llm_spans(otel)
        assert len(spans) == 2
        messages = json.loads(spans[1].attributes[semconv.GEN_AI_INPUT_MESSAGES])
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
        assert messages[0]["parts"] == [{"type": "text", "content": "Be brief."}]
        call = next(p for p in messages[2]["parts"] if p["type"] == "tool_call")
        assert (call["name"], call["arguments"]) == ("run_shell", {"command": "ls"})
        assert messages[3]["parts"][0]["type"] == "tool_call_response"
        output = json.loads(spans[1].attributes[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert output[0]["parts"][0]["content"] == "All done."


    def test_automatic_function_calling_one_span_per_request(self, otel, tool_sim):
        ran = []

        def run_shell(command: str) -> str:
            """Run a shell command."""
            ran.append(command)
            time.sleep(0.05)
            return "a.txt"

        # This module's annotations are strings (``from __future__ import annotations``);
        # google-genai 2.x (the newest on Python 3.10) then leaves the tool uncalled.
        run_shell.__annotations__ = {"command": str, "return": str}
        client = _client(tool_sim)
        response = client.models.generate_content(
            model="gemini-x", contents="list files",
            config=types.GenerateContentConfig(tools=[run_shell]))
        assert ran == ["ls"] and response.text == "All done."
        first, second = sorted(llm_spans(otel), key=lambda s: s.start_time)
        # The SDK ran the tool between two requests: it is in neither span, and the first
        # request is no retry of the second.
        assert second.start_time - first.end_time >= 0.05e9
        for span in (first, second):
            assert span.attributes[semconv.LLM_ATTEMPTS] == 1
            assert span.attributes[semconv.LLM_RETRY] == 0.0
            assert_phases_add_up(span)


def test_chunk_rule():
    """Output: answer text, thought text, a function call; not an empty part or usage only."""
    from agent_latency.instrumentation.llm.google_genai import _observe

    class State:
        def __init__(self) -> None:
            self.content: list[str] | None = []
            self.meta_chunk = self.usage_chunk = None

    def chunk(parts, **extra):
        candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
        return types.GenerateContentResponse.model_validate(
            {"candidates": [candidate] if parts is not None else [], **extra})

    state = State()
    usage = {"usageMetadata": {"promptTokenCount": 3}}
    assert _observe(state, chunk([{"text": "a"}], **usage)) is True
    assert _observe(state, chunk([{"text": "hmm", "thought": True}])) is True
    assert _observe(state, chunk([{"functionCall": {"name": "f", "args": {}}}])) is True
    assert _observe(state, chunk([{"text": ""}])) is False
    assert _observe(state, chunk(None, **usage)) is False
    assert state.content == ["a"]  # thoughts are output, not the answer's text
    assert state.meta_chunk is None and state.usage_chunk is not None
    last = types.GenerateContentResponse.model_validate({"candidates": [
        {"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]})
    assert _observe(state, last) is False and state.meta_chunk is last


class TestEnds:
    """A stream ends its call once, however it ends; SDK errors end it with error status."""

    def test_break_then_gc(self, otel, client):
        stream = client.models.generate_content_stream(model="gemini-x", contents=CONTENTS)
        for _ in stream:
            break
        assert llm_spans(otel) == []
        del stream
        gc.collect()
        span = one_llm_span(otel)
        assert span.attributes[semconv.LLM_CHUNKS] == 1
        assert semconv.ERROR_TYPE not in span.attributes
        assert_phases_add_up(span)

    @pytest.mark.parametrize("streamed", [False, True])
    def test_sdk_error(self, otel, client, streamed):
        with pytest.raises(errors.ClientError) as raised:
            if streamed:
                list(client.models.generate_content_stream(model="gemini-x", contents="hi",
                                                           config=BAD_REQUEST))
            else:
                client.models.generate_content(model="gemini-x", contents="hi",
                                               config=BAD_REQUEST)
        assert raised.value.code == 400
        span = one_llm_span(otel)
        assert span.status.status_code.name == "ERROR"
        assert span.attributes[semconv.ERROR_TYPE] == "ClientError"
        assert_phases_add_up(span)

    def test_vertex_ai_provider(self, otel, sim):
        client = genai.Client(vertexai=True, api_key="x",
                              http_options=types.HttpOptions(base_url=sim.base_url))
        with pytest.raises(errors.ClientError):  # the simulator has no Vertex routes
            client.models.generate_content(model="gemini-x", contents="hi")
        span = one_llm_span(otel)
        assert span.attributes[semconv.GEN_AI_PROVIDER_NAME] == "gcp.vertex_ai"
        assert span.attributes[semconv.ERROR_TYPE] == "ClientError"


class TestContent:
    @pytest.mark.parametrize("streamed", [False, True])
    def test_capture_opt_in(self, otel, client, capture, streamed):
        capture("SPAN_ONLY")
        config = types.GenerateContentConfig(system_instruction="Be brief.")
        if streamed:
            text = "".join(c.text for c in client.models.generate_content_stream(
                model="gemini-x", contents=CONTENTS, config=config))
        else:
            text = client.models.generate_content(model="gemini-x", contents=CONTENTS,
                                                  config=config).text
        attrs = one_llm_span(otel).attributes
        messages = json.loads(attrs[semconv.GEN_AI_INPUT_MESSAGES])
        assert messages == [{"role": "system", "parts": [{"type": "text",
                                                          "content": "Be brief."}]},
                            {"role": "user", "parts": [{"type": "text",
                                                        "content": CONTENTS}]}]
        output = json.loads(attrs[semconv.GEN_AI_OUTPUT_MESSAGES])
        assert output[0]["parts"][0]["content"] == text
        assert output[0]["finish_reason"] == "STOP"

    def test_no_content_by_default(self, otel, client, capture):
        capture(None)
        client.models.generate_content(model="gemini-x", contents=CONTENTS)
        attrs = one_llm_span(otel).attributes
        assert semconv.GEN_AI_INPUT_MESSAGES not in attrs
        assert semconv.GEN_AI_OUTPUT_MESSAGES not in attrs


def test_registered():
    from agent_latency.instrumentation._registry import INTEGRATIONS

    assert INTEGRATIONS["google_genai"].instrumentor.endswith(":GoogleGenAIInstrumentor")
    assert INTEGRATIONS["google_genai"].triggers == ("google.genai",)
