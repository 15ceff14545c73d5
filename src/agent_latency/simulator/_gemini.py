"""Gemini API (google-genai): ``POST /{version}/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse``, request parsing and chunk / body encoding.

The model comes from the URL, streaming from the method. A stream is ``data:`` events,
each a ``GenerateContentResponse``; every chunk carries ``usageMetadata`` with the prompt
count, and the last one adds ``finishReason`` and the candidates count. A function call
goes out whole in one chunk, sent when the last token of its arguments is due.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from ._content import count_input_tokens
from ._errors import ApiError, error_response
from ._faults import STATUS
from ._generation import Generation
from ._handler import ApiSpec, RequestInfo, serve
from ._script import Segment
from ._state import ServerState

API = "gemini"
VERSIONS = ("v1", "v1beta", "v1alpha")
_METHODS = {"generateContent": False, "streamGenerateContent": True}  # method -> stream
_FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS"}
# Gemini answers an overloaded model with 503 UNAVAILABLE, which its SDK retries
_FAULT_STATUSES = {**STATUS, "overloaded": 503}


def _contents(body: dict[str, Any]) -> list[dict[str, Any]]:
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise ApiError(400, "* GenerateContentRequest.contents: contents is not specified")
    for entry in contents:
        if not isinstance(entry, dict) or not isinstance(entry.get("parts"), list):
            raise ApiError(400, "* GenerateContentRequest.contents: each entry needs 'parts'")
    return contents


def _max_output_tokens(config: dict[str, Any]) -> int | None:
    value = config.get("maxOutputTokens")
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or value < 0):
        raise ApiError(400, "Invalid value at 'generation_config.max_output_tokens'")
    return value


def _schema(config: dict[str, Any]) -> dict[str, Any] | None:
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    return schema if isinstance(schema, dict) else None


def _tools_allowed(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    declared = isinstance(tools, list) and any(
        isinstance(t, dict) and t.get("functionDeclarations") for t in tools)
    tool_config = body.get("toolConfig") or {}
    calling = tool_config.get("functionCallingConfig") if isinstance(tool_config, dict) else None
    mode = calling.get("mode") if isinstance(calling, dict) else None
    return declared and mode != "NONE"


def parse_generate_content(body: dict[str, Any], model: str, stream: bool) -> RequestInfo:
    """Validate a ``generateContent`` request for ``model`` (taken from the URL)."""
    contents = _contents(body)
    config = body.get("generationConfig") or {}
    if not isinstance(config, dict):
        raise ApiError(400, "Invalid value at 'generation_config'")
    return RequestInfo(
        body=body, model=model, stream=stream, input_tokens=count_input_tokens(body),
        assistant_turns=sum(1 for c in contents if c.get("role") == "model"),
        max_tokens=_max_output_tokens(config),
        schema=_schema(config),
        tools_allowed=_tools_allowed(body))


def _part(seg: Segment, text: str) -> dict[str, Any]:
    if seg.kind == "text":
        return {"text": text}
    return {"functionCall": {"name": seg.name, "args": seg.arguments()}}


class GeminiEncoder:
    """``GenerateContentResponse`` chunks (``data:`` lines) or one JSON body."""

    __slots__ = ("_chars_left", "_finished", "_gen", "_id", "_info")
    sse_names = False
    done_marker = b""

    def __init__(self, gen: Generation, info: RequestInfo) -> None:
        self._gen = gen
        self._info = info
        self._id = uuid.uuid4().hex[:22]
        self._chars_left = sum(len(s.text) for s in gen.plan.segments)  # not yet in a chunk
        self._finished = False

    def _response(self, parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
        prompt = self._gen.input_tokens
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        usage: dict[str, Any] = {"promptTokenCount": prompt, "totalTokenCount": prompt,
                                 "promptTokensDetails": [{"modality": "TEXT",
                                                          "tokenCount": prompt}]}
        if last:
            output = self._gen.plan.output_tokens
            candidate["finishReason"] = _FINISH[self._gen.plan.finish]
            usage["candidatesTokenCount"] = output
            usage["totalTokenCount"] = prompt + output
        return {"candidates": [candidate], "usageMetadata": usage,
                "modelVersion": self._info.model, "responseId": self._id}

    def head(self) -> list[dict[str, Any]]:
        """Nothing: Gemini's first event already carries output."""
        return []

    def piece(self, index: int, seg: Segment, text: str, first: bool) -> list[dict[str, Any]]:
        """One chunk; the plan's last one also carries ``finishReason`` and full usage."""
        self._chars_left -= len(text)
        self._finished = self._chars_left == 0 and index == len(self._gen.plan.segments) - 1
        return [self._response([_part(seg, text)], self._finished)]

    def tail(self) -> list[dict[str, Any]]:
        """A closing chunk only when no output chunk could carry ``finishReason``."""
        return [] if self._finished else [self._response([{"text": ""}], True)]

    def body(self) -> dict[str, Any]:
        """The non-streaming ``GenerateContentResponse``."""
        return self._response([_part(s, s.text) for s in self._gen.plan.segments], True)


async def generate_content(request: web.Request, state: ServerState) -> web.StreamResponse:
    """``POST /{version}/models/{model}:{generateContent|streamGenerateContent}``."""
    model, _, method = request.match_info["target"].rpartition(":")
    if not model or method not in _METHODS:
        return error_response(request.path, 404, f"Method not found: {method or '(none)'}.")
    stream = _METHODS[method]
    if stream and request.query.get("alt") != "sse":
        return error_response(request.path, 400, "The simulator streams only with alt=sse.")

    def parse(body: dict[str, Any], _state: ServerState) -> RequestInfo:
        return parse_generate_content(body, model, stream)

    spec = ApiSpec(API, parse, GeminiEncoder, whole_tool_calls=True,
                   fault_statuses=_FAULT_STATUSES)
    return await serve(request, state, spec)
