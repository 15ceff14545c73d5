"""The aiohttp application: routes and the error middleware (shaped errors, no tracebacks)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from . import _cohere, _ollama
from ._anthropic import MESSAGES
from ._bedrock import ACTIONS as BEDROCK_ACTIONS
from ._bedrock import runtime as bedrock_runtime
from ._errors import error_response
from ._gemini import VERSIONS as GEMINI_VERSIONS
from ._gemini import generate_content
from ._handler import ApiSpec, serve
from ._misc_routes import embeddings, get_model, list_models
from ._openai_chat import CHAT
from ._responses import RESPONSES
from ._responses_ws import responses_websocket
from ._state import ServerState

log = logging.getLogger("agent_latency.simulator")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _shaped_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404:
            message = f"Invalid URL ({request.method} {request.path})"
        elif exc.status == 405:
            message = f"Method not allowed ({request.method} {request.path})"
        else:
            message = exc.reason
        return error_response(request.path, exc.status, message)
    except ConnectionError:
        # the client went away (while its body was read, say): aiohttp ends a request whose
        # handler returned quietly; one that raised, it logs with a traceback
        log.debug("client disconnected during %s %s", request.method, request.path)
        return web.Response(status=499)
    except asyncio.CancelledError:
        raise
    except Exception:  # a simulator bug must not leak a traceback to the client
        log.exception("simulator error on %s %s", request.method, request.path)
        return error_response(request.path, 500, "The simulator hit an internal error.")


def _bind(state: ServerState, spec: ApiSpec) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await serve(request, state, spec)
    return handle


def _with_state(state: ServerState,
                fn: Callable[[web.Request, ServerState], Awaitable[web.StreamResponse]]) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return await fn(request, state)
    return handle


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def build_app(state: ServerState) -> web.Application:
    """The simulator's routes on one aiohttp application."""
    app = web.Application(middlewares=[_shaped_errors], client_max_size=256 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", _bind(state, CHAT))
    app.router.add_post("/openai/v1/chat/completions", _bind(state, CHAT))  # Groq's path
    app.router.add_post("/v1/responses", _bind(state, RESPONSES))
    app.router.add_get("/v1/responses", _with_state(state, responses_websocket))
    app.router.add_post("/v1/messages", _bind(state, MESSAGES))
    app.router.add_post("/v1/embeddings", _with_state(state, embeddings))
    app.router.add_get("/v1/models", _with_state(state, list_models))
    app.router.add_get("/v1/models/{model}", _with_state(state, get_model))
    for version in GEMINI_VERSIONS:  # {target} is MODEL:generateContent / :streamGenerateContent
        app.router.add_post(f"/{version}/models/{{target}}",
                            _with_state(state, generate_content))
    app.router.add_post("/api/chat", _bind(state, _ollama.CHAT))
    app.router.add_post("/api/generate", _bind(state, _ollama.GENERATE))
    app.router.add_post("/v2/chat", _bind(state, _cohere.CHAT))
    for action in BEDROCK_ACTIONS:
        app.router.add_post(f"/model/{{model}}/{{action:{action}}}",
                            _with_state(state, bedrock_runtime))
    app.router.add_get("/health", _health)
    return app
