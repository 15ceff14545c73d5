"""The network layer: DNS, TCP connect, TLS, upload, round trip and byte counts of the HTTP
attempts an owner (an LLM call) makes, for httpx/httpx2 (httpcore's ``trace`` events),
aiohttp (its trace signals), requests/urllib3, asyncio and plain sockets, and WebSocket
connection setups.

It knows nothing of LLMs: an owner sets :data:`CURRENT` while its client sends and receives
its :class:`Attempt` objects through ``add_attempt``; outside an owner every patch calls
straight through.  The patches are reference counted (:class:`~.._shared.SharedPatch`):
each instrumentor that needs one acquires it and releases it when uninstrumented.
"""

from __future__ import annotations

from ._aiohttp import PATCH as aiohttp_patch
from ._attempt import RTT_CONNECT, RTT_LAST_SEEN, RTT_NONE, RTT_TCP_INFO, Attempt
from ._context import CURRENT, Owner
from ._httpcore import PATCH as httpx_send_patch
from ._sockets import PATCH as sockets_patch
from ._sockets import NetPhases, Recording
from ._urllib3 import TARGETS as urllib3_targets
from ._websocket import ConnectionSetup, websocket_socket

__all__ = [
    "Attempt",
    "CURRENT",
    "ConnectionSetup",
    "NetPhases",
    "Owner",
    "RTT_CONNECT",
    "RTT_LAST_SEEN",
    "RTT_NONE",
    "RTT_TCP_INFO",
    "Recording",
    "aiohttp_patch",
    "httpx_send_patch",
    "sockets_patch",
    "urllib3_targets",
    "websocket_socket",
]
