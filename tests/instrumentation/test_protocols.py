"""The wire protocols, each one module: which paths are theirs, how their streams are framed,
which events carry output, which provider a request is named for, and which requests no
protocol knows still look like model requests."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from agent_latency import semconv
from agent_latency.instrumentation import protocols
from agent_latency.instrumentation.protocols import (
    MalformedResponse,
    bedrock,
    cohere,
    framer_for,
    framing_of,
    looks_like_model_request,
    match,
    ollama,
    provider_of,
)
from agent_latency.instrumentation.protocols._framing import EVENT_STREAM, NDJSON, SSE
from agent_latency.simulator._bedrock import event_message


class TestRoutes:
    """Which protocol and endpoint a POST's path is."""

    @pytest.mark.parametrize(("path", "protocol", "model", "streams"), [
        ("/v1/chat/completions", "openai", "", False),
        ("/openai/v1/chat/completions", "openai", "", False),
        ("/v1/messages", "anthropic", "", False),
        ("/v1beta/models/g-1:streamGenerateContent", "gemini", "g-1", True),
        ("/api/chat", "ollama", "", False),
        ("/api/generate", "ollama", "", False),
        ("/api/embed", "ollama", "", False),
        ("/v2/chat", "cohere", "", False),
        ("/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse", "bedrock",
         "anthropic.claude-3-haiku-20240307-v1:0", False),
        ("/model/m/converse-stream", "bedrock", "m", True),
        ("/model/m/invoke", "bedrock", "m", False),
        ("/model/m/invoke-with-response-stream", "bedrock", "m", True),
    ])
    def test_known(self, path: str, protocol: str, model: str, streams: bool) -> None:
        found = match(path)
        assert found is not None
        assert (found[0].name, found[1].model, found[1].streams) == (protocol, model, streams)

    @pytest.mark.parametrize("path", ["/api/tags", "/v2/other", "/model/m/other", "/model//x",
                                      "/v1/traces"])
    def test_unknown(self, path: str) -> None:
        assert match(path) is None

    def test_every_protocol_is_listed_once(self) -> None:
        names = [p.name for p in protocols.PROTOCOLS]
        assert sorted(names) == ["anthropic", "bedrock", "cohere", "gemini", "ollama", "openai"]


class TestFraming:
    """Streams cut into events whatever the reads' sizes; broken framing is reported."""

    def test_content_types(self) -> None:
        assert framing_of("text/event-stream; charset=utf-8") == SSE
        assert framing_of("application/x-ndjson") == NDJSON
        assert framing_of("application/vnd.amazon.eventstream") == EVENT_STREAM
        assert framing_of("application/json") is None

    def test_ndjson_lines_across_reads(self) -> None:
        framer = framer_for(NDJSON)
        data = b'{"a": 1}\n{"b":\n 2}\n'.replace(b":\n ", b": ")
        events = [e for i in range(len(data)) for e in framer.feed(data[i:i + 1])]
        framer.close()
        assert events == [b'data: {"a": 1}', b'data: {"b": 2}']
        assert framer.error is None

    def test_a_malformed_ndjson_line(self) -> None:
        framer = framer_for(NDJSON)
        assert framer.feed(b'{"a": 1}\nnot json\n{"b": 2}\n') == [b'data: {"a": 1}',
                                                                  b'data: {"b": 2}']
        assert isinstance(framer.error, MalformedResponse)

    def test_event_stream_messages_across_reads(self) -> None:
        data = (event_message("messageStart", b'{"role": "assistant"}')
                + event_message("contentBlockDelta", b'{"delta": {"text": "hi"}}'))
        framer = framer_for(EVENT_STREAM)
        events = [e for i in range(len(data)) for e in framer.feed(data[i:i + 1])]
        framer.close()
        assert events == [b'event: messageStart\ndata: {"role": "assistant"}',
                          b'event: contentBlockDelta\ndata: {"delta": {"text": "hi"}}']
        assert framer.error is None

    def test_a_bedrock_chunk_is_decoded(self) -> None:
        inner = b'{"type": "content_block_delta", "delta": {"text": "x"}}'
        payload = json.dumps({"bytes": base64.b64encode(inner).decode()}).encode()
        (event,) = framer_for(EVENT_STREAM).feed(event_message("chunk", payload))
        assert event == b"event: chunk\ndata: " + inner
        assert bedrock.PROTOCOL.is_output(event)

    def test_a_truncated_event_stream(self) -> None:
        framer = framer_for(EVENT_STREAM)
        message = event_message("contentBlockDelta", b'{"delta": {"text": "hi"}}')
        assert framer.feed(message[:-5]) == []
        framer.close()
        assert isinstance(framer.error, MalformedResponse)
        assert "ended inside a frame" in str(framer.error)

    def test_an_exception_message(self) -> None:
        from agent_latency.instrumentation.protocols._framing import StreamException
        from agent_latency.simulator._bedrock import event_message as message

        # (the simulator writes events only: this message is built by the same rules)
        headers = {":exception-type": "throttlingException", ":message-type": "exception"}
        block = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + len(v).to_bytes(2, "big")
                         + v.encode() for k, v in headers.items())
        payload = b'{"message": "slow down"}'
        prelude = (12 + len(block) + len(payload) + 4).to_bytes(4, "big") + len(
            block).to_bytes(4, "big")
        head = prelude + zlib.crc32(prelude).to_bytes(4, "big") + block + payload
        exception = head + zlib.crc32(head).to_bytes(4, "big")
        framer = framer_for(EVENT_STREAM)
        assert framer.feed(message("messageStart", b"{}") + exception) == [
            b"event: messageStart\ndata: {}"]
        assert isinstance(framer.error, StreamException)
        assert "throttlingException" in str(framer.error)

    def test_a_wrong_crc(self) -> None:
        message = bytearray(event_message("messageStop", b'{"stopReason": "end_turn"}'))
        message[-1] ^= 0xFF
        framer = framer_for(EVENT_STREAM)
        assert framer.feed(bytes(message)) == []
        assert "CRC" in str(framer.error)
        prelude = bytearray(message[:12])
        prelude[8] ^= 0xFF
        framer = framer_for(EVENT_STREAM)
        framer.feed(bytes(prelude) + bytes(message[12:]))
        assert "prelude CRC" in str(framer.error)
        assert zlib.crc32(b"") == 0  # (the CRC is zlib's CRC32)


