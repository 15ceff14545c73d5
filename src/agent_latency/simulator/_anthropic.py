"""Anthropic ``POST /v1/messages``: request parsing and event / body encoding."""

from __future__ import annotations

import uuid
from typing import Any

from ._content import count_input_tokens
from ._errors import ApiError, require
from ._generation import Generation
from ._handler import ApiSpec, RequestInfo
from ._script import Segment
from ._state import ServerState

_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def parse_messages(body: dict[str, Any], state: ServerState) -> RequestInfo:
    """Validate a Messages API request (``max_tokens`` is required, as in the real API)."""
    model = require(body, "model", str)
    messages = require(body, "messages", list)
    max_tokens = require(body, "max_tokens", int)
    if not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise ApiError(400, "messages: each message needs a 'role'", param="messages")
    choice = body.get("tool_choice") or {}
    if not isinstance(choice, dict):
        raise ApiError(400, "tool_choice: Input should be an object", param="tool_choice")
    return RequestInfo(
        body=body, model=model, stream=bool(body.get("stream")),
        input_tokens=count_input_tokens(body),
        assistant_turns=sum(1 for m in messages if m.get("role") == "assistant"),
        max_tokens=max_tokens,
        tools_allowed=bool(body.get("tools")) and choice.get("type") != "none")


def _tool_id(seg: Segment) -> str:
    return "toolu_" + seg.call_id.removeprefix("call_")


class MessagesEncoder:
    """Messages API events (``event:`` + ``data:``) or one JSON body."""

    __slots__ = ("_gen", "_id", "_info", "_open")
    sse_names = True
    done_marker = b""

    def __init__(self, gen: Generation, info: RequestInfo) -> None:
        self._gen = gen
        self._info = info
        self._id = f"msg_{uuid.uuid4().hex[:24]}"
        self._open = -1

    def _message(self, content: list[Any], stop: str | None, output_tokens: int) -> dict[str, Any]:
        return {"id": self._id, "type": "message", "role": "assistant",
                "model": self._info.model, "content": content, "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": self._gen.input_tokens, "output_tokens": output_tokens,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}

    def head(self) -> list[dict[str, Any]]:
        """``message_start`` (with input usage) and a ``ping``."""
        return [{"type": "message_start", "message": self._message([], None, 1)},
                {"type": "ping"}]

    def piece(self, index: int, seg: Segment, text: str, first: bool) -> list[dict[str, Any]]:
        """A delta, opening its content block (and closing the previous) when it starts."""
        events: list[dict[str, Any]] = []
        if first:
            if self._open >= 0:
                events.append({"type": "content_block_stop", "index": self._open})
            self._open = index
            block = ({"type": "text", "text": ""} if seg.kind == "text" else
                     {"type": "tool_use", "id": _tool_id(seg), "name": seg.name, "input": {}})
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        delta = ({"type": "text_delta", "text": text} if seg.kind == "text" else
                 {"type": "input_json_delta", "partial_json": text})
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
        return events

    def tail(self) -> list[dict[str, Any]]:
        """Close the last block, ``message_delta`` with output usage, ``message_stop``."""
        events: list[dict[str, Any]] = []
        if self._open >= 0:
            events.append({"type": "content_block_stop", "index": self._open})
        plan = self._gen.plan
        events.append({"type": "message_delta",
                       "delta": {"stop_reason": _STOP[plan.finish], "stop_sequence": None},
                       "usage": {"output_tokens": plan.output_tokens}})
        events.append({"type": "message_stop"})
        return events

    def body(self) -> dict[str, Any]:
        """The non-streaming ``message`` object."""
        plan = self._gen.plan
        content = [{"type": "text", "text": s.text} if s.kind == "text" else
                   {"type": "tool_use", "id": _tool_id(s), "name": s.name, "input": s.arguments()}
                   for s in plan.segments]
        return self._message(content, _STOP[plan.finish], plan.output_tokens)


MESSAGES = ApiSpec("messages", parse_messages, MessagesEncoder)
