"""The wire protocols model requests are made in, one module each, read by the SDK layers
(which events carry output, the server timings) and by the wire recogniser (which requests
are calls, how their replies are framed).

Each protocol module states four things: its endpoints and request shape (``route``), its
stream framing (server-sent events, newline-delimited JSON or the AWS event stream, in
``_framing``), which events carry output (an :class:`OutputRule`), and its usage and
server-timing fields (its endpoints' readers).  :data:`PROTOCOLS` lists them in the order a
path is tried; a request that matches none but looks like a model request gets a generic
call (``_generic``).

Adding one: a module here with its ``PROTOCOL``, a line in :data:`PROTOCOLS`, a simulator
route and a test.
"""

from __future__ import annotations

from . import anthropic, bedrock, cohere, gemini, ollama, openai
from ._endpoint import Endpoint, StreamState, int_or_none, seconds
from ._events import OutputRule, classifier
from ._framing import MalformedResponse, framer_for, framing_of
from ._generic import GENERIC, PROMPT_FIELDS, looks_like_model_request
from ._json import Json, event_json, view
from ._protocol import Route, WireProtocol
from ._providers import provider_of, provider_of_host

#: Every protocol, in the order a request's path is tried (Bedrock's ``/model/…`` before
#: Gemini's ``…:generateContent``, both before the suffix-matched ones).
PROTOCOLS: tuple[WireProtocol, ...] = (bedrock.PROTOCOL, gemini.PROTOCOL, ollama.PROTOCOL,
                                       cohere.PROTOCOL, anthropic.PROTOCOL, openai.PROTOCOL)


def match(path: str) -> tuple[WireProtocol, Route] | None:
    """The protocol and route of a ``POST`` to ``path`` (its query cut off), or None."""
    path = path.rstrip("/")
    for protocol in PROTOCOLS:
        found = protocol.route(path)
        if found is not None:
            return protocol, found
    return None


__all__ = ["GENERIC", "PROMPT_FIELDS", "PROTOCOLS", "Endpoint", "Json", "MalformedResponse",
           "OutputRule", "Route", "StreamState", "WireProtocol", "classifier", "event_json",
           "framer_for", "framing_of", "int_or_none", "looks_like_model_request", "match",
           "provider_of", "provider_of_host", "seconds", "view"]
