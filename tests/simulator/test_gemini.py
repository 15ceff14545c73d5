"""Gemini generateContent / streamGenerateContent through the real google-genai SDK."""

from __future__ import annotations

import asyncio
import time

import pytest
from machine_load import busy_slack

from agent_latency.simulator import Simulator

from .conftest import TOOL_SCRIPT, near

genai = pytest.importorskip("google.genai")
errors = pytest.importorskip("google.genai.errors")
types = pytest.importorskip("google.genai.types")
httpx = pytest.importorskip("httpx")

TOL = 0.015  # generous: timing precision belongs in the benchmark
TOOLS = [types.Tool(function_declarations=[types.FunctionDeclaration(
    name="run_shell", description="Run a shell command",
    parameters={"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]})])]


def _client(sim: Simulator, **http: object) -> genai.Client:
    """Keep the result in a variable: a collected Client closes its HTTP client mid-call."""
    return genai.Client(api_key="k", http_options=types.HttpOptions(base_url=sim.base_url,
                                                                    **http))


ASYNC_TRANSPORTS = ["aiohttp", "httpx"]  # the SDK's async default when aiohttp is installed


def _async_client(sim: Simulator, transport: str) -> genai.Client:
    """A client whose async calls go through aiohttp or through an httpx AsyncClient."""
    if transport == "aiohttp":
        pytest.importorskip("aiohttp")
        return _client(sim)
    return _client(sim, httpx_async_client=httpx.AsyncClient())


def _config(**fields: object) -> types.GenerateContentConfig:
    """A config whose body carries ``simulator`` overrides (``sim=``) via extra_body."""
    overrides = fields.pop("sim", None)
    if overrides is not None:
        fields["http_options"] = types.HttpOptions(extra_body={"simulator": overrides})
    return types.GenerateContentConfig(**fields)


@pytest.fixture
def client(sim: Simulator) -> genai.Client:
    """A google-genai client pointed at ``sim`` (default API version, v1)."""
    return _client(sim)


class TestGenerateContent:
    """Non-streaming bodies: text, truncation, usage, both API versions, sync and async."""

    def test_text_truncated_at_max_output_tokens(self, client, sim) -> None:
        r = client.models.generate_content(model="gemini-x", contents="hello there",
                                           config=_config(max_output_tokens=5))
        assert r.text == "lorem ipsum dolor sit amet"
        assert r.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
        rec = sim.wait_truth(1)[0]
        assert r.usage_metadata.prompt_token_count == rec["input_tokens"]
        assert r.usage_metadata.candidates_token_count == 5 == rec["output_tokens"]
        assert r.model_version == "gemini-x"
        assert (rec["api"], rec["model"], rec["stream"]) == ("gemini", "gemini-x", False)
        assert r.sdk_http_response.headers["x-request-id"] == rec["request_id"]

    def test_v1beta_and_simulator_override(self, sim) -> None:
        client = _client(sim, api_version="v1beta")
        r = client.models.generate_content(
            model="models/gemini-x", contents="hi", config=_config(sim={"output_tokens": 3}))
        assert r.text == "lorem ipsum dolor"
        assert r.candidates[0].finish_reason == types.FinishReason.STOP
        assert sim.wait_truth(1)[0]["model"] == "gemini-x"

    @pytest.mark.parametrize("transport", ASYNC_TRANSPORTS)
    def test_async_client(self, sim, transport: str) -> None:
        async def run() -> str:
            client = _async_client(sim, transport)
            r = await client.aio.models.generate_content(
                model="g", contents="hi", config=_config(max_output_tokens=4))
            return r.text

        assert asyncio.run(run()) == "lorem ipsum dolor sit"

    def test_structured_output_parses(self, client) -> None:
        pydantic = pytest.importorskip("pydantic")

        class Answer(pydantic.BaseModel):
            city: str
            population: int

        r = client.models.generate_content(model="g", contents="hi", config=_config(
            response_mime_type="application/json", response_schema=Answer))
        assert r.parsed == Answer(city="lorem", population=0)

    def test_input_tokens_count_system_and_tools(self, client, sim) -> None:
        client.models.generate_content(model="g", contents="hi", config=_config(
            max_output_tokens=1, system_instruction="x" * 400, tools=TOOLS))
        client.models.generate_content(model="g", contents="hi",
                                       config=_config(max_output_tokens=1))
        with_extras, plain = (r["input_tokens"] for r in sim.wait_truth(2))
        assert with_extras > plain + 100


class TestFunctionCalls:
    """Script tool calls become functionCall parts; model turns pick the script turn."""

    def test_turns(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        client = _client(sim)
        config = _config(tools=TOOLS)
        first = client.models.generate_content(model="g", contents="list files", config=config)
        call = first.function_calls[0]
        assert (call.name, call.args) == ("run_shell", {"command": "ls"})
        assert first.candidates[0].content.parts[0].text == "Checking."
        contents = [types.Content(role="user", parts=[types.Part(text="list files")]),
                    first.candidates[0].content,
                    types.Content(role="user", parts=[types.Part.from_function_response(
                        name="run_shell", response={"output": "a.txt"})])]
        second = client.models.generate_content(model="g", contents=contents, config=config)
        assert second.text == "All done." and not second.function_calls
        assert [r["turn"] for r in sim.wait_truth(2)] == [0, 1]

    def test_no_call_without_tools(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT)
        client = _client(sim)
        r = client.models.generate_content(model="g", contents="hi")
        assert r.text == "Checking." and not r.function_calls

    def test_streamed_call_is_one_chunk(self, make_sim) -> None:
        sim = make_sim(script=TOOL_SCRIPT, tokens_per_chunk=1)
        client = _client(sim)
        chunks = list(client.models.generate_content_stream(
            model="g", contents="hi", config=_config(tools=TOOLS)))
        assert [c.text for c in chunks[:-1]] == ["Checking."]
        assert chunks[-1].function_calls[0].args == {"command": "ls"}
        assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
        rec = sim.wait_truth(1)[0]
        assert rec["chunks"] == 2 and rec["output_tokens"] == 1 + 4  # '{"command":"ls"}': 16 chars


class TestGenerateContentStream:
    """SSE chunks: prompt usage on each, finishReason and output usage on the last."""

    def test_sync_stream(self, client, sim) -> None:
        chunks = list(client.models.generate_content_stream(
            model="g", contents="hi", config=_config(max_output_tokens=6)))
        assert "".join(c.text for c in chunks) == "lorem ipsum dolor sit amet consectetur"
        assert len(chunks) == 6
        assert all(c.candidates[0].finish_reason is None for c in chunks[:-1])
        assert chunks[-1].candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
        rec = sim.wait_truth(1)[0]
        assert chunks[0].usage_metadata.prompt_token_count == rec["input_tokens"]
        assert chunks[0].usage_metadata.candidates_token_count is None
        assert chunks[-1].usage_metadata.candidates_token_count == 6
        assert rec["stream"] and rec["chunks"] == 6

    @pytest.mark.parametrize("transport", ASYNC_TRANSPORTS)
    def test_async_stream(self, sim, transport: str) -> None:
        async def run() -> list[str]:
            client = _async_client(sim, transport)
            stream = await client.aio.models.generate_content_stream(
                model="g", contents="hi", config=_config(sim={"output_tokens": 4}))
            return [c.text async for c in stream]

        assert asyncio.run(run()) == ["lorem", " ipsum", " dolor", " sit"]

    def test_zero_tokens_still_finish(self, client) -> None:
        chunks = list(client.models.generate_content_stream(
            model="g", contents="hi", config=_config(max_output_tokens=0)))
        assert chunks[-1].candidates[0].finish_reason == types.FinishReason.MAX_TOKENS


class TestTiming:
    """Queue + prefill before the first chunk, output at the sampling rate, as the truth says."""

    def test_stream_prefill_and_output(self, make_sim) -> None:
        sim = make_sim(prefill_tps=10_000.0, output_tps=500.0)
        t0 = time.perf_counter()
        client = _client(sim)
        stream = client.models.generate_content_stream(
            model="g", contents="x" * 3996,  # + "user" = 4000 chars -> 1000 tokens, 100 ms
            config=_config(sim={"output_tokens": 26}))  # 25 gaps -> 50 ms
        first = None
        for _ in stream:
            first = first or time.perf_counter() - t0
        rec = sim.wait_truth(1)[0]
        assert rec["input_tokens"] == 1000 and rec["output_tokens"] == 26
        assert near(rec["prefill_s"], 0.100, TOL)
        assert near(rec["output_generation_s"], 0.050, TOL)
        assert first >= rec["queue_s"] + rec["prefill_s"]

    def test_headers_before_prefill(self, make_sim) -> None:
        sim = make_sim(prefill_tps=10_000.0)  # 2000 tokens -> 200 ms
        with httpx.stream("POST", sim.base_url + "/v1beta/models/g:streamGenerateContent",
                          params={"alt": "sse", "key": "k"}, headers={"x-goog-api-key": "k"},
                          json={"contents": [{"role": "user", "parts": [{"text": "x" * 7996}]}],
                                "generationConfig": {"maxOutputTokens": 2}}) as r:
            headers_at = time.perf_counter()
            r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        rec = sim.wait_truth(1)[0]
        assert headers_at < rec["prefill_started_at_mono"] + rec["prefill_s"]

    def test_function_call_chunk_waits_for_its_last_token(self, make_sim) -> None:
        call = {"name": "run_shell", "arguments": {"command": "x" * 66}}  # 80 chars, 20 tokens
        sim = make_sim(script={"turns": [{"tool_calls": [call]}]}, output_tps=200.0)
        client = _client(sim)
        chunks = list(client.models.generate_content_stream(
            model="g", contents="hi", config=_config(tools=TOOLS)))
        assert len(chunks) == 1 and chunks[0].function_calls[0].name == "run_shell"
        rec = sim.wait_truth(1)[0]
        assert rec["output_tokens"] == 20 and rec["chunks"] == 1
        first_token_due = rec["prefill_started_at_mono"] + rec["input_tokens"] / rec["prefill_tps"]
        sent_after = rec["first_token_at_mono"] - first_token_due
        # Never before its last token; after it by one wake-up (late on a loaded machine).
        assert 19 / 200.0 <= sent_after < 19 / 200.0 + 0.05 + busy_slack()

    def test_non_streaming_waits_for_the_last_token(self, make_sim) -> None:
        sim = make_sim(prefill_tps=20_000.0, output_tps=400.0)
        t0 = time.perf_counter()
        client = _client(sim)
        client.models.generate_content(model="g", contents="x" * 3996,
                                       config=_config(sim={"output_tokens": 21}))
        assert time.perf_counter() - t0 >= 0.1  # 50 ms prefill + 50 ms output
        rec = sim.wait_truth(1)[0]
        assert near(rec["output_generation_s"], 0.050, TOL)
        assert rec["response_written_at_mono"] >= rec["last_token_at_mono"]


class TestGeminiErrors:
    """Errors in Gemini's ``{"error": {code, message, status}}`` shape, as the SDK raises them."""

    def test_sdk_raises_client_error(self, client) -> None:
        with pytest.raises(errors.ClientError) as exc:
            client.models.generate_content(model="g", contents=[types.Content(role="user")])
        assert (exc.value.code, exc.value.status) == (400, "INVALID_ARGUMENT")

    @pytest.mark.parametrize(("path", "body", "status"), [
        ("/v1beta/models/g:generateContent", b"{oops", 400),
        ("/v1beta/models/g:generateContent", b'{"contents": []}', 400),
        ("/v1/models/g:generateContent",
         b'{"contents": [{"parts": []}], "generationConfig": {"maxOutputTokens": "x"}}', 400),
        ("/v1beta/models/g:streamGenerateContent", b'{"contents": [{"parts": []}]}',
         400),  # without alt=sse
        ("/v1beta/models/g:countTokens", b"{}", 404),
        ("/v1beta/files", b"{}", 404),
    ])
    def test_shape(self, sim, path: str, body: bytes, status: int) -> None:
        r = httpx.post(sim.base_url + path, content=body)
        assert r.status_code == status
        assert set(r.json()["error"]) == {"code", "message", "status"}
        assert r.json()["error"]["code"] == status

    def test_rate_limit_and_overloaded(self, make_sim) -> None:
        sim = make_sim(faults=("rate_limit:first=1", "overloaded"))
        client = _client(sim)
        with pytest.raises(errors.ClientError) as exc:
            client.models.generate_content(model="g", contents="hi")
        assert (exc.value.code, exc.value.status) == (429, "RESOURCE_EXHAUSTED")
        with pytest.raises(errors.ServerError) as exc:
            client.models.generate_content(model="g", contents="hi")
        assert (exc.value.code, exc.value.status) == (503, "UNAVAILABLE")
        assert [r["status"] for r in sim.wait_truth(2)] == [429, 503]

    def test_cut_stream(self, make_sim) -> None:
        sim = make_sim(faults=("cut:after=3",))
        client = _client(sim)
        with pytest.raises(Exception) as exc:  # the HTTP stack's own (httpx or httpx2)
            list(client.models.generate_content_stream(model="g", contents="hi"))
        assert type(exc.value).__name__ == "RemoteProtocolError"
        rec = sim.wait_truth(1)[0]
        assert (rec["fault"], rec["output_tokens"]) == ("cut", 3)
