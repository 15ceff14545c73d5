"""Anthropic's Messages protocol.

- Endpoint: ``POST …/v1/messages``; the JSON body names ``model``, ``max_tokens``,
  ``messages`` and ``stream``.
- Framing: server-sent events with ``event:`` names.
- Output: ``content_block_delta`` (text, tool input JSON, thinking).
- Usage: input tokens in ``message_start.message.usage`` (plus cache reads and writes),
  cumulative ``output_tokens`` in ``message_delta.usage``; no server timings of its own.
"""

from __future__ import annotations

from ... import semconv
from ._events import OutputRule, classifier
from ._framing import SSE
from ._protocol import Route, WireProtocol

OUTPUT = OutputRule(
    output_types=frozenset({"content_block_delta"}),
    not_output_types=frozenset({"message_start", "message_delta", "message_stop",
                                "content_block_start", "content_block_stop"}),
)

_MESSAGES = Route("agent_latency.instrumentation.llm.anthropic:MESSAGES")


def route(path: str) -> Route | None:
    """The endpoint a ``POST`` to ``path`` is, if it is one of this protocol's."""
    return _MESSAGES if path.endswith("/v1/messages") else None


PROTOCOL = WireProtocol("anthropic", route, classifier(OUTPUT), semconv.PROVIDER_ANTHROPIC, SSE)
