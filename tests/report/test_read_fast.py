"""The optional fast JSON parser gives the standard library's results, errors included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_latency.report import _read
from agent_latency.report._read import read_spans

pytest.importorskip("orjson")


def _file(tmp_path: Path) -> Path:
    # Nested past orjson's 1,024 levels (written by hand: json.dumps would recurse too deep).
    deep = '{"arrayValue": {"values": [' * 350 + '{"stringValue": "x"}' + "]}}" * 350
    spans = [{"traceId": "a" * 32, "spanId": f"{i:016x}", "name": f"s{i}",
              "startTimeUnixNano": "1700000000000000001",
              "endTimeUnixNano": "1700000000000000002",
              "attributes": [{"key": "k", "value": v}]}
             for i, v in enumerate([{"doubleValue": 1.5}, {"intValue": "7"},
                                    {"boolValue": True}, {"stringValue": "é"}, "DEEP"])]
    lines = [json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [s]}]}]}).replace(
        '"DEEP"', deep) for s in spans]
    lines.insert(2, "{not json")
    lines.insert(3, '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "b", '
                    '"spanId": "c", "startTimeUnixNano": "1", "endTimeUnixNano": NaN}]}]}]}')
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


class TestFastParser:
    """orjson, when installed, is only a faster route to the same spans and problems."""

    def test_same_spans_and_problems(self, tmp_path, monkeypatch):
        path = _file(tmp_path)
        assert _read._fast_loads is not None
        fast = read_spans(path)
        monkeypatch.setattr(_read, "_fast_loads", None)
        slow = read_spans(path)
        assert fast.problems == slow.problems
        assert [(s.name, s.attributes, s.end_ns) for s in fast.spans] == [
            (s.name, s.attributes, s.end_ns) for s in slow.spans]
        # The deep span is kept where the standard library parses it (3.12 on: a C stack
        # limit, not the recursion limit) and skipped with a problem where it cannot.
        try:
            json.loads(path.read_text().splitlines()[-1])
            parsed = 5
        except RecursionError:
            parsed = 4
        assert len(slow.spans) == parsed and any("malformed JSON" in p for p in slow.problems)

    def test_turned_off_by_the_environment(self, monkeypatch):
        monkeypatch.setenv("AGENT_LATENCY_REPORT_JSON", "stdlib")
        assert _read._optional_fast_loads() is None
