"""Prefill and output rates learned from streaming calls, per provider and model.

A streaming call measures its prefill and its output generation; their token rates are kept
as an exponentially weighted mean per ``(provider, model)`` in this process.  A later
non-streaming call to the same model, which only shows one server block, is split in
proportion to the times these rates predict (``budget.split_server_time``) and marked
``estimated``.  Bounded: at most :data:`MAX_MODELS` models are remembered.
"""

from __future__ import annotations

import threading

MAX_MODELS = 256
_ALPHA = 0.3  # weight of the newest observation
# Below these the measured phase is mostly noise; the call teaches nothing.
_MIN_SECONDS = 0.0005

_lock = threading.Lock()
_rates: dict[tuple[str, str], list[float | None]] = {}


def observe(provider: str, model: str, *, input_tokens: int, output_tokens: int,
            prefill: float, output_generation: float) -> None:
    """Learn from one streaming call's measured phases."""
    if not model:
        return
    prefill_tps = input_tokens / prefill if input_tokens > 0 and prefill > _MIN_SECONDS else None
    # The first output token is emitted at t_first: generation covers the tokens after it.
    generated = output_tokens - 1
    output_tps = (generated / output_generation
                  if generated > 0 and output_generation > _MIN_SECONDS else None)
    if prefill_tps is None and output_tps is None:
        return
    key = (provider, model)
    with _lock:
        entry = _rates.get(key)
        if entry is None:
            if len(_rates) >= MAX_MODELS:
                _rates.pop(next(iter(_rates)))
            _rates[key] = [prefill_tps, output_tps]
            return
        for i, value in enumerate((prefill_tps, output_tps)):
            if value is not None:
                old = entry[i]
                entry[i] = value if old is None else old + _ALPHA * (value - old)


def rates(provider: str, model: str) -> tuple[float | None, float | None]:
    """``(prefill tokens/s, output tokens/s)`` learned for the model, or Nones."""
    entry = _rates.get((provider, model))
    if entry is None:
        return None, None
    return entry[0], entry[1]


def clear() -> None:
    """Forget every learned rate (tests)."""
    with _lock:
        _rates.clear()
