"""OpenAI Responses API (``POST /v1/responses`` and its WebSocket): parsing and events.

The assistant-turn count of a Responses request is the number of runs of consecutive
model-output items (assistant messages, ``function_call``, ``reasoning``) in ``input``,
plus the turns behind ``previous_response_id`` when the simulator produced that response.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import OrderedDict
from typing import Any

from ._content import count_input_tokens
from ._errors import ApiError, require
from ._generation import Generation
from ._handler import ApiSpec, RequestInfo
from ._script import Segment
from ._state import ServerState

_OUTPUT_TYPES = frozenset({"function_call", "reasoning", "custom_tool_call"})
# response id -> assistant turns up to and including that response (bounded)
_HISTORY: OrderedDict[str, int] = OrderedDict()
_HISTORY_MAX = 10_000


def _is_output(item: Any) -> bool:
    return isinstance(item, dict) and (item.get("role") == "assistant"
                                       or item.get("type") in _OUTPUT_TYPES)


def _turns(body: dict[str, Any]) -> int:
    items = body.get("input")
    count = 0
    if isinstance(items, list):
        count = sum(1 for k, _ in itertools.groupby(items, _is_output) if k)
    return count + _HISTORY.get(str(body.get("previous_response_id")), 0)


def parse_responses(body: dict[str, Any], state: ServerState) -> RequestInfo:
    """Validate a Responses API request."""
    model = require(body, "model", str)
    if "input" not in body and "previous_response_id" not in body and "prompt" not in body:
        raise ApiError(400, "Missing required parameter: 'input'.", param="input")
    if "input" in body and not isinstance(body["input"], (str, list)):
        raise ApiError(400, "Invalid type for 'input'.", param="input")
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int)
                                   or isinstance(max_tokens, bool) or max_tokens < 0):
        raise ApiError(400, "Invalid type for 'max_output_tokens'.", param="max_output_tokens")
    text = body.get("text") or {}
    fmt = text.get("format") or {} if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        raise ApiError(400, "Invalid type for 'text.format'.", param="text")
    schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
    if schema is not None and not isinstance(schema, dict):
        raise ApiError(400, "Invalid type for 'text.format.schema'.", param="text")
    return RequestInfo(
        body=body, model=model, stream=bool(body.get("stream")),
        input_tokens=count_input_tokens(body), assistant_turns=_turns(body),
        max_tokens=max_tokens, schema=schema,
        tools_allowed=bool(body.get("tools")) and body.get("tool_choice") != "none")


class ResponsesEncoder:
    """Responses stream events (``event:`` + ``data:``, or WebSocket frames) or one body."""

    __slots__ = ("_created", "_done", "_gen", "_id", "_info", "_items", "_seq", "_texts")
    sse_names = True
    done_marker = b""

    def __init__(self, gen: Generation, info: RequestInfo) -> None:
        self._gen = gen
        self._info = info
        self._id = f"resp_{uuid.uuid4().hex}"
        self._created = int(time.time())
        self._seq = 0
        self._items: list[dict[str, Any]] = []  # items opened so far, in output order
        self._texts: list[list[str]] = []
        self._done: list[dict[str, Any]] = []

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._seq, **fields}
        self._seq += 1
        return event

    def _response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        body = self._info.body
        plan = self._gen.plan
        usage = None
        incomplete = None
        if status in ("completed", "incomplete"):
            n = plan.output_tokens
            usage = {"input_tokens": self._gen.input_tokens,
                     "input_tokens_details": {"cached_tokens": 0}, "output_tokens": n,
                     "output_tokens_details": {"reasoning_tokens": 0},
                     "total_tokens": self._gen.input_tokens + n}
        if status == "incomplete":
            incomplete = {"reason": "max_output_tokens"}
        text = body.get("text") if isinstance(body.get("text"), dict) else None
        return {"id": self._id, "object": "response", "created_at": self._created,
                "status": status, "background": False, "error": None,
                "incomplete_details": incomplete, "instructions": body.get("instructions"),
                "max_output_tokens": body.get("max_output_tokens"), "model": self._info.model,
                "output": output, "parallel_tool_calls": body.get("parallel_tool_calls", True),
                "previous_response_id": body.get("previous_response_id"),
                "reasoning": {"effort": None, "summary": None}, "store": body.get("store", True),
                "temperature": body.get("temperature", 1.0),
                "text": text or {"format": {"type": "text"}},
                "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []),
                "top_p": body.get("top_p", 1.0), "truncation": "disabled", "usage": usage,
                "user": None, "metadata": body.get("metadata") or {}}

    def _final_status(self) -> str:
        return "incomplete" if self._gen.plan.finish == "length" else "completed"

    def head(self) -> list[dict[str, Any]]:
        """``response.created`` and ``response.in_progress``."""
        snapshot = self._response("in_progress", [])
        return [self._event("response.created", response=snapshot),
                self._event("response.in_progress", response=snapshot)]

    def _open(self, seg: Segment, index: int) -> list[dict[str, Any]]:
        if seg.kind == "text":
            item = {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "status": "in_progress",
                    "role": "assistant", "content": []}
            self._items.append(item)
            self._texts.append([])
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            return [self._event("response.output_item.added", output_index=index, item=item),
                    self._event("response.content_part.added", item_id=item["id"],
                                output_index=index, content_index=0, part=part)]
        item = {"id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": "in_progress",
                "call_id": seg.call_id, "name": seg.name, "arguments": ""}
        self._items.append(item)
        self._texts.append([])
        return [self._event("response.output_item.added", output_index=index, item=item)]

    def _close(self, index: int) -> list[dict[str, Any]]:
        item = self._items[index]
        text = "".join(self._texts[index])
        if item["type"] == "message":
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            done = {**item, "status": "completed", "content": [part]}
            events = [self._event("response.output_text.done", item_id=item["id"],
                                  output_index=index, content_index=0, text=text, logprobs=[]),
                      self._event("response.content_part.done", item_id=item["id"],
                                  output_index=index, content_index=0, part=part)]
        else:
            done = {**item, "status": "completed", "arguments": text}
            events = [self._event("response.function_call_arguments.done", item_id=item["id"],
                                  output_index=index, name=item["name"], arguments=text)]
        self._done.append(done)
        events.append(self._event("response.output_item.done", output_index=index, item=done))
        return events

    def piece(self, index: int, seg: Segment, text: str, first: bool) -> list[dict[str, Any]]:
        """A delta, opening its output item (and closing the previous one) when it starts."""
        events: list[dict[str, Any]] = []
        if first:
            if index > 0:
                events += self._close(index - 1)
            events += self._open(seg, index)
        self._texts[index].append(text)
        item_id = self._items[index]["id"]
        if seg.kind == "text":
            events.append(self._event("response.output_text.delta", item_id=item_id,
                                      output_index=index, content_index=0, delta=text,
                                      logprobs=[]))
        else:
            events.append(self._event("response.function_call_arguments.delta",
                                      item_id=item_id, output_index=index, delta=text))
        return events

    def tail(self) -> list[dict[str, Any]]:
        """Close the last item, then ``response.completed`` (or ``.incomplete``)."""
        events = self._close(len(self._items) - 1) if self._items else []
        status = self._final_status()
        _remember(self._id, self._info.assistant_turns + 1)
        kind = "response.completed" if status == "completed" else "response.incomplete"
        events.append(self._event(kind, response=self._response(status, self._done)))
        return events

    def body(self) -> dict[str, Any]:
        """The non-streaming ``response`` object."""
        for index, seg in enumerate(self._gen.plan.segments):
            self._open(seg, index)
            self._texts[index].append(seg.text)
            self._close(index)
        _remember(self._id, self._info.assistant_turns + 1)
        return self._response(self._final_status(), self._done)


def _remember(response_id: str, turns: int) -> None:
    _HISTORY[response_id] = turns
    while len(_HISTORY) > _HISTORY_MAX:
        _HISTORY.popitem(last=False)


RESPONSES = ApiSpec("responses", parse_responses, ResponsesEncoder)
