"""What one wire protocol knows, in one shape (:class:`WireProtocol`), and where one request
goes in it (:class:`Route`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._endpoint import Endpoint


@dataclass(frozen=True, slots=True)
class Route:
    """One request's place in a protocol: the endpoint that reads it, the model its path
    names (``""``: the body names it), and whether the path alone says it streams."""

    #: The endpoint, or ``"module:NAME"`` of one an SDK layer owns (bound on first use: the
    #: SDK layers read the protocols, so a protocol does not import them).
    endpoint: Endpoint | str
    model: str = ""
    streams: bool = False


@dataclass(frozen=True, slots=True)
class WireProtocol:
    """One wire protocol: its endpoints and request shape (``route``), its stream framing,
    which events carry output, its default provider, and the server timings it reports."""

    #: Its name on the span (``agent_latency.llm.protocol``).
    name: str
    #: ``route(path) -> Route | None``: whether a POST to ``path`` is one of its requests.
    route: Callable[[str], Route | None]
    #: ``is_output(event) -> bool`` for one framed event (see ``_framing``).
    is_output: Callable[[bytes], bool]
    #: ``gen_ai.provider.name`` when neither the client nor the host says more.
    provider: str
    #: A streamed reply's framing when its ``Content-Type`` names none.
    framing: str
    #: ``header_timing(info, headers)``: server timings in the response headers, or None.
    header_timing: Callable[[Any, Mapping[str, str]], None] | None = None
