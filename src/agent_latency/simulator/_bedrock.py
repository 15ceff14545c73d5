"""Amazon Bedrock's runtime API: ``POST /model/{modelId}/converse``, ``/converse-stream``,
``/invoke`` and ``/invoke-with-response-stream``.

Converse speaks Bedrock's own message shape; its stream is an AWS event stream
(``application/vnd.amazon.eventstream``: binary messages, each a prelude with the total and
headers lengths and their CRC32, string headers, a JSON payload and the message's CRC32)
of ``messageStart``, ``contentBlockStart`` (a tool call), ``contentBlockDelta``,
``contentBlockStop``, ``messageStop`` and ``metadata`` (usage and ``metrics.latencyMs``).
InvokeModel takes and answers the model's native body, here Anthropic's Messages; its
stream is ``chunk`` events whose ``bytes`` (base64) carry Anthropic's stream events, the last
with ``amazon-bedrock-invocationMetrics``.  Signatures are not checked.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

from aiohttp import web

from ._anthropic import MessagesEncoder, parse_messages
from ._content import count_input_tokens
from ._errors import ApiError, require
from ._generation import Generation
from ._handler import ApiSpec, RequestInfo, serve
from ._script import Segment
from ._state import ServerState
from ._truth import TruthRecord

_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_EVENT_STREAM = "application/vnd.amazon.eventstream"
# A frame's payload key for the event's name (taken out before it is written).
EVENT = "__event__"


def event_message(event_type: str, payload: bytes) -> bytes:
    """One AWS event stream message: prelude, prelude CRC, headers, payload, message CRC."""
    headers = b""
    for name, value in ((":event-type", event_type), (":content-type", "application/json"),
                        (":message-type", "event")):
        raw_name, raw_value = name.encode(), value.encode()
        headers += (struct.pack(">B", len(raw_name)) + raw_name + b"\x07"
                    + struct.pack(">H", len(raw_value)) + raw_value)
    prelude = struct.pack(">II", 12 + len(headers) + len(payload) + 4, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return message + struct.pack(">I", zlib.crc32(message))


def converse_frames(events: list[dict[str, Any]], named: bool) -> bytes:
    """ConverseStream events, each named by its :data:`EVENT` key."""
    out = b""
    for event in events:
        name = event.pop(EVENT)
        out += event_message(name, json.dumps(event).encode())
    return out


def chunk_frames(events: list[dict[str, Any]], named: bool) -> bytes:
    """InvokeModelWithResponseStream: each model event base64 in a ``chunk``."""
    return b"".join(
        event_message("chunk", json.dumps(
            {"bytes": base64.b64encode(json.dumps(e).encode()).decode()}).encode())
        for e in events if e.get("type") != "ping")


def _latency_ms(rec: TruthRecord) -> int:
    return round(((rec.queue_s or 0.0) + (rec.prefill_s or 0.0)
                  + (rec.output_generation_s or 0.0)) * 1e3)


# -- Converse ---------------------------------------------------------------------------------
def parse_converse(body: dict[str, Any], model: str, stream: bool) -> RequestInfo:
    """Validate a Converse request (the model is the path's)."""
    messages = require(body, "messages", list)
    if not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise ApiError(400, "messages: each message needs a 'role'", param="messages")
    config = body.get("inferenceConfig") or {}
    limit = config.get("maxTokens") if isinstance(config, dict) else None
    return RequestInfo(body=body, model=model, stream=stream,
                       input_tokens=count_input_tokens(body),
                       assistant_turns=sum(1 for m in messages if m.get("role") == "assistant"),
                       max_tokens=limit if isinstance(limit, int) and limit >= 0 else None,
                       tools_allowed=bool(body.get("toolConfig")))


class ConverseEncoder:
    """ConverseStream events, or Converse's whole reply."""

    __slots__ = ("_gen", "_open")
    sse_names = False
    done_marker = b""

    def __init__(self, gen: Generation, info: RequestInfo) -> None:
        self._gen = gen
        self._open = -1

    def _usage(self) -> dict[str, Any]:
        n_in, n_out = self._gen.input_tokens, self._gen.plan.output_tokens
        return {"inputTokens": n_in, "outputTokens": n_out, "totalTokens": n_in + n_out}

    def head(self) -> list[dict[str, Any]]:
        """``messageStart``."""
        return [{EVENT: "messageStart", "role": "assistant"}]

    def piece(self, index: int, seg: Segment, text: str, first: bool) -> list[dict[str, Any]]:
        """A delta, opening its block (a tool call's with ``contentBlockStart``)."""
        events: list[dict[str, Any]] = []
        if first:
            if self._open >= 0:
                events.append({EVENT: "contentBlockStop", "contentBlockIndex": self._open})
            self._open = index
            if seg.kind == "tool":
                events.append({EVENT: "contentBlockStart", "contentBlockIndex": index,
                               "start": {"toolUse": {"toolUseId": seg.call_id,
                                                     "name": seg.name}}})
        delta = {"text": text} if seg.kind == "text" else {"toolUse": {"input": text}}
        events.append({EVENT: "contentBlockDelta", "contentBlockIndex": index, "delta": delta})
        return events

    def tail(self) -> list[dict[str, Any]]:
        """Close the last block, ``messageStop``, ``metadata``."""
        events: list[dict[str, Any]] = []
        if self._open >= 0:
            events.append({EVENT: "contentBlockStop", "contentBlockIndex": self._open})
        events.append({EVENT: "messageStop", "stopReason": _STOP[self._gen.plan.finish]})
        events.append({EVENT: "metadata", "usage": self._usage(),
                       "metrics": {"latencyMs": _latency_ms(self._gen.record)}})
        return events

    def body(self) -> dict[str, Any]:
        """Converse's reply."""
        plan = self._gen.plan
        content: list[dict[str, Any]] = [
            {"text": s.text} if s.kind == "text" else
            {"toolUse": {"toolUseId": s.call_id, "name": s.name, "input": s.arguments()}}
            for s in plan.segments]
        return {"output": {"message": {"role": "assistant", "content": content}},
                "stopReason": _STOP[plan.finish], "usage": self._usage(),
                "metrics": {"latencyMs": _latency_ms(self._gen.record)}}


# -- InvokeModel (Anthropic's native body) ------------------------------------------------------
class InvokeEncoder(MessagesEncoder):
    """Anthropic's Messages events or body, as Bedrock's InvokeModel carries them."""

    __slots__ = ()

    def tail(self) -> list[dict[str, Any]]:
        """Anthropic's closing events, the last with Bedrock's invocation metrics."""
        events = super().tail()
        rec = self._gen.record
        events[-1]["amazon-bedrock-invocationMetrics"] = {
            "inputTokenCount": self._gen.input_tokens,
            "outputTokenCount": self._gen.plan.output_tokens,
            "invocationLatency": _latency_ms(rec),
            "firstByteLatency": round(((rec.queue_s or 0.0) + (rec.prefill_s or 0.0)) * 1e3)}
        return events

    def body(self) -> dict[str, Any]:
        """Anthropic's message, without the model (Bedrock's body does not repeat it)."""
        body = super().body()
        body.pop("model", None)
        return body


def _invoke_headers(gen_record: TruthRecord) -> dict[str, str]:
    return {"x-amzn-bedrock-input-token-count": str(gen_record.input_tokens or 0),
            "x-amzn-bedrock-output-token-count": str(gen_record.output_tokens or 0),
            "x-amzn-bedrock-invocation-latency": str(_latency_ms(gen_record))}


_ACTIONS = {"converse": ("converse", False), "converse-stream": ("converse", True),
            "invoke": ("invoke", False), "invoke-with-response-stream": ("invoke", True)}


async def runtime(request: web.Request, state: ServerState) -> web.StreamResponse:
    """``POST /model/{model}/{action}``."""
    model = request.match_info["model"]
    kind, stream = _ACTIONS[request.match_info["action"]]
    if kind == "converse":
        def parse(body: dict[str, Any], _state: ServerState) -> RequestInfo:
            return parse_converse(body, model, stream)

        spec = ApiSpec("bedrock.converse", parse, ConverseEncoder, frame=converse_frames,
                       stream_type=_EVENT_STREAM)
    else:
        def parse(body: dict[str, Any], _state: ServerState) -> RequestInfo:
            info = parse_messages({**body, "model": model}, _state)
            info.stream = stream
            return info

        spec = ApiSpec("bedrock.invoke", parse, InvokeEncoder, frame=chunk_frames,
                       stream_type=_EVENT_STREAM, body_headers=_invoke_headers)
    return await serve(request, state, spec)


ACTIONS = tuple(_ACTIONS)
