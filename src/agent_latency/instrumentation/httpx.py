"""``httpx`` and ``httpx2`` clients: network phases for every request sent inside an LLM call.

``Client.send``/``AsyncClient.send`` of both libraries are wrapped (see ``net._httpcore``): while
an LLM call of ours is current, each request gets our httpcore ``trace`` callback (chained
with the program's own) and a W3C ``traceparent``; outside LLM calls the wrapper only checks
a context variable.  The openai and anthropic instrumentors apply the same patch (reference
counted), so it is on whenever they are.
"""

from __future__ import annotations

from ._base import Instrumentor
from .net import httpx_send_patch


class HttpxInstrumentor(Instrumentor):
    """Attaches the httpcore ``trace`` extension to requests made inside LLM calls."""

    # httpx >= 0.24 and/or httpx2: whichever is installed.
    SHARED = (httpx_send_patch,)
