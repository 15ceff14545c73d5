"""docs/semconv.md lists every name semconv.py defines."""

from __future__ import annotations

import re
from pathlib import Path

from agent_latency import semconv

DOC = Path(__file__).resolve().parents[1] / "docs" / "semconv.md"


def _names() -> dict[str, str]:
    out = {}
    for key, value in vars(semconv).items():
        if not key.isupper() or not isinstance(value, str) or key == "BUDGET_PREFIX":
            continue
        if "." in value or "/" in value or value.startswith(("AGENT_LATENCY_", "OTEL_")):
            out[key] = value
    return out


def _documented(text: str, name: str) -> bool:
    if f"`{name}`" in text or name in text:
        return True
    # `agent_latency.llm.retry`, `.client`, … lists: the prefix with the last part.
    prefix, _, last = name.rpartition(".")
    return bool(prefix) and f"`.{last}`" in text and prefix.rpartition(".")[0] in text


class TestSemconvDocs:
    """Every attribute, metric and environment variable is documented."""

    def test_every_name_is_in_the_doc(self):
        text = DOC.read_text()
        missing = sorted(v for v in _names().values() if not _documented(text, v))
        assert missing == []

    def test_names_are_unique_per_meaning(self):
        names = _names()
        dupes = {v for v in names.values() if list(names.values()).count(v) > 1}
        # A metric and the span attribute it aggregates may share a name.
        assert dupes <= {"agent_latency.llm.output_tokens_per_second",
                         "agent_latency.llm.prefill_tokens_per_second"}

    def test_ours_are_prefixed(self):
        for key, value in _names().items():
            # MCP_METHOD_NAME and friends are the MCP conventions' own names.
            if key.startswith(("LLM_", "BUDGET_", "TOOL_", "METRIC_")) or key in {
                    "MCP_SERVER_TIME", "MCP_TRANSPORT"}:
                assert re.match(r"agent_latency\.", value), (key, value)
