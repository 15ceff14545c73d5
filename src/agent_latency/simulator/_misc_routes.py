"""``POST /v1/embeddings`` and ``GET /v1/models`` (OpenAI or Anthropic shape)."""

from __future__ import annotations

import base64
import hashlib
import math
import struct
import time

from aiohttp import web

from ._content import count_input_tokens
from ._errors import ApiError, error_response, read_json, require
from ._state import ServerState

EMBEDDING_DIM = 16


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [b / 255.0 - 0.5 for b in digest[:EMBEDDING_DIM]]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [v / norm for v in raw]


async def embeddings(request: web.Request, state: ServerState) -> web.Response:
    """Deterministic embeddings; the time is one prefill of the inputs."""
    try:
        body = await read_json(request)
        model = require(body, "model", str)
        raw = require(body, "input", (str, list))
    except ApiError as exc:
        return error_response(request.path, exc.status, exc.message, param=exc.param)
    inputs = [raw] if isinstance(raw, str) else [str(x) for x in raw]
    tokens = count_input_tokens({"input": inputs}, ("input",))
    rec = state.new_record("embeddings", model, False, request.transport)
    rec.input_tokens, rec.output_tokens = tokens, 0
    status = 200
    try:
        async with state.capacity.prefill_slot:
            rec.mark("prefill_started_at")
            rec.queue_s = rec.prefill_started_at_mono - rec.started_at_mono
            await state.clock.sleep_until(rec.prefill_started_at_mono
                                          + tokens / state.config.prefill_tps)
            rec.prefill_s = time.perf_counter() - rec.prefill_started_at_mono
        rec.output_generation_s = 0.0
        as_b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(inputs):
            vec = _vector(text)
            value = (base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
                     if as_b64 else vec)
            data.append({"object": "embedding", "index": i, "embedding": value})
        resp = web.json_response(
            {"object": "list", "data": data, "model": model,
             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}},
            headers={"x-request-id": rec.request_id})
        await resp.prepare(request)
        await resp.write_eof()
        rec.mark("response_written_at")
        return resp
    except ConnectionError:  # the client hung up: quietly, as in _handler.serve
        status = 499
        return web.Response(status=499)
    finally:
        rec.status = status
        rec.mark("finished_at")
        state.truth.add(rec)


def _model_names(state: ServerState) -> list[str]:
    names = [state.config.model]
    if state.script is not None:
        names += [m for m in state.script.models if m != "*" and m not in names]
    return names


def _openai_model(name: str) -> dict[str, object]:
    return {"id": name, "object": "model", "created": 1700000000, "owned_by": "agent-latency"}


def _anthropic_model(name: str) -> dict[str, object]:
    return {"type": "model", "id": name, "display_name": name,
            "created_at": "2024-01-01T00:00:00Z"}


async def list_models(request: web.Request, state: ServerState) -> web.Response:
    """Model list; Anthropic's shape when the client sends ``anthropic-version``."""
    names = _model_names(state)
    if "anthropic-version" in request.headers:
        data = [_anthropic_model(n) for n in names]
        return web.json_response({"data": data, "has_more": False, "first_id": names[0],
                                  "last_id": names[-1]})
    return web.json_response({"object": "list", "data": [_openai_model(n) for n in names]})


async def get_model(request: web.Request, state: ServerState) -> web.Response:
    """One model (any name is served: the simulator answers for every model)."""
    name = request.match_info["model"]
    if "anthropic-version" in request.headers:
        return web.json_response(_anthropic_model(name))
    return web.json_response(_openai_model(name))
