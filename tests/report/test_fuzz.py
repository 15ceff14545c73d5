"""Fuzzing ``report`` and ``whatif`` with generated OTLP/JSON: hostile strings (controls,
terminal sequences, markup, bidirectional controls, lone surrogates) and numbers (huge,
negative, NaN, infinite, of the wrong type) wherever a trace holds them, including where
the budget code reads them, and structures of the wrong shape.

Whatever the input, the commands end with status 0, 1 or 2, print no traceback, and every
line on stderr is one problem: it starts with the command's name and holds no control
character.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_latency import semconv
from agent_latency.report import _whatif_cli
from agent_latency.report import main as report_main

HOSTILE = ("summarize [/path]", "[#123]", "[link=https://evil.example]x[/link]", "[bold]b",
           ":warning:", "\x1b]0;title\x07", "\x1b[2J", "\x9b31m", "\u202e321", "\u2066",
           "a\nb", "\r", "\ud800", "\udcff", "%s%n", "{0}", "", " ", "\x00", "é", "☕",
           "..", "../../x")

# Any code point, surrogates included (hypothesis leaves them out by default).
any_text = st.text(st.characters(blacklist_categories=()), max_size=12)
hostile_text = st.one_of(st.sampled_from(HOSTILE), any_text,
                         st.lists(st.sampled_from(HOSTILE), max_size=3).map("".join))
BASE = 1_700_000_000 * 10**9
numbers = st.one_of(
    st.integers(min_value=BASE, max_value=BASE + 10**10),  # sane times
    st.integers(min_value=-(2**70), max_value=2**140),
    st.sampled_from([0, -1, 10**40, 2**63, 2**64, -(2**63), 10**400, -(10**400)]),
    st.floats(allow_nan=True, allow_infinity=True),
)
# A number as OTLP/JSON writes it (a string), as a JSON number, or something else.
loose_number = st.one_of(numbers.map(str), numbers, hostile_text, st.none(), st.booleans(),
                         st.just([]), st.just({}))

KEYS = (semconv.TASK_NAME, semconv.COMPONENT, semconv.GEN_AI_TOOL_NAME,
        semconv.GEN_AI_REQUEST_MODEL, semconv.GEN_AI_RESPONSE_MODEL, semconv.LLM_CLIENT,
        semconv.LLM_TTFT, semconv.LLM_PREFILL, semconv.LLM_OUTPUT_GENERATION,
        semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
        semconv.PROCESS_TASK, semconv.budget_share("other"), semconv.BUDGET_WALL)
COMPONENT_VALUES = ("tool_execution", "llm", "other", "prefill", "network_overhead")


def any_value(depth: int = 2) -> st.SearchStrategy[Any]:
    """An OTLP/JSON AnyValue, or something that is not one."""
    leaves = st.one_of(
        hostile_text.map(lambda s: {"stringValue": s}),
        st.sampled_from(COMPONENT_VALUES).map(lambda s: {"stringValue": s}),
        loose_number.map(lambda n: {"intValue": n}),
        loose_number.map(lambda n: {"doubleValue": n}),
        st.one_of(st.booleans(), hostile_text).map(lambda b: {"boolValue": b}),
        st.just({}), st.none(), hostile_text, numbers)
    if depth == 0:
        return leaves
    return st.one_of(leaves, st.lists(any_value(depth - 1), max_size=3).map(
        lambda vs: {"arrayValue": {"values": vs}}), st.just({"kvlistValue": {"values": []}}))


span_ids = st.sampled_from([f"{n:016x}" for n in range(1, 6)] + ["", "zz", "\ud800", "1"])
spans = st.fixed_dictionaries(
    {"traceId": st.sampled_from(["ab" * 16, "cd" * 16, "q83vEjRWeJA=", "\x1b[2J", ""]),
     "spanId": span_ids,
     "name": hostile_text,
     "startTimeUnixNano": loose_number,
     "endTimeUnixNano": loose_number,
     "attributes": st.lists(st.fixed_dictionaries(
         {"key": st.one_of(st.sampled_from(KEYS), hostile_text), "value": any_value()}),
         max_size=6)},
    optional={"parentSpanId": span_ids,
              "status": st.one_of(st.just({"code": 2}), st.just({"code": "x"}), st.none())})


def sane_times(span: dict[str, Any], start: int) -> dict[str, Any]:
    """Most spans get sane times, so the budget code sees the hostile attributes."""
    return {**span, "startTimeUnixNano": str(BASE + start),
            "endTimeUnixNano": str(BASE + start + 10**9)}


# Well-formed AnyValues (a malformed one would make the whole line unreadable, and the
# budget code would never see the rest) holding any number or string.
budget_values = st.one_of(
    st.floats().map(lambda f: {"doubleValue": f}),
    numbers.map(lambda n: {"intValue": str(int(n)) if n == n and abs(n) != float("inf")
                           else "0"}),
    st.integers(min_value=-(2**80), max_value=2**80).map(lambda n: {"intValue": n}),
    hostile_text.map(lambda t: {"stringValue": t}),
    st.booleans().map(lambda b: {"boolValue": b}),
)


@st.composite
def task_trees(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A task with an LLM call and a tool (parents right, times sane), every budget
    attribute's value drawn from hostile strings and numbers: what reaches the budget
    code, the summary and the what-if."""
    trace = draw(st.sampled_from(["ab" * 16, "cd" * 16]))
    start = BASE + draw(st.integers(0, 10**12))

    def attrs(keys: tuple[str, ...], fixed: dict[str, Any]) -> list[dict[str, Any]]:
        drawn = {k: draw(budget_values) for k in keys if draw(st.booleans())}
        return [{"key": k, "value": v} for k, v in {**drawn, **fixed}.items()]

    def one(span_id: int, parent: int | None, keys: tuple[str, ...],
            fixed: dict[str, Any], begin: int, end: int) -> dict[str, Any]:
        out = {"traceId": trace, "spanId": f"{span_id:016x}", "name": draw(hostile_text),
               "startTimeUnixNano": str(begin), "endTimeUnixNano": str(end),
               "attributes": attrs(keys, fixed)}
        if parent is not None:
            out["parentSpanId"] = f"{parent:016x}"
        return out

    llm_keys = (*(attr for attr, _, _ in semconv.LLM_PHASES), semconv.LLM_TTFT,
                semconv.GEN_AI_USAGE_INPUT_TOKENS, semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
                semconv.LLM_OUTPUT_TOKENS_PER_SECOND, semconv.LLM_PREFILL_TOKENS_PER_SECOND,
                semconv.GEN_AI_REQUEST_MODEL)
    task_keys = (semconv.BUDGET_WALL, semconv.budget_share("other"), semconv.PROCESS_TASK,
                 semconv.budget_count("llm_calls"))
    name = {"stringValue": draw(hostile_text)}
    return [
        one(1, None, task_keys, {semconv.TASK_NAME: name}, start, start + 10**9),
        one(2, 1, llm_keys, {semconv.LLM_CLIENT: {"doubleValue": 0.001}}, start,
            start + 4 * 10**8),
        one(3, 1, (semconv.GEN_AI_TOOL_NAME,), {semconv.COMPONENT: draw(st.sampled_from(
            [{"stringValue": c} for c in COMPONENT_VALUES]))}, start + 5 * 10**8,
            start + 9 * 10**8),
        one(4, 3, (semconv.GEN_AI_TOOL_NAME,), {semconv.COMPONENT: {
            "stringValue": "tool_execution"}}, start + 6 * 10**8, start + 7 * 10**8),
    ]


