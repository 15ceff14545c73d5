"""Scripts: what the simulated model answers on each turn, and the per-request plan.

A script is JSON: ``{"models": {"NAME": [TURN, ...], "*": [TURN, ...]}}`` or just
``{"turns": [TURN, ...]}`` (every model). The turn used is the number of assistant turns
the request already holds; past the end, the last turn repeats. A TURN may set
``content``, ``tool_calls`` (``[{"name": ..., "arguments": {...}}]``), ``output_tokens``,
``prefill_tps``, ``output_tps``, ``tokens_per_chunk``, ``jitter``, ``queue_ms`` and ``fault``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from ._config import SimulatorConfig
from ._content import compact_json, filler_tokens, instance_for_schema, json_tokens, text_tokens
from ._faults import check_overrides

_TURN_KEYS = frozenset(
    {"content", "tool_calls", "output_tokens", "prefill_tps", "output_tps", "tokens_per_chunk",
     "jitter", "queue_ms", "fault", "comment"}
)
_OVERRIDE_KEYS = frozenset(
    {"output_tokens", "prefill_tps", "output_tps", "tokens_per_chunk", "jitter", "queue_ms",
     "fault"}
)
_ids = itertools.count(1)


class Segment:
    """One output block: text, or one tool call whose arguments stream as tokens."""

    __slots__ = ("call_id", "kind", "name", "tokens")

    def __init__(self, kind: str, tokens: list[str], name: str = "", call_id: str = "") -> None:
        self.kind = kind
        self.tokens = tokens
        self.name = name
        self.call_id = call_id

    @property
    def text(self) -> str:
        """All of the segment's tokens joined."""
        return "".join(self.tokens)

    def arguments(self) -> Any:
        """A tool call's arguments as a value (``{}`` when cut short into invalid JSON)."""
        try:
            return json.loads(self.text)
        except ValueError:
            return {}


class Plan:
    """Everything one request will produce, and at which rates."""

    __slots__ = ("fault", "finish", "jitter", "output_tps", "prefill_tps", "queue_ms",
                 "segments", "tokens_per_chunk")

    def __init__(self, segments: list[Segment], finish: str, cfg: SimulatorConfig,
                 overrides: dict[str, Any]) -> None:
        self.segments = segments
        self.finish = finish  # "stop" | "tool_calls" | "length"
        self.prefill_tps = float(overrides.get("prefill_tps", cfg.prefill_tps))
        self.output_tps = float(overrides.get("output_tps", cfg.output_tps))
        self.tokens_per_chunk = int(overrides.get("tokens_per_chunk", cfg.tokens_per_chunk))
        self.jitter = float(overrides.get("jitter", cfg.jitter))
        self.queue_ms = float(overrides.get("queue_ms", cfg.queue_ms))
        self.fault = overrides.get("fault")

    @property
    def output_tokens(self) -> int:
        """Tokens the plan emits in total."""
        return sum(len(s.tokens) for s in self.segments)

    def text(self) -> str:
        """The text segments joined."""
        return "".join(s.text for s in self.segments if s.kind == "text")

    def tool_segments(self) -> list[Segment]:
        """The tool-call segments, in order."""
        return [s for s in self.segments if s.kind == "tool"]


class Script:
    """A loaded script: turns per model name."""

    __slots__ = ("models",)

    def __init__(self, data: dict[str, Any]) -> None:
        if "models" in data:
            models = data["models"]
        elif "turns" in data:
            models = {"*": data["turns"]}
        else:
            raise ValueError("script needs a 'models' or 'turns' key")
        if not isinstance(models, dict) or not all(isinstance(v, list) for v in models.values()):
            raise ValueError("script 'models' must map model names to lists of turns")
        for name, turns in models.items():
            for number, turn in enumerate(turns):
                _check_turn(turn, f"script turn {number} of {name!r}")
        self.models: dict[str, list[dict[str, Any]]] = models

    @classmethod
    def load(cls, source: str | Path | dict[str, Any]) -> Script:
        """Load a script from a path or a dict."""
        if isinstance(source, dict):
            return cls(source)
        return cls(json.loads(Path(source).read_text(encoding="utf-8")))

    def turn(self, model: str, assistant_turns: int) -> dict[str, Any] | None:
        """The turn for ``model`` after ``assistant_turns`` assistant turns, or None."""
        turns = self.models.get(model) or self.models.get("*")
        if not turns:
            return None
        return turns[min(assistant_turns, len(turns) - 1)]


def _check_turn(turn: Any, where: str) -> None:
    # a bad value fails at load (start-up), not as a 500 on the request that reaches it
    if not isinstance(turn, dict):
        raise ValueError(f"{where} must be a JSON object")
    unknown = set(turn) - _TURN_KEYS
    if unknown:
        raise ValueError(f"unknown script turn keys: {sorted(unknown)}")
    check_overrides(turn, where)
    if turn.get("content") is not None and not isinstance(turn["content"], str):
        raise ValueError(f"{where}.content must be a string")
    calls = turn.get("tool_calls", [])
    if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
        raise ValueError(f"{where}.tool_calls must be a list of objects with a 'name'")


def build_plan(cfg: SimulatorConfig, turn: dict[str, Any] | None, *, max_tokens: int | None,
               overrides: dict[str, Any] | None, schema: dict[str, Any] | None = None,
               tools_allowed: bool = True) -> Plan:
    """Turn a script turn (or filler) plus request limits into a :class:`Plan`."""
    turn = turn or {}
    merged = {k: v for k, v in turn.items() if k in _OVERRIDE_KEYS}
    merged.update({k: v for k, v in (overrides or {}).items() if k in _OVERRIDE_KEYS})
    segments: list[Segment] = []
    content = turn.get("content")
    wanted = merged.get("output_tokens")
    if content is None and schema is not None and not turn.get("tool_calls"):
        content = compact_json(instance_for_schema(schema))
        segments.append(Segment("text", json_tokens(content)))
    elif content:
        segments.append(Segment("text", text_tokens(content)))
    for call in turn.get("tool_calls", ()) if tools_allowed else ():
        args = call.get("arguments", {})
        args_text = args if isinstance(args, str) else compact_json(args)
        call_id = call.get("id") or f"call_{next(_ids):06d}"
        segments.append(Segment("tool", json_tokens(args_text), call["name"], call_id))
    if wanted is None and not segments:
        wanted = cfg.default_output_tokens
    if wanted is not None:
        have = sum(len(s.tokens) for s in segments)
        if wanted > have:
            if segments and segments[0].kind == "text":
                segments[0].tokens.extend(filler_tokens(wanted - have, start=have or 0))
            else:
                segments.insert(0, Segment("text", filler_tokens(wanted - have)))
    finish = "tool_calls" if any(s.kind == "tool" for s in segments) else "stop"
    if max_tokens is not None and max_tokens >= 0:
        budget = max_tokens
        kept: list[Segment] = []
        for seg in segments:
            if budget <= 0:
                finish = "length"
                break
            if len(seg.tokens) > budget:
                seg.tokens = seg.tokens[:budget]
                finish = "length"
            budget -= len(seg.tokens)
            kept.append(seg)
        segments = kept
    return Plan(segments, finish, cfg, merged)
