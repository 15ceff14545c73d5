"""Google's Gemini protocol (the Gemini API and Vertex AI).

- Endpoints: ``POST …/models/MODEL:generateContent`` and ``…:streamGenerateContent`` (the
  model and whether it streams are in the path); the JSON body has ``contents`` and a
  ``generationConfig``.
- Framing: server-sent events (``?alt=sse``), ``data: {…}`` lines.
- Output: a part with non-empty ``text``, a ``functionCall``, ``inlineData`` or
  ``executableCode``.
- Usage: ``usageMetadata.{promptTokenCount, candidatesTokenCount}``; no server timings.
"""

from __future__ import annotations

from ... import semconv
from ._events import OutputRule, classifier
from ._framing import SSE
from ._protocol import Route, WireProtocol

OUTPUT = OutputRule(text_fields=("text",),
                    call_fields=("functionCall", "inlineData", "executableCode"))

_CHAT = "agent_latency.instrumentation.llm.google_genai:CHAT"


def route(path: str) -> Route | None:
    """The endpoint a ``POST`` to ``path`` is, if it is one of this protocol's."""
    if ":" not in path:
        return None
    base, _, method = path.rpartition(":")
    if method not in ("generateContent", "streamGenerateContent"):
        return None
    model = base.rpartition("/models/")[2] if "/models/" in base else ""
    return Route(_CHAT, model, method == "streamGenerateContent")


PROTOCOL = WireProtocol("gemini", route, classifier(OUTPUT), semconv.PROVIDER_GCP_GEMINI, SSE)
