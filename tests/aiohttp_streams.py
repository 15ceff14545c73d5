"""An OpenAI-compatible chat stream over a plain ``aiohttp`` session, read as an SDK reads
one: for tests that wrap it with the LLM core's ``call_wrapper``."""

from __future__ import annotations

import json
from typing import Any

from agent_latency.instrumentation.protocols import view


async def open_stream(session: Any, url: str, **body: Any) -> Any:
    """The request is sent (and the headers read) inside the call; the chunks, as the
    protocol's views, are read after it."""
    response = await session.post(url, json=body)

    async def chunks() -> Any:
        async for line in response.content:
            payload = line.strip()[5:].strip()
            if line.startswith(b"data:") and payload != b"[DONE]":
                yield view(json.loads(payload))
        response.release()

    return chunks()