structured_documents = st.lists(task_trees(), min_size=1, max_size=4).map(
    lambda trees: {"resourceSpans": [{"scopeSpans": [{"spans": [s for t in trees
                                                                for s in t]}]}]})

loose_documents = st.lists(
    st.tuples(spans, st.booleans(), st.integers(0, 10**9)).map(
        lambda t: sane_times(t[0], t[2]) if t[1] else t[0]),
    min_size=1, max_size=8).flatmap(lambda ss: st.one_of(
        st.just({"resourceSpans": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "\x1b]0;svc\x07"}}]},
            "scopeSpans": [{"spans": ss}]}]}),
        st.just({"resourceSpans": [{"scopeSpans": [{"spans": ss}]}]}),
        st.just({"batches": [{"scopeSpans": [{"spans": ss}]}]}),  # Tempo's name
        st.just({"resourceSpans": {"scopeSpans": ss}}),  # the wrong shape
        st.just([ss]),
    ))
documents = st.one_of(structured_documents, loose_documents)

# Every stderr line: the command's name, then one line of text (no control characters but
# none is left: safe_text escapes them).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _check(status: int, err: str, prog: str) -> None:
    assert status in (0, 1, 2), (status, err)
    assert "Traceback" not in err
    for line in err.splitlines():
        assert line.startswith(f"{prog}: "), (line, err)
        assert not _CONTROL.search(line), line


