"""Ollama's native API: ``POST /api/chat`` and ``/api/generate``, request parsing and
newline-delimited JSON encoding.

A reply streams unless the body says ``"stream": false``: one JSON object a line, each with a
piece of the answer, and a last line with ``"done": true``, the finish reason, the token
counts and the server's own durations in nanoseconds (``prompt_eval_duration`` is the
prefill, ``eval_duration`` the output generation, both from the truth record; the simulator
keeps its one model loaded, so ``load_duration`` is 0).  A tool call goes out whole, in one
line.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ._content import count_input_tokens
from ._errors import ApiError, require
from ._generation import Generation
from ._handler import ApiSpec, RequestInfo
from ._script import Segment
from ._state import ServerState

_DONE_REASON = {"stop": "stop", "tool_calls": "stop", "length": "length"}


def ndjson(events: list[dict[str, Any]], named: bool) -> bytes:
    """Frame events as newline-delimited JSON."""
    return "".join(json.dumps(e) + "\n" for e in events).encode()


def _parse(body: dict[str, Any], field: str) -> RequestInfo:
    model = require(body, "model", str)
    if field == "messages":
        messages = require(body, "messages", list)
        if not all(isinstance(m, dict) and "role" in m for m in messages):
            raise ApiError(400, "messages: each message needs a 'role'", param="messages")
        turns = sum(1 for m in messages if m.get("role") == "assistant")
    else:
        require(body, "prompt", str)
        turns = 0
    options = body.get("options") or {}
    limit = options.get("num_predict") if isinstance(options, dict) else None
    return RequestInfo(body=body, model=model, stream=body.get("stream", True) is not False,
                       input_tokens=count_input_tokens(body), assistant_turns=turns,
                       max_tokens=limit if isinstance(limit, int) and limit >= 0 else None,
                       tools_allowed=bool(body.get("tools")))


def parse_chat(body: dict[str, Any], state: ServerState) -> RequestInfo:
    """Validate an ``/api/chat`` request."""
    return _parse(body, "messages")


def parse_generate(body: dict[str, Any], state: ServerState) -> RequestInfo:
    """Validate an ``/api/generate`` request."""
    return _parse(body, "prompt")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{time.time_ns() % 10**9:09d}Z"


class _OllamaEncoder:
    """Lines of one reply: ``message`` pieces (chat) or ``response`` pieces (generate)."""

    __slots__ = ("_chat", "_gen", "_info")
    sse_names = False
    done_marker = b""

    def __init__(self, gen: Generation, info: RequestInfo, chat: bool) -> None:
        self._gen = gen
        self._info = info
        self._chat = chat

    def _line(self, text: str, tool: Segment | None = None, done: bool = False) -> dict[str, Any]:
        line: dict[str, Any] = {"model": self._info.model, "created_at": _now()}
        if self._chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if tool is not None:
                message["tool_calls"] = [{"function": {"name": tool.name,
                                                       "arguments": tool.arguments()}}]
            line["message"] = message
        else:
            line["response"] = text
        line["done"] = done
        return line

    def _final(self, line: dict[str, Any]) -> dict[str, Any]:
        rec = self._gen.record
        plan = self._gen.plan
        prefill = rec.prefill_s or 0.0
        generation = rec.output_generation_s or 0.0
        line.update({
            "done": True, "done_reason": _DONE_REASON[plan.finish],
            "total_duration": round(((rec.queue_s or 0.0) + prefill + generation) * 1e9),
            "load_duration": 0,
            "prompt_eval_count": self._gen.input_tokens,
            "prompt_eval_duration": round(prefill * 1e9),
            "eval_count": plan.output_tokens, "eval_duration": round(generation * 1e9)})
        return line

    def head(self) -> list[dict[str, Any]]:
        """Nothing: the first line is the first piece."""
        return []

    def piece(self, index: int, seg: Segment, text: str, first: bool) -> list[dict[str, Any]]:
        """One line: text, or a whole tool call."""
        if seg.kind == "text":
            return [self._line(text)]
        return [self._line("", seg)]

    def tail(self) -> list[dict[str, Any]]:
        """The ``done`` line with counts and durations."""
        return [self._final(self._line(""))]

    def body(self) -> dict[str, Any]:
        """The whole reply, as a non-streamed request gets it."""
        plan = self._gen.plan
        tools = plan.tool_segments()
        return self._final(self._line(plan.text(), tools[0] if tools else None))


def _chat_encoder(gen: Generation, info: RequestInfo) -> _OllamaEncoder:
    return _OllamaEncoder(gen, info, chat=True)


def _generate_encoder(gen: Generation, info: RequestInfo) -> _OllamaEncoder:
    return _OllamaEncoder(gen, info, chat=False)


_NDJSON = "application/x-ndjson"
CHAT = ApiSpec("ollama.chat", parse_chat, _chat_encoder, whole_tool_calls=True, frame=ndjson,
               stream_type=_NDJSON)
GENERATE = ApiSpec("ollama.generate", parse_generate, _generate_encoder, frame=ndjson,
                   stream_type=_NDJSON)
