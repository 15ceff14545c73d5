"""The Responses API over one persistent WebSocket (``GET /v1/responses``, upgraded).

The client sends ``{"type": "response.create", ...same fields as POST /v1/responses}``;
the server answers with the same events a stream carries, one JSON text frame each, and
handles one response at a time per connection. Errors come back as ``{"type": "error",
"status": ..., "error": {...}}`` frames; the connection stays open.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import WSMsgType, web

from ._errors import ApiError, error_response
from ._faults import STATUS
from ._generation import StreamCut
from ._handler import prepare_generation
from ._responses import ResponsesEncoder, parse_responses
from ._script import Segment
from ._state import ServerState


def _error(status: int, kind: str, message: str, param: str | None = None) -> str:
    return json.dumps({"type": "error", "status": status,
                       "error": {"type": kind, "code": kind, "message": message,
                                 "param": param}})


async def responses_websocket(request: web.Request, state: ServerState) -> web.StreamResponse:
    """Serve ``response.create`` events on one WebSocket until the client closes it."""
    ws = web.WebSocketResponse(autoping=True, max_msg_size=64 * 1024 * 1024)
    if not ws.can_prepare(request).ok:
        return error_response(request.path, 405, "Method not allowed: use POST /v1/responses "
                              "or a WebSocket upgrade.")
    await ws.prepare(request)
    transport = request.transport
    async for msg in ws:
        if msg.type != WSMsgType.TEXT:
            if msg.type in (WSMsgType.ERROR, WSMsgType.CLOSE):
                break
            await ws.send_str(_error(400, "invalid_request_error", "Send JSON text frames."))
            continue
        try:
            event = json.loads(msg.data)
            if not isinstance(event, dict):
                raise ValueError("not an object")
        except ValueError:
            await ws.send_str(_error(400, "invalid_request_error", "Invalid JSON."))
            continue
        if event.get("type") != "response.create":
            await ws.send_str(_error(400, "invalid_request_error",
                                     f"Unsupported event type {event.get('type')!r}."))
            continue
        body = {k: v for k, v in event.items() if k not in ("type", "stream_id")}
        body["stream"] = True
        if not await _one_response(ws, state, body, transport):
            break
    return ws


async def _one_response(ws: web.WebSocketResponse, state: ServerState, body: dict[str, Any],
                        transport: Any) -> bool:
    """Stream one response; False when the connection was cut."""
    try:
        info = parse_responses(body, state)
    except ApiError as exc:
        await ws.send_str(_error(exc.status, "invalid_request_error", exc.message, exc.param))
        return True
    gen = prepare_generation(state, "responses", info, transport, kind="websocket")
    status = 200
    try:
        fault = gen.fault
        if fault is not None and fault.kind in STATUS:
            status = STATUS[fault.kind]
            gen.record.output_tokens = 0
            kind = {429: "rate_limit_exceeded", 500: "server_error", 529: "overloaded"}[status]
            await ws.send_str(_error(status, kind, "Simulated fault."))
            return True
        await gen.delay_headers()
        enc = ResponsesEncoder(gen, info)
        for e in enc.head():
            await ws.send_str(json.dumps(e))
        await gen.admit()

        async def write(index: int, seg: Segment, text: str, first: bool) -> None:
            for e in enc.piece(index, seg, text, first):
                await ws.send_str(json.dumps(e))

        async def malformed() -> None:
            await ws.send_str('{"type": "response.output_text.delta", "delta": ')

        try:
            await gen.stream(write, malformed)
        except StreamCut:
            if transport is not None:
                transport.close()
            return False
        for e in enc.tail():
            await ws.send_str(json.dumps(e))
        gen.record.mark("response_written_at")
        return True
    except ConnectionResetError:
        status = 499
        return False
    finally:
        gen.finish(status)