class TestOutputEvents:
    """Which events of the new protocols carry output."""

    @pytest.mark.parametrize(("event", "output"), [
        (b'data: {"message": {"role": "assistant", "content": "Hi"}, "done": false}', True),
        (b'data: {"message": {"role": "assistant", "content": ""}, "done": true}', False),
        (b'data: {"message": {"role": "assistant", "content": "", "tool_calls": [{}]}}', True),
        (b'data: {"response": "Hi", "done": false}', True),
        (b'data: {"response": "", "done": true, "eval_count": 3}', False),
    ])
    def test_ollama(self, event: bytes, output: bool) -> None:
        assert ollama.PROTOCOL.is_output(event) is output

    @pytest.mark.parametrize(("kind", "output"), [
        ("message-start", False), ("content-start", False), ("content-delta", True),
        ("tool-call-start", True), ("tool-call-delta", True), ("tool-plan-delta", True),
        ("content-end", False), ("message-end", False),
    ])
    def test_cohere(self, kind: str, output: bool) -> None:
        event = f'event: {kind}\ndata: {{"type": "{kind}", "delta": {{"message": {{"content": ' \
                f'{{"text": ""}}}}}}}}'.encode()
        assert cohere.PROTOCOL.is_output(event) is output

    @pytest.mark.parametrize(("name", "output"), [
        ("messageStart", False), ("contentBlockStart", False), ("contentBlockDelta", True),
        ("contentBlockStop", False), ("messageStop", False), ("metadata", False),
    ])
    def test_bedrock_converse(self, name: str, output: bool) -> None:
        (event,) = framer_for(EVENT_STREAM).feed(event_message(name, b'{"x": 1}'))
        assert bedrock.PROTOCOL.is_output(event) is output


class TestProviders:
    """gen_ai.provider.name from the host, else the client library, else the protocol."""

    @pytest.mark.parametrize(("host", "headers", "provider"), [
        ("api.groq.com", {"user-agent": "OpenAI/Python 3.57.0"}, "groq"),
        ("api.mistral.ai", {}, "mistral_ai"),
        ("api.deepseek.com", {}, "deepseek"),
        ("api.x.ai", {}, "x_ai"),
        ("api.perplexity.ai", {}, "perplexity"),
        ("my-team.openai.azure.com", {}, "azure.ai.openai"),
        ("bedrock-runtime.us-east-1.amazonaws.com", {}, "aws.bedrock"),
        ("api.openai.com", {}, "openai"),
        ("127.0.0.1", {"user-agent": "Groq/Python 1.7.0"}, "groq"),
        ("127.0.0.1", {"user-agent": "ollama-python/0.6.3 (x86_64 linux)"}, "ollama"),
        ("127.0.0.1", {"x-fern-sdk-name": "cohere"}, "cohere"),
        ("127.0.0.1", {"user-agent": "Boto3/1.44 md/Botocore#1.44"}, "aws.bedrock"),
        ("127.0.0.1", {}, "openai"),
        ("notapi.groq.com.example", {}, "openai"),
    ])
    def test_named(self, host: str, headers: dict[str, str], provider: str) -> None:
        assert provider_of(semconv.PROVIDER_OPENAI, host, 8000, headers) == provider

    def test_ollama_default_port(self) -> None:
        assert provider_of(semconv.PROVIDER_OPENAI, "127.0.0.1", 11434, {}) == "ollama"

    def test_remembered_per_server(self) -> None:
        """A server's answer is remembered (asked again, the same), at most 256 of them."""
        from agent_latency.instrumentation.protocols import _providers

        for round_ in range(2):
            for n in range(300):
                host = f"h{n}.api.groq.com" if n % 2 else f"h{n}.example"
                assert _providers.provider_of_host(host, 443) == (
                    "groq" if n % 2 else None), (round_, n)
            assert len(_providers._ASKED) <= 256


