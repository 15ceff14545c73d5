"""Which server-sent events carry output, from their bytes: the same answer as the providers'
per-chunk rules, for each API's real event shapes (and JSON written with or without spaces)."""

from __future__ import annotations

import pytest

from agent_latency.instrumentation.llm._output_events import is_output_event

CASES = [
    # OpenAI chat completions
    (b'data: {"choices":[{"delta":{"role":"assistant","content":"","refusal":null}}]}', False),
    (b'data: {"choices":[{"index":0,"delta":{"content":"lorem"}}]}', True),
    (b'data: {"choices": [{"index": 0, "delta": {"content": " ipsum"}}]}', True),
    (b'data: {"choices":[{"delta":{"content":"\\"quoted"}}]}', True),
    (b'data: {"choices":[{"delta":{"reasoning_content":"think"}}]}', True),
    (b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}',
     True),
    (b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}', False),
    (b'data: {"choices":[],"usage":{"prompt_tokens":3}}', False),
    # the Responses API
    (b'event: response.created\ndata: {"type":"response.created","response":{"output":[]}}',
     False),
    (b'data: {"type":"response.output_text.delta","delta":"lo"}', True),
    (b'data: {"type":"response.function_call_arguments.delta","delta":"{"}', True),
    (b'data: {"type":"response.output_item.added","item":{"type":"message","content":[]}}',
     False),
    (b'data: {"type":"response.output_item.added","item":{"type":"function_call","name":"f"}}',
     True),
    (b'data: {"type":"response.content_part.added","part":{"type":"output_text","text":""}}',
     False),
    (b'data: {"type":"response.completed","response":{"output":[{"content":'
     b'[{"type":"output_text","text":"lorem"}]}]}}', False),
    # Anthropic Messages
    (b'event: message_start\ndata: {"type":"message_start","message":{"content":[]}}', False),
    (b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
     b'"content_block": {"type": "text", "text": ""}}', False),
    (b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
     b'"delta": {"type": "text_delta", "text": "hi"}}', True),
    (b'data: {"type":"content_block_delta","delta":{"type":"input_json_delta",'
     b'"partial_json":"{"}}', True),
    (b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"}}', False),
    # Gemini
    (b'data: {"candidates": [{"content": {"parts": [{"text": "lorem"}], "role": "model"}}]}',
     True),
    (b'data: {"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]}',
     False),
    (b'data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]}}]}',
     True),
]


class TestOutputEvents:
    """Output events are told from the others by their bytes alone."""

    @pytest.mark.parametrize(("event", "output"), CASES)
    def test_event(self, event: bytes, output: bool) -> None:
        assert is_output_event(event + b"\n\n") is output

    def test_chunked_framing_around_the_event(self) -> None:
        event = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
        assert is_output_event(b"%x\r\n" % len(event) + event)
