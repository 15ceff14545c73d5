"""A request no protocol knows that looks like a model request: a JSON ``POST`` that names a
model with ``messages``, ``prompt``, ``input`` or ``contents``, or carries a prompt with
generation parameters (a token limit, sampling settings, ``stream``) — local model servers'
native APIs often name no model.  Such a request gets a generic call: provider unknown, its
first response byte as its first token (and its last byte as its last), marked
``generic``; a streamed reply (SSE, NDJSON) is what makes it most likely one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import semconv
from ._endpoint import Endpoint, int_or_none

#: Fields that carry a model's input.
PROMPT_FIELDS = ("messages", "prompt", "input", "contents", "inputs")
#: Fields that are generation parameters.
GENERATION_FIELDS = ("max_tokens", "max_new_tokens", "max_completion_tokens",
                     "max_output_tokens", "maxOutputTokens", "num_predict", "n_predict",
                     "max_length", "temperature", "top_p", "top_k", "stream",
                     "generationConfig", "parameters", "options")


def looks_like_model_request(body: Any) -> bool:
    """Whether a request's parsed JSON body is a model request's."""
    if not isinstance(body, Mapping) or not any(f in body for f in PROMPT_FIELDS):
        return False
    model = body.get("model")
    if isinstance(model, str) and model:
        return True
    parameters = body.get("parameters")
    return any(f in body for f in GENERATION_FIELDS) or isinstance(parameters, Mapping)


def _response(call: Any, obj: Any) -> None:
    info = call.info
    model = obj.model
    if isinstance(model, str):
        info.response_model = model
    usage = obj.usage
    if usage is not None:
        info.input_tokens = int_or_none(usage.prompt_tokens) or int_or_none(usage.input_tokens)
        info.output_tokens = (int_or_none(usage.completion_tokens)
                              or int_or_none(usage.output_tokens))


GENERIC = Endpoint(semconv.PROVIDER_UNKNOWN, semconv.OPERATION_CHAT, from_response=_response)
