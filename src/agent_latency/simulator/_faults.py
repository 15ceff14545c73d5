"""Faults on demand: parse ``KIND[:key=value,...]`` specs and decide when they fire.

Kinds: ``rate_limit`` (429 with ``retry-after``), ``server_error`` (500), ``overloaded``
(529, Anthropic's overloaded_error), ``cut`` (stream closed before its terminal event),
``slow_headers`` (a delay before the status line), ``malformed`` (an unparsable chunk or
body). ``429``/``500``/``529`` are accepted as aliases. Keys: ``p`` (probability),
``first`` (only the first N requests the simulator sees), ``retry_after`` (seconds),
``delay_ms`` (slow_headers), ``after`` (tokens before a cut or malformed chunk).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from ._limits import FAULT_OPTIONS, OVERRIDES

KINDS = ("rate_limit", "server_error", "overloaded", "cut", "slow_headers", "malformed")
_ALIASES = {"429": "rate_limit", "500": "server_error", "529": "overloaded",
            "stream_cut": "cut", "slow-headers": "slow_headers"}
STATUS = {"rate_limit": 429, "server_error": 500, "overloaded": 529}


class Fault:
    """One fault spec."""

    __slots__ = ("after", "delay_ms", "first", "kind", "p", "retry_after")

    def __init__(self, kind: str, *, p: float = 1.0, first: int | None = None,
                 retry_after: float = 1.0, delay_ms: float = 1000.0,
                 after: int | None = None) -> None:
        kind = _ALIASES.get(kind, kind)
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {', '.join(KINDS)}")
        for name, value in (("p", p), ("first", first), ("retry_after", retry_after),
                            ("delay_ms", delay_ms), ("after", after)):
            if value is not None:
                FAULT_OPTIONS[name].check(f"fault option {name}", value)
        self.kind = kind
        self.p = p
        self.first = first
        self.retry_after = retry_after
        self.delay_ms = delay_ms
        self.after = after

    @classmethod
    def parse(cls, spec: str | dict[str, Any]) -> Fault:
        """Parse ``"cut:after=5,p=0.5"`` or ``{"kind": "cut", "after": 5}``."""
        if isinstance(spec, dict):
            opts = dict(spec)
            if "kind" not in opts:
                raise ValueError("a fault needs a 'kind'")
            kind = str(opts.pop("kind"))
        else:
            kind, _, rest = spec.partition(":")
            opts = {}
            for part in filter(None, rest.split(",")):
                key, sep, value = part.partition("=")
                if not sep:
                    raise ValueError(f"bad fault option {part!r} in {spec!r}")
                opts[key.strip()] = value.strip()
        try:
            return cls(
                kind.strip(),
                p=float(opts.pop("p", 1.0)),
                first=_count("first", opts["first"]) if "first" in opts else None,
                retry_after=float(opts.pop("retry_after", 1.0)),
                delay_ms=float(opts.pop("delay_ms", 1000.0)),
                after=_count("after", opts["after"]) if "after" in opts else None,
            )
        finally:
            opts.pop("first", None)
            opts.pop("after", None)
            if opts:
                raise ValueError(f"unknown fault options {sorted(opts)}")

    def __repr__(self) -> str:
        return f"Fault({self.kind!r}, p={self.p}, first={self.first})"


def _count(name: str, value: Any) -> int:
    # int() would truncate 1.5 and overflow on inf: a count is a whole number or an error
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"fault option {name} must be an integer, not {value!r}")
    return int(value)


class FaultInjector:
    """Decides, per request, which configured fault (if any) fires."""

    __slots__ = ("_faults", "_rng", "_seen")

    def __init__(self, specs: tuple[str, ...] | list[str], seed: int = 0) -> None:
        self._faults = [Fault.parse(s) for s in specs]
        self._rng = random.Random(seed)
        self._seen = 0

    def pick(self, turn_fault: str | dict[str, Any] | None = None) -> Fault | None:
        """Count one request and return the fault that applies to it, if any."""
        index = self._seen
        self._seen += 1
        candidates = ([Fault.parse(turn_fault)] if turn_fault else []) + self._faults
        for fault in candidates:
            if fault.first is not None and index >= fault.first:
                continue
            if fault.p >= 1.0 or self._rng.random() < fault.p:
                return fault
        return None


def check_overrides(values: Any, where: str) -> dict[str, Any]:
    """``values`` (a script turn's or a request's settings) checked key by key.

    Keys outside :data:`OVERRIDES` and ``fault`` are for the caller to judge; a ``fault``
    must parse. Raises ``ValueError`` with a one-line message naming ``where``.
    """
    if not isinstance(values, Mapping):
        raise ValueError(f"{where} must be a JSON object, not {type(values).__name__}")
    for key, bound in OVERRIDES.items():
        if key in values:
            bound.check(f"{where}.{key}", values[key])
    fault = values.get("fault")
    if fault is not None:
        if not isinstance(fault, (str, Mapping)):
            raise ValueError(f"{where}.fault must be a string or an object")
        try:
            Fault.parse(fault if isinstance(fault, str) else dict(fault))
        except (KeyError, TypeError, ValueError) as exc:
            detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"{where}.fault: {detail}") from None
    return dict(values)
