"""Clients of every protocol, unmodified, against the simulator over real sockets: Ollama's
own client (NDJSON), Cohere's ClientV2 (SSE with typed events), boto3's bedrock-runtime
(Converse, ConverseStream, InvokeModel, InvokeModelWithResponseStream: the AWS event stream,
through botocore and urllib3), Groq, Mistral and Hugging Face's InferenceClient
(OpenAI-shaped).  Each request is one LLM span, found by the ``traceparent`` the server saw,
named for its provider, with its usage and its phases; a request no protocol knows that
looks like a model request is a generic span with one notice; broken replies end their span
with an error type while the program reads them untouched."""

from __future__ import annotations

import asyncio
import http.client
import http.server
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from llm_helpers import calls_in_order, sockets_instrumented
from opentelemetry.trace import StatusCode
from truth_log import close, close_to, served, server_prefill

from agent_latency import semconv
from agent_latency.instrumentation.llm.sockets import SocketsInstrumentor
from agent_latency.simulator import SimulatorConfig, SimulatorProcess
from agent_latency.simulator._bedrock import event_message

RATES = SimulatorConfig(prefill_tps=4000.0, output_tps=250.0, default_output_tokens=12)
PROMPT = "hello " * 100
N_OUT = 12


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorProcess]:
    with SimulatorProcess(RATES) as server:
        yield server


wire_instrumented = pytest.fixture(scope="module", autouse=True)(sockets_instrumented)
_calls = calls_in_order


def one_span_per_request(otel: Any, sim: SimulatorProcess, before: int, n: int) -> list[Any]:
    """The spans of the ``n`` requests served after the first ``before``: one each, matched
    by the ``traceparent`` the server saw, and no other."""
    records = served(sim, before + n)[before:]
    assert len(records) == n
    spans = {format(s.context.span_id, "016x"): s for s in _calls(otel)}
    assert len(spans) == n, [s.name for s in spans.values()]
    matched = []
    for record in records:
        assert record["traceparent"], record
        span = spans[record["traceparent"].split("-")[2]]
        assert record["traceparent"].split("-")[1] == format(span.context.trace_id, "032x")
        matched.append((span, record))
    return [span for span, _ in matched]


def check(span: Any, *, provider: str, protocol: str, streamed: bool, model: str) -> None:
    """The span's names, usage and phases (phases add up to the span)."""
    a = span.attributes
    assert a[semconv.GEN_AI_PROVIDER_NAME] == provider
    assert a[semconv.LLM_PROTOCOL] == protocol
    assert a[semconv.LLM_STREAMING] is streamed
    assert a[semconv.GEN_AI_REQUEST_MODEL] == model
    assert a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == N_OUT
    assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] > 0
    assert semconv.ERROR_TYPE not in a
    total = sum(a[attr] for attr, _, _ in semconv.LLM_PHASES)
    assert total == pytest.approx((span.end_time - span.start_time) / 1e9, abs=2e-6)
    if streamed:
        assert a[semconv.LLM_TIMING_SOURCE] == semconv.SOURCE_MEASURED
        assert a[semconv.LLM_CHUNKS] >= N_OUT


def _streamed_truth(span: Any, sim: SimulatorProcess) -> None:
    """A streamed span's prefill and output generation against the server's truth."""
    a = span.attributes
    record = next(r for r in sim.truth
                  if r["traceparent"].split("-")[2] == format(span.context.span_id, "016x"))
    prefill = server_prefill(record)
    output = record["last_token_at_mono"] - record["first_token_at_mono"]
    assert close_to(a[semconv.LLM_PREFILL], prefill), (a[semconv.LLM_PREFILL], prefill)
    assert close(a[semconv.LLM_OUTPUT_GENERATION], output)