class TestGenericRequests:
    """Which JSON bodies no protocol knows look like model requests."""

    @pytest.mark.parametrize(("body", "model_request"), [
        ({"model": "m", "messages": []}, True),
        ({"model": "m", "prompt": "hi"}, True),
        ({"model": "m", "contents": []}, True),
        ({"prompt": "hi", "max_new_tokens": 5}, True),
        ({"inputs": "hi", "parameters": {"temperature": 0.1}}, True),
        ({"prompt": "hi", "stream": True}, True),
        ({"prompt": "hi"}, False),
        ({"model": "m"}, False),
        ({"resourceSpans": []}, False),
        ([1, 2], False),
    ])
    def test_looks_like(self, body: object, model_request: bool) -> None:
        assert looks_like_model_request(body) is model_request


class TestSdkLayerProvider:
    """An SDK sent to another provider's host is named for that provider."""

    @pytest.mark.parametrize(("host", "provider"), [
        ("api.groq.com", "groq"), ("api.deepseek.com", "deepseek"),
        ("api.openai.com", "openai"), ("127.0.0.1", "openai")])
    def test_openai_sdk(self, host: str, provider: str) -> None:
        from agent_latency.instrumentation.llm import LLMCall, Settings
        from agent_latency.instrumentation.llm.openai import CHAT

        call = LLMCall(CHAT, Settings(), "m", {}, streaming=False, server=(host, 443))
        call.span.end()
        assert call.provider == provider


class TestServerTimings:
    """OpenAI-compatible servers' own timings are read from each shape they come in."""

    @staticmethod
    def _read(body_extra: object, usage_extra: object = None) -> object:
        from types import SimpleNamespace

        from agent_latency.instrumentation.llm._info import Info
        from agent_latency.instrumentation.protocols.openai import server_body_timing

        info = Info()
        usage = SimpleNamespace(model_extra=usage_extra)
        server_body_timing(info, SimpleNamespace(model_extra=body_extra), usage)
        return info

    def test_vllm_metrics(self) -> None:
        info = self._read({"metrics": {"generation_time_ms": 40.0,
                                       "time_to_first_token_ms": 10.0, "queue_time_ms": 2.0}})
        assert (info.server_generation, info.server_prefill, info.server_queue) == (
            pytest.approx(0.04), pytest.approx(0.01), pytest.approx(0.002))

    def test_groq_usage(self) -> None:
        info = self._read({}, {"completion_time": 0.5, "prompt_time": 0.1,
                               "queue_time": 0.01, "total_time": 0.61})
        assert (info.server_generation, info.server_prefill, info.server_queue,
                info.server_total) == (0.5, 0.1, 0.01, 0.61)

    def test_groq_stream_under_x_groq(self) -> None:
        info = self._read({"x_groq": {"usage": {"completion_time": 0.3, "prompt_time": 0.2}}})
        assert (info.server_generation, info.server_prefill) == (0.3, 0.2)

    def test_cerebras_time_info(self) -> None:
        info = self._read({"time_info": {"completion_time": 0.7, "prompt_time": 0.05}})
        assert (info.server_generation, info.server_prefill) == (0.7, 0.05)

    def test_any_mapping_type(self) -> None:
        from types import MappingProxyType

        info = self._read(MappingProxyType({"time_info": MappingProxyType(
            {"completion_time": 0.7, "prompt_time": 0.05})}))
        assert (info.server_generation, info.server_prefill) == (0.7, 0.05)

    @pytest.mark.parametrize("body_extra, usage_extra", [
        (None, None), ({}, {}), ({"metrics": "odd"}, ["odd"]), ({"x_groq": {"id": "x"}}, None),
    ], ids=["none", "empty", "odd-shapes", "no-timings"])
    def test_nothing_reported(self, body_extra: object, usage_extra: object) -> None:
        info = self._read(body_extra, usage_extra)
        assert (info.server_generation, info.server_prefill, info.server_queue,
                info.server_total) == (None, None, None, None)
