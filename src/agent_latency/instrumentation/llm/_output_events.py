"""Which server-sent events carry output, read from the wire's bytes: the same rule as each
provider's per-chunk ``observe``, on the event as the server sent it, whatever client library
reads it (an SDK, litellm's stream wrapper that drops or merges chunks, a plain generator).

The rules are the protocols' own (``protocols.openai``, ``.anthropic``, ``.gemini``), joined
into one compiled pattern searched in C (about a microsecond an event; no JSON parse): the
SDK layers' streams are one of the three, and which one is not known where arrival times are
taken.
"""

from __future__ import annotations

from ..protocols import anthropic, classifier, gemini, openai

#: Whether one SSE event's bytes carry output: content, reasoning, or a tool call.
is_output_event = classifier(openai.OUTPUT, anthropic.OUTPUT, gemini.OUTPUT)