class TestOllama:
    """``ollama`` (httpx): ``/api/chat`` streamed and not, sync and async; ``/api/generate``."""

    def test_chat(self, otel, sim) -> None:
        ollama = pytest.importorskip("ollama")
        client = ollama.Client(host=f"http://127.0.0.1:{sim.port}")
        before = len(sim.truth)
        messages = [{"role": "user", "content": PROMPT}]
        pieces = [c.message.content for c in client.chat(model="llama-sim", messages=messages,
                                                         stream=True)]
        whole = client.chat(model="llama-sim", messages=messages, stream=False)
        assert "".join(pieces) == whole.message.content
        streamed, plain = one_span_per_request(otel, sim, before, 2)
        for span, is_streamed in ((streamed, True), (plain, False)):
            check(span, provider="ollama", protocol="ollama", streamed=is_streamed,
                  model="llama-sim")
        _streamed_truth(streamed, sim)
        a = plain.attributes
        # The server's own durations, beside the measured ones; they split the block.
        assert a[semconv.LLM_SERVER_TIMING_SOURCE] == semconv.SOURCE_SERVER_REPORTED
        assert a[semconv.LLM_TIMING_SOURCE] == semconv.SOURCE_SERVER_REPORTED
        assert a[semconv.LLM_SERVER_PREFILL] > 0 and a[semconv.LLM_SERVER_OUTPUT_GENERATION] > 0
        assert a[semconv.LLM_SERVER_LOAD] == 0.0
        assert streamed.attributes[semconv.LLM_SERVER_PREFILL] > 0

    def test_async_and_generate(self, otel, sim) -> None:
        ollama = pytest.importorskip("ollama")
        before = len(sim.truth)

        async def run() -> None:
            client = ollama.AsyncClient(host=f"http://127.0.0.1:{sim.port}")
            async for _ in await client.chat(model="llama-sim", stream=True,
                                             messages=[{"role": "user", "content": PROMPT}]):
                pass
            await client.generate(model="llama-sim", prompt=PROMPT, stream=False)

        asyncio.run(run())
        chat, generate = one_span_per_request(otel, sim, before, 2)
        check(chat, provider="ollama", protocol="ollama", streamed=True, model="llama-sim")
        check(generate, provider="ollama", protocol="ollama", streamed=False,
              model="llama-sim")
        assert generate.attributes[semconv.GEN_AI_OPERATION_NAME] == "text_completion"


class TestCohere:
    """``cohere`` ``ClientV2`` (httpx): ``chat`` and ``chat_stream``."""

    def test_chat_and_stream(self, otel, sim) -> None:
        cohere = pytest.importorskip("cohere")
        client = cohere.ClientV2(api_key="sim", base_url=f"http://127.0.0.1:{sim.port}")
        before = len(sim.truth)
        messages = [{"role": "user", "content": PROMPT}]
        reply = client.chat(model="command-sim", messages=messages)
        texts = [e.delta.message.content.text
                 for e in client.chat_stream(model="command-sim", messages=messages)
                 if e.type == "content-delta"]
        assert "".join(texts) == reply.message.content[0].text
        plain, streamed = one_span_per_request(otel, sim, before, 2)
        check(plain, provider="cohere", protocol="cohere", streamed=False, model="command-sim")
        check(streamed, provider="cohere", protocol="cohere", streamed=True,
              model="command-sim")
        assert streamed.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("COMPLETE",)
        _streamed_truth(streamed, sim)


class TestBedrock:
    """boto3 ``bedrock-runtime`` (botocore on urllib3): Converse, ConverseStream, InvokeModel
    and InvokeModelWithResponseStream."""

    @pytest.fixture
    def client(self, sim) -> Any:
        boto3 = pytest.importorskip("boto3")
        return boto3.client("bedrock-runtime", endpoint_url=f"http://127.0.0.1:{sim.port}",
                            region_name="us-east-1", aws_access_key_id="sim",
                            aws_secret_access_key="sim")

    MODEL = "anthropic.claude-sim-v1:0"

    def test_converse(self, otel, sim, client) -> None:
        before = len(sim.truth)
        messages = [{"role": "user", "content": [{"text": PROMPT}]}]
        reply = client.converse(modelId=self.MODEL, messages=messages,
                                inferenceConfig={"maxTokens": N_OUT})
        texts = [e["contentBlockDelta"]["delta"]["text"]
                 for e in client.converse_stream(modelId=self.MODEL, messages=messages,
                                                 inferenceConfig={"maxTokens": N_OUT})["stream"]
                 if "contentBlockDelta" in e]
        assert "".join(texts) == reply["output"]["message"]["content"][0]["text"]
        plain, streamed = one_span_per_request(otel, sim, before, 2)
        for span, is_streamed in ((plain, False), (streamed, True)):
            check(span, provider="aws.bedrock", protocol="bedrock", streamed=is_streamed,
                  model=self.MODEL)
            a = span.attributes
            assert a[semconv.LLM_SERVER_TOTAL] == pytest.approx(
                reply["metrics"]["latencyMs"] / 1e3, abs=0.05)
            assert a[semconv.LLM_SERVER_TIMING_SOURCE] == semconv.SOURCE_SERVER_REPORTED
        _streamed_truth(streamed, sim)

    def test_invoke(self, otel, sim, client) -> None:
        before = len(sim.truth)
        body = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": N_OUT,
                           "messages": [{"role": "user", "content": PROMPT}]})
        reply = json.loads(client.invoke_model(modelId=self.MODEL, body=body)["body"].read())
        events = [json.loads(e["chunk"]["bytes"]) for e in
                  client.invoke_model_with_response_stream(modelId=self.MODEL,
                                                           body=body)["body"]]
        text = "".join(e["delta"].get("text", "") for e in events
                       if e["type"] == "content_block_delta")
        assert text == reply["content"][0]["text"]
        plain, streamed = one_span_per_request(otel, sim, before, 2)
        check(plain, provider="aws.bedrock", protocol="bedrock", streamed=False,
              model=self.MODEL)
        check(streamed, provider="aws.bedrock", protocol="bedrock", streamed=True,
              model=self.MODEL)
        assert streamed.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
        _streamed_truth(streamed, sim)


