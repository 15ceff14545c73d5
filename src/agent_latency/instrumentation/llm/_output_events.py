"""Which server-sent events carry output, read from the wire's bytes: the same rule as each
provider's per-chunk ``observe``, on the event's JSON as the server sent it, whatever client
library reads it (an SDK, litellm's stream wrapper that drops or merges chunks, a plain
generator).

The JSON's shape says which API it is: OpenAI chat completions (``choices``), the
Responses API and Anthropic Messages (``type``), Gemini (``candidates``).
"""

from __future__ import annotations

import json
from typing import Any

#: The Responses API's events that carry output.
RESPONSES_OUTPUT = frozenset({
    "response.output_text.delta", "response.function_call_arguments.delta",
    "response.reasoning_text.delta", "response.reasoning_summary_text.delta",
    "response.refusal.delta", "response.custom_tool_call_input.delta",
    "response.audio.delta", "response.audio.transcript.delta",
    "response.code_interpreter_call_code.delta", "response.mcp_call_arguments.delta",
})
#: Output items that are output the moment they are added: a call's name is the first
#: thing generated, before any argument delta.
RESPONSES_CALL_ITEMS = frozenset({"function_call", "custom_tool_call", "mcp_call"})
_GEMINI_OUTPUT_PARTS = ("text", "functionCall", "function_call", "inlineData", "inline_data",
                        "executableCode", "executable_code")


def _payload(event: bytes) -> Any:
    data = [line[5:].strip() for line in event.splitlines() if line.startswith(b"data:")]
    if not data:
        return None
    try:
        return json.loads(b"\n".join(data))
    except ValueError:
        return None  # not JSON, or split by the transfer encoding: not dated as output


def _chat(obj: dict[str, Any]) -> bool:
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and (
                delta.get("content") or delta.get("tool_calls") or delta.get("refusal")
                or delta.get("reasoning_content") or delta.get("reasoning")
                or delta.get("function_call")):
            return True
    return False


def _gemini(obj: dict[str, Any]) -> bool:
    for candidate in obj.get("candidates") or ():
        content = candidate.get("content") if isinstance(candidate, dict) else None
        for part in (content or {}).get("parts") or ():
            if isinstance(part, dict) and any(part.get(k) for k in _GEMINI_OUTPUT_PARTS):
                return True
    return False


def is_output_event(event: bytes) -> bool:
    """Whether one SSE event's bytes carry output: content, reasoning, or a tool call."""
    obj = _payload(event)
    if not isinstance(obj, dict):
        return False
    if "choices" in obj:
        return _chat(obj)
    kind = obj.get("type")
    if isinstance(kind, str):
        if kind == "content_block_delta":  # Anthropic Messages
            return True
        if kind in RESPONSES_OUTPUT:
            return True
        if kind == "response.output_item.added":
            item = obj.get("item")
            return isinstance(item, dict) and item.get("type") in RESPONSES_CALL_ITEMS
        return False
    if "candidates" in obj:
        return _gemini(obj)
    return False
