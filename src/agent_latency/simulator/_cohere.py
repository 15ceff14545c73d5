"""Cohere's v2 chat API: ``POST /v2/chat``, request parsing and event / body encoding.

A stream is server-sent events whose JSON names its ``type``: ``message-start``, a
``content-start`` / ``content-delta``… / ``content-end`` block for text, ``tool-call-start``
/ ``tool-call-delta``… / ``tool-call-end`` for a tool call, and ``message-end`` with the
finish reason and usage.
"""

from __future__ import annotations

import uuid
from typing import Any

from ._content import count_input_tokens
from ._errors import ApiError, require
from ._generation import Generation
from ._handler import ApiSpec, RequestInfo
from ._script import Segment
from ._state import ServerState

_FINISH = {"stop": "COMPLETE", "tool_calls": "TOOL_CALL", "length": "MAX_TOKENS"}


def parse_chat(body: dict[str, Any], state: ServerState) -> RequestInfo:
    """Validate a v2 chat request."""
    model = require(body, "model", str)
    messages = require(body, "messages", list)
    if not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise ApiError(400, "messages: each message needs a 'role'", param="messages")
    limit = body.get("max_tokens")
    return RequestInfo(body=body, model=model, stream=bool(body.get("stream")),
                       input_tokens=count_input_tokens(body),
                       assistant_turns=sum(1 for m in messages if m.get("role") == "assistant"),
                       max_tokens=limit if isinstance(limit, int) and limit >= 0 else None,
                       tools_allowed=bool(body.get("tools")))


class CohereEncoder:
    """v2 stream events (``event:`` + ``data:``) or one JSON body."""

    __slots__ = ("_gen", "_id", "_open")
    sse_names = True
    done_marker = b""

    def __init__(self, gen: Generation, info: RequestInfo) -> None:
        self._gen = gen
        self._id = str(uuid.uuid4())
        self._open: tuple[int, str] | None = None

    def _usage(self) -> dict[str, Any]:
        tokens = {"input_tokens": self._gen.input_tokens,
                  "output_tokens": self._gen.plan.output_tokens}
        return {"billed_units": dict(tokens), "tokens": tokens}

    def _close(self) -> list[dict[str, Any]]:
        if self._open is None:
            return []
        index, kind = self._open
        self._open = None
        return [{"type": "content-end" if kind == "text" else "tool-call-end", "index": index}]

    def head(self) -> list[dict[str, Any]]:
        """``message-start``."""
        return [{"type": "message-start", "id": self._id,
                 "delta": {"message": {"role": "assistant", "content": [], "tool_plan": "",
                                       "tool_calls": [], "citations": []}}}]

    def piece(self, index: int, seg: Segment, text: str, first: bool) -> list[dict[str, Any]]:
        """A delta, opening its block (and closing the previous) when it starts."""
        events: list[dict[str, Any]] = []
        if first:
            events += self._close()
            self._open = (index, seg.kind)
            if seg.kind == "text":
                events.append({"type": "content-start", "index": index,
                               "delta": {"message": {"content": {"type": "text", "text": ""}}}})
            else:
                events.append({"type": "tool-call-start", "index": index, "delta": {
                    "message": {"tool_calls": {"id": seg.call_id, "type": "function",
                                               "function": {"name": seg.name,
                                                            "arguments": ""}}}}})
        if seg.kind == "text":
            events.append({"type": "content-delta", "index": index,
                           "delta": {"message": {"content": {"text": text}}}})
        else:
            events.append({"type": "tool-call-delta", "index": index, "delta": {
                "message": {"tool_calls": {"function": {"arguments": text}}}}})
        return events

    def tail(self) -> list[dict[str, Any]]:
        """Close the last block; ``message-end`` with the finish reason and usage."""
        return [*self._close(), {"type": "message-end", "id": self._id, "delta": {
            "finish_reason": _FINISH[self._gen.plan.finish], "usage": self._usage()}}]

    def body(self) -> dict[str, Any]:
        """The non-streaming reply."""
        plan = self._gen.plan
        message: dict[str, Any] = {"role": "assistant"}
        text = plan.text()
        if text:
            message["content"] = [{"type": "text", "text": text}]
        tools = plan.tool_segments()
        if tools:
            message["tool_calls"] = [{"id": s.call_id, "type": "function",
                                      "function": {"name": s.name, "arguments": s.text}}
                                     for s in tools]
        return {"id": self._id, "finish_reason": _FINISH[plan.finish], "message": message,
                "usage": self._usage()}


CHAT = ApiSpec("cohere.chat", parse_chat, CohereEncoder)
