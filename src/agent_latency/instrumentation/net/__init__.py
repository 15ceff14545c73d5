"""The network layer: DNS, TCP connect, TLS, upload, round trip and byte counts of the HTTP
attempts an owner (an LLM call) makes, for httpx/httpx2 (httpcore's ``trace`` events),
aiohttp (its trace signals), requests/urllib3, asyncio and plain sockets, and WebSocket
connection setups; and HTTP/1.1 requests recognised where they are written on a socket
(:mod:`._exchanges`), for clients that no higher layer sees.

Arrival times (:func:`follow`): when each response event's bytes reached this host, from
the kernel's receive stamps, taken on demand while the owner's client may be busy.

It knows nothing of LLMs: an owner sets :data:`CURRENT` while its client sends and receives
its :class:`Attempt` objects through ``add_attempt``; outside an owner every patch calls
straight through.  The patches are reference counted (:class:`~.._shared.SharedPatch`):
each instrumentor that needs one acquires it and releases it when uninstrumented.
"""

from __future__ import annotations

from ._aiohttp import PATCH as aiohttp_patch
from ._arrivals import AT_READ, ESTIMATED, MEASURED, Arrival, Arrivals
from ._attempt import RTT_CONNECT, RTT_LAST_SEEN, RTT_NONE, RTT_TCP_INFO, Attempt
from ._context import CURRENT, Owner
from ._exchanges import PATCH as exchanges_patch
from ._exchanges import Observer, Request, ResponseCut, recognise_with
from ._follow import Following, follow
from ._httpcore import PATCH as httpx_send_patch
from ._phases import NetPhases
from ._sockets import PATCH as sockets_patch
from ._sockets import Recording
from ._urllib3 import TARGETS as urllib3_targets
from ._websocket import ConnectionSetup, MessageArrivals, date_messages, websocket_socket

__all__ = [
    "AT_READ",
    "Arrival",
    "Arrivals",
    "Attempt",
    "CURRENT",
    "ConnectionSetup",
    "ESTIMATED",
    "Following",
    "MEASURED",
    "MessageArrivals",
    "NetPhases",
    "Observer",
    "Owner",
    "RTT_CONNECT",
    "RTT_LAST_SEEN",
    "RTT_NONE",
    "RTT_TCP_INFO",
    "Recording",
    "Request",
    "ResponseCut",
    "aiohttp_patch",
    "date_messages",
    "exchanges_patch",
    "follow",
    "httpx_send_patch",
    "recognise_with",
    "sockets_patch",
    "urllib3_targets",
    "websocket_socket",
]
