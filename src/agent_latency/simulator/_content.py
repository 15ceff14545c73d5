"""What the simulator says and how it counts tokens.

Token counting is a fixed, documented approximation, not a real tokenizer:

* input tokens = ceil(characters / 4) over every string value (not keys) found under the
  request's prompt fields (``messages``, ``input``, ``instructions``, ``system``, ``prompt``,
  Gemini's ``contents`` and ``systemInstruction``) and ``tools``; at least 1;
* output text is split into words with their leading whitespace, one token each;
* tool-call arguments (compact JSON) are split into pieces of 4 characters, one token each.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

PROMPT_FIELDS = ("messages", "input", "instructions", "system", "prompt", "contents",
                 "systemInstruction", "tools")

_WORD = re.compile(r"\s*\S+")
_FILLER = (  # noqa: SIM905 - a sentence reads better than 27 quoted words
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation"
).split()


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def count_input_tokens(body: dict[str, Any], fields: Iterable[str] = PROMPT_FIELDS) -> int:
    """Approximate prompt tokens: ceil(chars / 4) over the prompt fields' strings, >= 1."""
    chars = sum(len(s) for f in fields if f in body for s in _strings(body[f]))
    return max(1, math.ceil(chars / 4))


def text_tokens(text: str) -> list[str]:
    """Split ``text`` into output tokens (a word with its leading whitespace each)."""
    tokens = _WORD.findall(text)
    tail = text[sum(len(t) for t in tokens):]
    if tail and tokens:
        tokens[-1] += tail
    return tokens or ([text] if text else [])


def json_tokens(text: str) -> list[str]:
    """Split JSON text (tool arguments, structured output) into 4-character tokens."""
    return [text[i : i + 4] for i in range(0, len(text), 4)] or [""]


def filler_tokens(n: int, start: int = 0) -> list[str]:
    """``n`` deterministic filler tokens; the first has no leading space when ``start`` is 0."""
    out = []
    for i in range(start, start + n):
        word = _FILLER[i % len(_FILLER)]
        out.append(word if i == 0 else " " + word)
    return out


def schema_instance(schema: Any, depth: int = 0) -> Any:
    """A small value that satisfies a JSON schema (for structured-output requests)."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return schema_instance(schema[key][0], depth + 1)
    if "$ref" in schema:
        return None  # resolved by instance_for_schema, which knows the root
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if isinstance(kind, str):
        kind = kind.lower()  # Gemini's OpenAPI schemas say "OBJECT", "STRING", ...
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: schema_instance(v, depth + 1) for k, v in props.items()}
    if kind == "array":
        return []
    if kind == "string":
        return "lorem"
    if kind == "integer":
        return 0
    if kind == "number":
        return 0.0
    if kind == "boolean":
        return False
    return None


def instance_for_schema(schema: dict[str, Any]) -> Any:
    """Like :func:`schema_instance` but resolves local ``#/$defs/...`` references."""
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs:
                return resolve(defs[ref.rsplit("/", 1)[-1]])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return schema_instance(resolve(schema))


def compact_json(value: Any) -> str:
    """JSON without spaces, as models emit tool arguments."""
    return json.dumps(value, separators=(",", ":"))
