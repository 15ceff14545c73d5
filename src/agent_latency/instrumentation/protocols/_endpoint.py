"""What a protocol tells the LLM core about one endpoint: its names and readers
(:class:`Endpoint`), in the shapes the SDK layers and the wire recogniser both hand them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class StreamState(Protocol):
    """What an endpoint's per-chunk hook sees of a stream (``_stream._Chunks``).

    ``content`` is a list to append output text to when capture is on (else None);
    ``meta_chunk`` (finish reasons, the final event) and ``usage_chunk`` are for the hook to
    keep a reference to — attribute access only, no copies.
    """

    content: list[str] | None
    meta_chunk: Any
    usage_chunk: Any


#: ``observe(state, chunk) -> bool``: runs per streamed chunk; True when the chunk carries
#: output (content, reasoning, a tool call or its arguments).
Observe = Callable[[StreamState, Any], bool]
#: ``from_response(call, obj)``: fill ``call.info`` from a whole response.
FromResponse = Callable[[Any, Any], None]
#: ``from_stream(call)``: fill ``call.info`` from the chunks the stream kept.
FromStream = Callable[[Any], None]
#: ``input_messages(request)``: the request's messages in the GenAI conventions' shape.
InputMessages = Callable[[Mapping[str, Any]], list[dict[str, Any]]]
#: ``server_timing(call, headers)``: timings the server disclosed in response headers.
ServerTiming = Callable[[Any, Mapping[str, str]], None]


@dataclass(slots=True)
class Endpoint:
    """What a provider module tells the core about one endpoint: its names and readers."""

    provider: str
    operation: str
    observe: Observe | None = None
    from_response: FromResponse | None = None
    from_stream: FromStream | None = None
    input_messages: InputMessages | None = None
    server_timing: ServerTiming | None = None
    streams: bool = True


def int_or_none(value: Any) -> int | None:
    """``value`` when it is an int (not a bool), else None: usage fields of any shape."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def seconds(value: Any, scale: float = 1.0) -> float | None:
    """A non-negative number of some unit, in seconds (``scale``: seconds per unit)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value) * scale
    return None