class TestOpenAIShapedClients:
    """Groq, Mistral and Hugging Face send OpenAI-shaped requests: named for their provider."""

    def test_groq(self, otel, sim) -> None:
        groq = pytest.importorskip("groq")
        client = groq.Groq(api_key="sim", base_url=f"http://127.0.0.1:{sim.port}")
        before = len(sim.truth)
        messages = [{"role": "user", "content": PROMPT}]
        client.chat.completions.create(model="llama-groq", messages=messages)
        for _ in client.chat.completions.create(model="llama-groq", messages=messages,
                                                stream=True):
            pass
        plain, streamed = one_span_per_request(otel, sim, before, 2)
        check(plain, provider="groq", protocol="openai", streamed=False, model="llama-groq")
        # (a stream without include_usage has no usage chunk)
        assert streamed.attributes[semconv.GEN_AI_PROVIDER_NAME] == "groq"
        assert streamed.attributes[semconv.LLM_STREAMING] is True
        assert streamed.attributes[semconv.LLM_TIMING_SOURCE] == semconv.SOURCE_MEASURED
        _streamed_truth(streamed, sim)

    def test_mistral(self, otel, sim) -> None:
        client_module = pytest.importorskip("mistralai.client")
        client = client_module.Mistral(api_key="sim", server_url=f"http://127.0.0.1:{sim.port}")
        before = len(sim.truth)
        messages = [{"role": "user", "content": PROMPT}]
        client.chat.complete(model="mistral-sim", messages=messages)
        for _ in client.chat.stream(model="mistral-sim", messages=messages):
            pass
        plain, streamed = one_span_per_request(otel, sim, before, 2)
        check(plain, provider="mistral_ai", protocol="openai", streamed=False,
              model="mistral-sim")
        assert streamed.attributes[semconv.GEN_AI_PROVIDER_NAME] == "mistral_ai"
        assert streamed.attributes[semconv.LLM_STREAMING] is True

    def test_huggingface(self, otel, sim) -> None:
        hub = pytest.importorskip("huggingface_hub")
        client = hub.InferenceClient(base_url=f"http://127.0.0.1:{sim.port}/v1", api_key="sim")
        before = len(sim.truth)
        messages = [{"role": "user", "content": PROMPT}]
        client.chat_completion(messages, model="hf-sim", max_tokens=N_OUT)
        for _ in client.chat_completion(messages, model="hf-sim", max_tokens=N_OUT,
                                        stream=True):
            pass
        plain, streamed = one_span_per_request(otel, sim, before, 2)
        check(plain, provider="huggingface", protocol="openai", streamed=False, model="hf-sim")
        assert streamed.attributes[semconv.GEN_AI_PROVIDER_NAME] == "huggingface"
        assert streamed.attributes[semconv.LLM_STREAMING] is True


