"""What a response said of itself: :class:`Info`, filled by the provider modules."""

from __future__ import annotations

from typing import Any


class Info:
    """What the response said: model, id, finish reasons, usage, server timings."""

    __slots__ = ("cache_creation", "cache_read", "finish_reasons", "input_tokens",
                 "output_tokens", "reasoning_tokens", "response_id", "response_model",
                 "server_generation", "server_load", "server_prefill", "server_queue",
                 "server_total", "output_text")

    def __init__(self) -> None:
        self.response_model: str | None = None
        self.response_id: str | None = None
        self.finish_reasons: list[str] = []
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cache_read: int | None = None
        self.cache_creation: int | None = None
        self.reasoning_tokens: int | None = None
        self.server_prefill: float | None = None
        self.server_generation: float | None = None
        self.server_queue: float | None = None
        # (server-reported, seconds) loading the model; the server's whole time
        self.server_load: float | None = None
        self.server_total: float | None = None
        self.output_text: Any = None
