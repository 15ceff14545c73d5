"""OpenAI ``POST /v1/chat/completions``: request parsing and chunk / body encoding."""

from __future__ import annotations

import time
import uuid
from typing import Any

from ._content import count_input_tokens
from ._errors import ApiError, require
from ._generation import Generation
from ._handler import ApiSpec, RequestInfo
from ._script import Segment
from ._state import ServerState

_JSON_OBJECT_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}}


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if schema is not None and not isinstance(schema, dict):
            raise ApiError(400, "Invalid type for 'response_format.json_schema.schema'.",
                           param="response_format")
        return schema or {}
    if fmt.get("type") == "json_object":
        return _JSON_OBJECT_SCHEMA
    return None


def parse_chat(body: dict[str, Any], state: ServerState) -> RequestInfo:
    """Validate a chat completions request."""
    model = require(body, "model", str)
    messages = require(body, "messages", list)
    if not messages:
        raise ApiError(400, "Invalid 'messages': empty array.", param="messages")
    if not all(isinstance(m, dict) and "role" in m for m in messages):
        raise ApiError(400, "Each message needs a 'role'.", param="messages")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int)
                                   or isinstance(max_tokens, bool) or max_tokens < 0):
        raise ApiError(400, "Invalid type for 'max_tokens'.", param="max_tokens")
    opts = body.get("stream_options") or {}
    return RequestInfo(
        body=body, model=model, stream=bool(body.get("stream")),
        input_tokens=count_input_tokens(body),
        assistant_turns=sum(1 for m in messages if m.get("role") == "assistant"),
        max_tokens=max_tokens, schema=_schema(body),
        tools_allowed=bool(body.get("tools")) and body.get("tool_choice") != "none",
        include_usage=bool(isinstance(opts, dict) and opts.get("include_usage")))


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


class ChatEncoder:
    """Chat completion chunks (``data:`` lines, ``[DONE]``) or one JSON body."""

    __slots__ = ("_created", "_gen", "_id", "_info", "_tool_index")
    sse_names = False
    done_marker = b"data: [DONE]\n\n"

    def __init__(self, gen: Generation, info: RequestInfo) -> None:
        self._gen = gen
        self._info = info
        self._id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self._created = int(time.time())
        self._tool_index = -1

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": self._id, "object": "chat.completion.chunk", "created": self._created,
                "model": self._info.model, "system_fingerprint": "fp_simulator",
                "choices": [{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": finish}]}

    def head(self) -> list[dict[str, Any]]:
        """The role-only first delta, as the real API sends it."""
        return [self._chunk({"role": "assistant", "content": "", "refusal": None})]

    def piece(self, index: int, seg: Segment, text: str, first: bool) -> list[dict[str, Any]]:
        """One chunk of tokens (plus the tool call's opening chunk when it starts)."""
        if seg.kind == "text":
            return [self._chunk({"content": text})]
        events = []
        if first:
            self._tool_index += 1
            events.append(self._chunk({"tool_calls": [{
                "index": self._tool_index, "id": seg.call_id, "type": "function",
                "function": {"name": seg.name, "arguments": ""}}]}))
        events.append(self._chunk({"tool_calls": [{
            "index": self._tool_index, "function": {"arguments": text}}]}))
        return events

    def tail(self) -> list[dict[str, Any]]:
        """The finish_reason chunk and, if asked for, the usage chunk."""
        events = [self._chunk({}, self._gen.plan.finish)]
        if self._info.include_usage:
            usage = self._chunk({})
            usage["choices"] = []
            usage["usage"] = _usage(self._gen.input_tokens, self._gen.plan.output_tokens)
            events.append(usage)
        return events

    def body(self) -> dict[str, Any]:
        """The non-streaming ``chat.completion`` object."""
        plan = self._gen.plan
        tools = plan.tool_segments()
        message: dict[str, Any] = {"role": "assistant", "content": plan.text() or None,
                                   "refusal": None, "annotations": []}
        if tools:
            message["tool_calls"] = [
                {"id": s.call_id, "type": "function",
                 "function": {"name": s.name, "arguments": s.text}} for s in tools]
        return {"id": self._id, "object": "chat.completion", "created": self._created,
                "model": self._info.model, "system_fingerprint": "fp_simulator",
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": plan.finish}],
                "usage": _usage(self._gen.input_tokens, plan.output_tokens)}


CHAT = ApiSpec("chat.completions", parse_chat, ChatEncoder)
