"""Who owns the HTTP attempts being sent now: the one context the network layer reads.

The network layer knows nothing of LLMs.  Whatever owns a request (an LLM call) sets
:data:`CURRENT` while its client sends; the patches below the client (httpx's ``send``,
aiohttp's trace signals, urllib3, the socket layer) read it and hand each attempt to the
owner.  When it is unset, every patch calls straight through after one ``ContextVar.get``.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._attempt import Attempt
    from ._phases import NetPhases


class Owner(Protocol):
    """What the network layer needs of a request's owner."""

    #: Socket-level DNS, connect and TLS durations while the owner is current.
    net: NetPhases
    #: The attempts started so far, in order.
    attempts: list[Attempt]
    #: Whether arrival times are wanted on its attempts' connections (``_follow``), and
    #: which of a response's events carry output: ``classify_event(event bytes) -> bool``.
    wants_arrivals: bool
    classify_event: Any
    #: Whether its response is a stream: its first events are watched for from the request
    #: on (the client may be busy until it reads them).
    streaming: bool
    #: Whether to inject W3C ``traceparent`` into the request, and the context to inject.
    propagate: bool
    context: Any

    def add_attempt(self, attempt: Attempt) -> None:
        """One more HTTP attempt was started for this owner."""


#: The owner whose HTTP attempts are being sent right now (set only inside its client's
#: methods; None everywhere else).
CURRENT: contextvars.ContextVar[Any] = contextvars.ContextVar("agent_latency_llm_call",
                                                              default=None)
