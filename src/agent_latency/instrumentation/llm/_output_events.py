"""Which server-sent events carry output, read from the wire's bytes: the same rule as each
provider's per-chunk ``observe``, on the event as the server sent it, whatever client library
reads it (an SDK, litellm's stream wrapper that drops or merges chunks, a plain generator).

One compiled pattern per rule, searched in C (about a microsecond an event; no JSON parse):

- OpenAI chat completions: a ``delta`` with non-empty ``content``, ``refusal``,
  ``reasoning_content`` or ``reasoning``, or with ``tool_calls`` / ``function_call``;
- the Responses API: an output delta event, or an added function/custom-tool/MCP call item;
- Anthropic Messages: ``content_block_delta``;
- Gemini: a part with non-empty ``text``, a ``functionCall``, ``inlineData`` or
  ``executableCode``.
"""

from __future__ import annotations

import re

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

_TYPES = "|".join(re.escape(t) for t in sorted(RESPONSES_OUTPUT | {"content_block_delta"}))
_OUTPUT = re.compile(
    # chat completions and Gemini: a text field that is not empty (a JSON string whose first
    # character is not its closing quote)
    rb'"(?:content|refusal|reasoning_content|reasoning|text)"\s*:\s*"(?:[^"\\]|\\.)'
    # a call being generated
    rb'|"(?:tool_calls|function_call|functionCall|inlineData|executableCode)"\s*:\s*[\[{]'
    # Responses and Anthropic: an output event
    rb'|"type"\s*:\s*"(?:' + _TYPES.encode() + rb')"')
_ITEM_ADDED = re.compile(rb'"type"\s*:\s*"response\.output_item\.added"')
_CALL_ITEM = re.compile(
    rb'"type"\s*:\s*"(?:' + "|".join(sorted(RESPONSES_CALL_ITEMS)).encode() + rb')"')
# Events whose text fields are not output: the Responses API's item/part announcements and
# its final events repeat the text generated so far.
_NOT_OUTPUT = re.compile(
    rb'"type"\s*:\s*"(?:response\.(?:created|in_progress|completed|incomplete|failed|'
    rb'output_item\.(?:added|done)|content_part\.(?:added|done)|output_text\.done|'
    rb'function_call_arguments\.done|reasoning_text\.done|refusal\.done)|'
    rb'message_start|message_delta|message_stop|content_block_start|content_block_stop)"')


def is_output_event(event: bytes) -> bool:
    """Whether one SSE event's bytes carry output: content, reasoning, or a tool call."""
    if _ITEM_ADDED.search(event):
        return _CALL_ITEM.search(event, event.find(b'"item"')) is not None
    if _NOT_OUTPUT.search(event):
        return False
    return _OUTPUT.search(event) is not None
