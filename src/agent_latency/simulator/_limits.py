"""The range of every number the simulator takes: flags, script turns, per-request overrides.

One table, so the CLI, :class:`SimulatorConfig`, a script and a request body's
``"simulator"`` field refuse the same values with the same words. Rates are positive (a
zero rate divides by zero; a tiny one turns into an infinite sleep), every number is finite
(``nan`` compares false with every bound and would slip past a plain ``<= 0`` check), and
counts are integers (``tokens_per_chunk`` steps a ``range``).
"""

from __future__ import annotations

import math
from typing import Any

MAX_TOKENS = 1_000_000  # a bigger plan is a memory problem, not a simulation
MAX_MS = 3_600_000.0  # one hour: longer waits only look like a hung server
MAX_RATE = 1e12
MIN_RATE = 1e-3  # one token per 1,000 s; below that a prefill is a hang


class Bound:
    """The accepted values of one setting: a number in ``[low, high]`` (``high_open``:
    ``high`` itself excluded), an integer where ``integer``."""

    __slots__ = ("high", "high_open", "integer", "low")

    def __init__(self, low: float, high: float, *, integer: bool = False,
                 high_open: bool = False) -> None:
        self.low = low
        self.high = high
        self.integer = integer
        self.high_open = high_open

    def describe(self) -> str:
        """``an integer in [1, 1000000]`` and the like."""
        kind = "an integer" if self.integer else "a number"
        close = ")" if self.high_open else "]"
        return f"{kind} in [{self.low:g}, {self.high:g}{close}"

    def check(self, name: str, value: Any) -> Any:
        """``value`` when it is in range, else ``ValueError`` naming ``name``."""
        ok = isinstance(value, int if self.integer else (int, float))
        ok = ok and not isinstance(value, bool)
        if ok and not self.integer:
            ok = math.isfinite(value)
        if ok:
            ok = self.low <= value and (value < self.high if self.high_open
                                        else value <= self.high)
        if not ok:
            raise ValueError(f"{name} must be {self.describe()}, not {value!r}")
        return value


RATE = Bound(MIN_RATE, MAX_RATE)
#: Settings a script turn or a request's ``"simulator"`` field may override.
OVERRIDES: dict[str, Bound] = {
    "output_tokens": Bound(0, MAX_TOKENS, integer=True),
    "prefill_tps": RATE,
    "output_tps": RATE,
    "tokens_per_chunk": Bound(1, MAX_TOKENS, integer=True),
    "jitter": Bound(0.0, 1.0, high_open=True),
    "queue_ms": Bound(0.0, MAX_MS),
}
#: Fault options (``p=``, ``first=``, ...).
FAULT_OPTIONS: dict[str, Bound] = {
    "p": Bound(0.0, 1.0),
    "first": Bound(0, 2**63 - 1, integer=True),
    "retry_after": Bound(0.0, 86_400.0),
    "delay_ms": Bound(0.0, MAX_MS),
    "after": Bound(0, MAX_TOKENS, integer=True),
}
#: :class:`SimulatorConfig` fields that are numbers, with the flag that sets each.
CONFIG: dict[str, tuple[str, Bound]] = {
    "port": ("--port", Bound(0, 65535, integer=True)),
    "prefill_tps": ("--prefill-tps", RATE),
    "output_tps": ("--output-tps", RATE),
    "queue_ms": ("--queue-ms", OVERRIDES["queue_ms"]),
    "jitter": ("--jitter", OVERRIDES["jitter"]),
    "tokens_per_chunk": ("--tokens-per-chunk", OVERRIDES["tokens_per_chunk"]),
    "rtt_ms": ("--rtt-ms", Bound(0.0, 60_000.0)),
    "max_batch": ("--max-batch", Bound(1, MAX_TOKENS, integer=True)),
    "default_output_tokens": ("--output-tokens", OVERRIDES["output_tokens"]),
    "seed": ("--seed", Bound(-(2**63), 2**63 - 1, integer=True)),
    "spin_us": ("--spin-us", Bound(0.0, 1_000_000.0)),
}
