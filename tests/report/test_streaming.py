"""agent-latency report streams its input and survives pathological lines."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

from agent_latency import semconv
from agent_latency.report import iter_traces, load_tasks, read_spans

# Times are written from here on: the reader leaves out spans from before 2000.
EPOCH = 1_700_000_000 * 1_000_000_000


def _span(trace: int, span: int, parent: int | None, name: str, attrs: dict,
          start: int, end: int) -> dict:
    out = {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": name,
           "startTimeUnixNano": str(EPOCH + start), "endTimeUnixNano": str(EPOCH + end),
           "attributes": [{"key": k, "value": {"stringValue": v} if isinstance(v, str)
                           else {"doubleValue": v}} for k, v in attrs.items()]}
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    return out


def _line(spans: list[dict]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}) + "\n"


def write_traces(path: Path, traces: int, tools: int = 20, content: int = 2000) -> None:
    """``traces`` traces, each a task with ``tools`` tool spans carrying ``content`` bytes
    of text the budget does not need, exported in two batches like a batch processor
    would, interleaved with the next trace's first batch."""
    with path.open("w") as f:
        previous_tail: list[dict] = []
        for t in range(1, traces + 1):
            base = t * 1_000_000_000
            spans = [_span(t, 1000 + i, 1, f"tool-{i}", {
                semconv.COMPONENT: semconv.TOOL_EXECUTION,
                "gen_ai.input.messages": "m" * content},
                base + i * 10, base + i * 10 + 5) for i in range(tools)]
            task = _span(t, 1, None, "task", {semconv.TASK_NAME: f"task-{t}"},
                         base, base + tools * 10)
            half = tools // 2
            f.write(_line(previous_tail + spans[:half]))
            previous_tail = [*spans[half:], task]
        f.write(_line(previous_tail))


class TestStreaming:
    """Traces are handed out as they complete; memory is bounded by a trace, not the file."""

    def test_traces_complete_in_order_and_budgets_match(self, tmp_path):
        path = tmp_path / "t.jsonl"
        write_traces(path, 5, tools=4, content=10)
        problems: list[str] = []
        traces = list(iter_traces([path], problems))
        assert problems == []
        assert [len(t) for t in traces] == [5] * 5
        assert [t[0].trace_id for t in traces] == [f"{i:032x}" for i in range(1, 6)]
        tasks, problems = load_tasks(path)
        assert [t.name for t in tasks] == [f"task-{i}" for i in range(1, 6)]
        assert all(t.budget.counts["tool_calls"] == 4 for t in tasks)

    def test_memory_is_bounded_by_a_trace(self, tmp_path):
        path = tmp_path / "big.jsonl"
        write_traces(path, 400, tools=20, content=2000)
        size = path.stat().st_size
        assert size > 15_000_000
        tracemalloc.start()
        try:
            tasks, problems = load_tasks(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert problems == [] and len(tasks) == 400
        # A couple of batch lines (~40 KB each) being parsed and the 400 tasks found (their
        # intervals: ~6 KB each), not the file's 19 MB: reading it whole took more than
        # its size.  (A fifth of it on 3.11+; CPython 3.10's larger objects need 3.9 MB.)
        assert peak < size / 4, (peak, size)


class TestPathologicalLines:
    """Deeply nested JSON is one line's problem, never a crash."""

    def test_deep_nesting_is_a_one_line_error(self, tmp_path):
        path = tmp_path / "deep.jsonl"
        good = tmp_path / "good.jsonl"
        write_traces(good, 2, tools=2, content=1)
        lines = good.read_text().splitlines(keepends=True)
        path.write_text(lines[0] + "[" * 200_000 + "]" * 200_000 + "\n"
                        + '{"resourceSpans":' + "[" * 100_000 + "\n" + "".join(lines[1:]))
        result = read_spans(path)
        assert len(result.spans) == 6
        assert result.problems[0] == f"{path}:2: nested too deeply; skipped"
        tasks, problems = load_tasks(path)
        assert len(tasks) == 2 and len(problems) == 2
        # Without --keep-going the first unreadable line stops the report: one line, status 2.
        cli = subprocess.run([sys.executable, "-m", "agent_latency", "report", str(path)],
                             capture_output=True, text=True, timeout=60)
        assert cli.returncode == 2, cli.stderr
        assert "Traceback" not in cli.stderr
        assert len(cli.stderr.splitlines()) == 1
        assert f"{path}:2: nested too deeply" in cli.stderr
        # With it, everything readable is reported and each unreadable line named.
        cli = subprocess.run([sys.executable, "-m", "agent_latency", "report", "--keep-going",
                              str(path)], capture_output=True, text=True, timeout=60)
        assert cli.returncode == 2, cli.stderr
        assert "Traceback" not in cli.stderr
        assert cli.stderr.count("nested too deeply") == 2
        assert len(cli.stderr.splitlines()) == 2
        assert "2 tasks" in cli.stdout

    def test_deeply_nested_attribute_value(self, tmp_path):
        value: dict = {"stringValue": "x"}
        for _ in range(300):
            value = {"arrayValue": {"values": [value]}}
        span = _span(1, 1, None, "task", {semconv.TASK_NAME: "t"}, 1, 2)
        span["attributes"].append({"key": "deep", "value": value})
        path = tmp_path / "t.jsonl"
        path.write_text(_line([span]))
        result = read_spans(path)  # no crash, whatever the recursion limit allows
        assert len(result.spans) + len(result.problems) == 1


class TestMalformedAttributes:
    """A stored attribute of the wrong type is one problem, not a crash."""

    def test_wrong_type_is_counted_as_other(self, tmp_path):
        task = _span(1, 1, None, "task", {semconv.TASK_NAME: "t"}, 0, 100)
        call = _span(1, 2, 1, "call", {semconv.LLM_CLIENT: "openai"}, 10, 50)
        path = tmp_path / "t.jsonl"
        path.write_text(_line([call, task]))
        tasks, problems = load_tasks(path)
        assert [t.name for t in tasks] == ["t"]
        assert len(problems) == 1 and "unusable budget attributes" in problems[0]
        assert tasks[0].budget.shares["other"] > 0