# -- a server of canned replies: a made-up protocol, broken framing -----------------------------
class _Canned(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    replies: ClassVar[dict[str, tuple[str, list[bytes]]]] = {}
    extra_headers: ClassVar[dict[str, dict[str, str]]] = {}
    # Paths answered chunked, each piece a chunk, with this pause before the last (empty)
    # chunk.
    chunked: ClassVar[dict[str, float]] = {}
    pause = 0.03

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        content_type, pieces = self.replies[self.path]
        self.send_response(200)
        self.send_header("content-type", content_type)
        if self.path in self.chunked:
            self._chunked(pieces, self.chunked[self.path])
            return
        self.send_header("content-length", str(sum(map(len, pieces))))
        for name, value in self.headers_for(self.path).items():
            self.send_header(name, value)
        self.end_headers()
        for piece in pieces:
            time.sleep(self.pause)
            self.wfile.write(piece)
            self.wfile.flush()

    def _chunked(self, pieces: list[bytes], last_pause: float) -> None:
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for piece in pieces:
            time.sleep(self.pause)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        time.sleep(last_pause)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    @classmethod
    def headers_for(cls, path: str) -> dict[str, str]:
        return cls.extra_headers.get(path, {})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def canned() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


def _post(port: int, path: str, body: Any, content_type: str = "application/json") -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", path, json.dumps(body), {"content-type": content_type})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return data


_MADE_UP = [b'{"token": "Hel"}\n', b'{"token": "lo"}\n', b'{"token": "", "end": true}\n']
_Canned.replies.update({
    "/made-up/generate": ("application/x-ndjson", _MADE_UP),
    "/made-up/other": ("application/x-ndjson", _MADE_UP),
    "/not-a-model": ("application/json", [b'{"ok": true}']),
    "/api/chat": ("application/x-ndjson", [
        b'{"model": "m", "message": {"role": "assistant", "content": "Hi"}, "done": false}\n',
        b'{"model": "m", "message": {"role": "assistant", "content": \n',
        b'{"model": "m", "message": {"content": ""}, "done": true, "eval_count": 2}\n']),
    "/model/m/converse-stream": ("application/vnd.amazon.eventstream", [
        event_message("messageStart", b'{"role": "assistant"}'),
        event_message("contentBlockDelta", b'{"delta": {"text": "Hi"}}')[:-7]]),
    "/v1/chat/completions": ("application/json", [b"<html>Bad gateway</html>"]),
    # Groq's non-streamed reply: its usage carries the server's own timings (seconds).
    "/openai/v1/chat/completions": ("application/json", [json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "llama-groq",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there"},
                     "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42,
                  "queue_time": 0.004, "prompt_time": 0.012, "completion_time": 0.02,
                  "total_time": 0.032}}).encode()]),
})
_Canned.replies["/x/v1/chat/completions"] = ("application/json", [json.dumps({
    "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "gpt-sim",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}}).encode()])
_Canned.extra_headers["/openai/v1/chat/completions"] = {"openai-processing-ms": "37"}
_Canned.extra_headers["/x/v1/chat/completions"] = {"openai-processing-ms": "37"}


class TestGenericCalls:
    """A model request to an endpoint no protocol knows: a generic span and one notice."""

    BODY: ClassVar[dict[str, Any]] = {"model": "made-up-1", "prompt": "hello", "stream": True}

    def test_span_and_notice(self, otel, canned, caplog) -> None:
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            t0 = time.perf_counter()
            data = _post(canned, "/made-up/generate", self.BODY)
            elapsed = time.perf_counter() - t0
            _post(canned, "/made-up/generate", self.BODY)
            _post(canned, "/made-up/other", self.BODY)
            _post(canned, "/not-a-model", {"kind": "telemetry", "values": [1, 2]})
            # urllib's form default and protobuf: the first may be JSON, the second never
            _post(canned, "/made-up/generate", self.BODY,
                  "application/x-www-form-urlencoded")
            _post(canned, "/made-up/generate", self.BODY, "application/x-protobuf")
        assert data == b"".join(_MADE_UP)  # the program's read, untouched
        spans = _calls(otel)
        assert len(spans) == 4
        a = spans[0].attributes
        assert spans[0].name == "chat made-up-1"
        assert a[semconv.GEN_AI_PROVIDER_NAME] == semconv.PROVIDER_UNKNOWN
        assert a[semconv.LLM_PROTOCOL] == semconv.PROTOCOL_GENERIC
        assert a[semconv.LLM_STREAMING] is True
        # The first response byte is the first token: the server waited one pause before
        # the first line and wrote the last after two more.
        assert a[semconv.LLM_TTFT] >= _Canned.pause * 0.8
        assert a[semconv.LLM_OUTPUT_GENERATION] >= 2 * _Canned.pause * 0.8
        assert a[semconv.LLM_OUTPUT_GENERATION] <= elapsed
        notices = [r.getMessage() for r in caplog.records if "no known protocol" in r.getMessage()]
        assert len(notices) == 2, notices  # one per host and path
        assert f"127.0.0.1:{canned}/made-up/generate" in notices[0]
        assert semconv.ENV_GENERIC_CALLS in notices[0]

    def test_other_json_is_let_go(self, otel, canned) -> None:
        import socket

        conn = http.client.HTTPConnection("127.0.0.1", canned, timeout=30)
        conn.request("POST", "/not-a-model", json.dumps({"kind": "telemetry"}),
                     {"content-type": "application/json"})
        # Its body showed no model request: the socket's reads are not watched.
        assert type(conn.sock) is socket.socket
        assert json.loads(conn.getresponse().read()) == {"ok": True}
        conn.close()
        assert _calls(otel) == []

    def test_off(self, otel, canned, monkeypatch) -> None:
        instrumentor = SocketsInstrumentor()
        monkeypatch.setenv(semconv.ENV_GENERIC_CALLS, "off")
        instrumentor.uninstrument()
        instrumentor.instrument()
        try:
            _post(canned, "/made-up/generate", self.BODY)
        finally:
            monkeypatch.delenv(semconv.ENV_GENERIC_CALLS)
            instrumentor.uninstrument()
            instrumentor.instrument()
        assert _calls(otel) == []


class TestServerReportedTimings:
    """Groq's usage timings and the ``openai-processing-ms`` header, beside the measured
    phases; a non-streamed call splits its server block with them."""

    def test_groq_usage_timings(self, otel, canned) -> None:
        groq = pytest.importorskip("groq")
        client = groq.Groq(api_key="sim", base_url=f"http://127.0.0.1:{canned}")
        reply = client.chat.completions.create(model="llama-groq",
                                               messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "Hi there"
        (span,) = _calls(otel)
        a = span.attributes
        assert a[semconv.GEN_AI_PROVIDER_NAME] == "groq"
        assert a[semconv.LLM_SERVER_PREFILL] == pytest.approx(0.012)
        assert a[semconv.LLM_SERVER_OUTPUT_GENERATION] == pytest.approx(0.02)
        assert a[semconv.LLM_QUEUE] == pytest.approx(0.004)
        assert a[semconv.LLM_SERVER_TOTAL] == pytest.approx(0.032)  # usage first, then header
        assert a[semconv.LLM_SERVER_TIMING_SOURCE] == semconv.SOURCE_SERVER_REPORTED
        assert a[semconv.LLM_TIMING_SOURCE] == semconv.SOURCE_SERVER_REPORTED

    def test_processing_header(self, otel, canned) -> None:
        data = _post(canned, "/x/v1/chat/completions",
                     {"model": "gpt-sim", "messages": [{"role": "user", "content": "hi"}]})
        assert json.loads(data)["usage"]["completion_tokens"] == 2
        (span,) = _calls(otel)
        a = span.attributes
        assert a[semconv.LLM_SERVER_TOTAL] == pytest.approx(0.037)
        assert a[semconv.LLM_SERVER_TIMING_SOURCE] == semconv.SOURCE_SERVER_REPORTED
        assert semconv.LLM_SERVER_PREFILL not in a


class TestBadInput:
    """Broken replies: the span ends with an error type; the program's read is untouched."""

    @pytest.mark.parametrize(("path", "body"), [
        ("/api/chat", {"model": "m", "messages": [{"role": "user", "content": "x"}]}),
        ("/model/m/converse-stream", {"messages": [{"role": "user", "content": []}]}),
        ("/v1/chat/completions", {"model": "m", "messages": []}),
    ])
    def test_malformed(self, otel, canned, path: str, body: Any) -> None:
        data = _post(canned, path, body)
        assert data == b"".join(_Canned.replies[path][1])
        (span,) = _calls(otel)
        assert span.attributes[semconv.ERROR_TYPE] == "MalformedResponse"
        assert span.status.status_code is StatusCode.ERROR
        # What was read before the break still counts: the NDJSON reply's first line.
        if path == "/api/chat":
            assert span.attributes[semconv.LLM_CHUNKS] == 2


def _broken(message: bytes, how: str) -> bytes:
    """An event stream message with a wrong CRC (a payload byte flipped), or cut short."""
    if how == "cut":
        return message[:-7]
    broken = bytearray(message)
    broken[-6] ^= 0xFF
    return bytes(broken)


class TestBrokenEventStream:
    """boto3's ConverseStream broken mid-stream (a message's CRC wrong, or the stream ending
    inside a message): the span ends with an error type, its first token still dated from
    the wire, and boto3 sees the same bytes and raises or ends as it would without us."""

    @pytest.mark.parametrize("how", ["crc", "cut"])
    def test_mid_stream(self, otel, canned, how: str) -> None:
        boto3 = pytest.importorskip("boto3")
        path = f"/model/broken-{how}/converse-stream"
        _Canned.replies[path] = ("application/vnd.amazon.eventstream", [
            event_message("messageStart", b'{"role": "assistant"}'),
            event_message("contentBlockDelta",
                          b'{"contentBlockIndex": 0, "delta": {"text": "Hi"}}'),
            _broken(event_message("contentBlockDelta",
                                  b'{"contentBlockIndex": 0, "delta": {"text": "!"}}'), how)])
        client = boto3.client("bedrock-runtime", endpoint_url=f"http://127.0.0.1:{canned}",
                              region_name="us-east-1", aws_access_key_id="k",
                              aws_secret_access_key="k")
        seen: list[str] = []
        raised: Exception | None = None
        try:
            for event in client.converse_stream(
                    modelId=f"broken-{how}",
                    messages=[{"role": "user", "content": [{"text": "x"}]}])["stream"]:
                seen.append(next(iter(event)))
        except Exception as exc:  # noqa: BLE001 (boto3's own error on a bad CRC)
            raised = exc
        # The host's call went on: it read what came before the break.
        assert seen[:2] == ["messageStart", "contentBlockDelta"], (seen, raised)
        assert (raised is not None) is (how == "crc"), raised
        (span,) = _calls(otel)
        a = span.attributes
        assert a[semconv.ERROR_TYPE] == "MalformedResponse"
        assert span.status.status_code is StatusCode.ERROR
        assert a[semconv.LLM_FIRST_TOKEN_SOURCE] in (semconv.ARRIVAL_MEASURED,
                                                     semconv.ARRIVAL_ESTIMATED), a


def _chunk(text: str, finish: str | None = None) -> bytes:
    return b"data: " + json.dumps({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
    }).encode() + b"\n\n"


class TestStreamEndsAtDone:
    """An OpenAI-compatible stream ends at its ``data: [DONE]``: a client that stops reading
    there (huggingface_hub's InferenceClient, its response left open until the client
    closes) still has its call's span ended, whole and without error, while it runs on."""

    def test_huggingface_stops_at_done(self, otel, canned) -> None:
        hub = pytest.importorskip("huggingface_hub")
        path = "/done-first/v1/chat/completions"
        _Canned.replies[path] = ("text/event-stream", [
            _chunk("Hi"), _chunk(" there", "stop"), b"data: [DONE]\n\n"])
        _Canned.chunked[path] = 1.0  # the body's last chunk comes a second after [DONE]
        client = hub.InferenceClient(base_url=f"http://127.0.0.1:{canned}/done-first/v1",
                                     api_key="k")
        t0 = time.perf_counter()
        text = "".join(c.choices[0].delta.content or "" for c in client.chat_completion(
            messages=[{"role": "user", "content": "x"}], model="m", stream=True))
        assert text == "Hi there"
        assert time.perf_counter() - t0 < 1.0, "the client waited for the last chunk"
        (span,) = _calls(otel)  # ended while the client (and its response) is still open
        a = span.attributes
        assert semconv.ERROR_TYPE not in a, a
        assert a[semconv.LLM_STREAMING] is True
        assert a[semconv.LLM_CHUNKS] == 2
        total = sum(a[attr] for attr, _, _ in semconv.LLM_PHASES)
        assert total == pytest.approx((span.end_time - span.start_time) / 1e9, abs=2e-6)
        assert (span.end_time - span.start_time) / 1e9 < 1.0
        client.close()