def _write(path: Path, docs: list[Any]) -> None:
    # ensure_ascii: lone surrogates as escapes, as any JSON writer may emit them.
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="ascii")


class TestFuzzedTraces:
    """Generated OTLP/JSON with hostile strings and numbers: no traceback, one line per
    problem."""

    @settings(max_examples=150,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(docs=st.lists(documents, min_size=1, max_size=3), tasks=st.booleans())
    def test_report(self, tmp_path, capsys, docs, tasks):
        path = tmp_path / "fuzz.jsonl"
        _write(path, docs)
        status = report_main(["--keep-going", *(["--tasks"] if tasks else []), str(path)])
        out, err = capsys.readouterr()
        _check(status, err, "agent-latency report")
        assert not _CONTROL.search(out.replace("\n", "")), out

    @settings(max_examples=60,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(docs=st.lists(documents, min_size=1, max_size=3))
    def test_json_and_html(self, tmp_path, capsys, docs):
        path = tmp_path / "fuzz.jsonl"
        page = tmp_path / "fuzz.html"
        _write(path, docs)
        status = report_main(["--keep-going", "--json", "--html", str(page), str(path)])
        out, err = capsys.readouterr()
        _check(status, err, "agent-latency report")
        if status == 0 or out:
            json.loads(out)
        if page.exists():
            text = page.read_text(encoding="utf-8")  # whole, encodable
            assert not _CONTROL.search(text.replace("\n", "")), text

    @settings(max_examples=60,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(docs=st.lists(documents, min_size=1, max_size=3),
           change=st.sampled_from([["--output-speedup", "2"], ["--tool-speedup", "3"],
                                   ["--persistent-connection"], ["--ttft=-50%"],
                                   ["--tool-speedup", "x=2"]]))
    def test_whatif(self, tmp_path, capsys, docs, change):
        path = tmp_path / "fuzz.jsonl"
        _write(path, docs)
        status = _whatif_cli.main(["--keep-going", *change, str(path)])
        out, err = capsys.readouterr()
        _check(status, err, "agent-latency whatif")
        assert not _CONTROL.search(out.replace("\n", "")), out


@pytest.mark.parametrize("value", ["1e400", "-1e400", "NaN", "Infinity", "1" + "0" * 5000])
def test_unparseable_numbers_are_a_line(tmp_path, capsys, value):
    """Numbers no integer holds, in a span's times: the line is skipped, stated once."""
    span = {"traceId": "ab" * 16, "spanId": "01" * 8, "name": "t",
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "X",
            "attributes": [{"key": semconv.TASK_NAME, "value": {"stringValue": "t"}}]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
                    .replace('"X"', value) + "\n")
    status = report_main(["--keep-going", str(path)])
    _, err = capsys.readouterr()
    _check(status, err, "agent-latency report")
    assert status == 2 and err.count(f"{path}:1: ") == 1, err
