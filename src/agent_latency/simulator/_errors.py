"""Error bodies in the shape each real API returns (OpenAI, Anthropic, Gemini)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                 404: "invalid_request_error", 405: "invalid_request_error",
                 413: "invalid_request_error", 429: "requests", 500: "server_error",
                 529: "server_error"}
_OPENAI_CODES = {429: "rate_limit_exceeded", 529: "overloaded"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    404: "not_found_error", 405: "invalid_request_error",
                    413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
                    529: "overloaded_error"}
_GEMINI_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                    404: "NOT_FOUND", 405: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT",
                    429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


class ApiError(Exception):
    """A request error that becomes a shaped JSON error response."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


def is_anthropic_path(path: str) -> bool:
    """Anthropic routes get Anthropic-shaped errors; everything else OpenAI-shaped."""
    return path.startswith("/v1/messages")


def is_gemini_path(path: str) -> bool:
    """Gemini routes: a ``:method`` last segment, or a ``/v1beta/`` or ``/v1alpha/`` path."""
    return ":" in path.rsplit("/", 1)[-1] or path.startswith(("/v1beta/", "/v1alpha/"))


def error_body(path: str, status: int, message: str, param: str | None = None,
               request_id: str | None = None) -> dict[str, Any]:
    """The JSON error body the real API would send for ``status``."""
    if is_gemini_path(path):
        return {"error": {"code": status, "message": message,
                          "status": _GEMINI_STATUSES.get(status, "UNKNOWN")}}
    if is_anthropic_path(path):
        body: dict[str, Any] = {"type": "error", "error": {
            "type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
        if request_id:
            body["request_id"] = request_id
        return body
    return {"error": {"message": message,
                      "type": _OPENAI_TYPES.get(status, "server_error"),
                      "param": param, "code": _OPENAI_CODES.get(status)}}


def error_response(path: str, status: int, message: str, *, param: str | None = None,
                   request_id: str | None = None,
                   headers: dict[str, str] | None = None) -> web.Response:
    """A JSON error response; ``request_id`` also goes to ``x-request-id``."""
    hdrs = dict(headers or {})
    if request_id:
        hdrs["x-request-id"] = request_id
        if is_anthropic_path(path):
            hdrs["request-id"] = request_id
    return web.Response(status=status, headers=hdrs, content_type="application/json",
                        text=json.dumps(error_body(path, status, message, param, request_id)))


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or ``ApiError(400)``."""
    raw = await request.read()
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"We could not parse the JSON body of your request: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def require(body: dict[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``body[name]`` if present and of ``kind``, else ``ApiError(400)``."""
    if name not in body:
        raise ApiError(400, f"Missing required parameter: '{name}'.", param=name)
    value = body[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ApiError(400, f"Invalid type for '{name}'.", param=name)
    return value
