"""The report and whatif command lines: summary, JSON, filters, whatif forms, closed pipes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import semconv
from agent_latency.budget import COMPONENTS
from agent_latency.report import load_tasks
from agent_latency.report._cli import Progress, parse_time
from agent_latency.report._stats import summarize

SECOND = 1_000_000_000
BASE = 1_700_000_000 * SECOND  # 2023-11-14T22:13:20Z


def _value(v: object) -> dict:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _span(trace: int, span: int, parent: int | None, name: str, attrs: dict,
          start: int, end: int) -> dict:
    out = {"traceId": f"{trace:032x}", "spanId": f"{span:016x}", "name": name,
           "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
           "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()]}
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    return out


def _llm_attrs(model: str, seconds: float, ttft: float, out_tokens: int) -> dict:
    attrs: dict = {attr: 0.0 for attr, _, _ in semconv.LLM_PHASES}
    attrs[semconv.LLM_CLIENT] = 0.001
    attrs[semconv.LLM_RTT] = 0.01
    attrs[semconv.LLM_PREFILL] = ttft - 0.011
    attrs[semconv.LLM_OUTPUT_GENERATION] = seconds - ttft
    attrs[semconv.LLM_TTFT] = ttft
    attrs[semconv.GEN_AI_REQUEST_MODEL] = model
    attrs[semconv.GEN_AI_USAGE_INPUT_TOKENS] = 1000
    attrs[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] = out_tokens
    return attrs


def write_fleet(path: Path, tasks: int = 12) -> list[float]:
    """``tasks`` tasks (names ``fix`` and ``review``, services ``a`` and ``b``, one a
    minute): an LLM call then two tools (``pytest``, ``grep``) each.  Returns the walls."""
    walls = []
    with path.open("w") as f:
        for t in range(1, tasks + 1):
            start = BASE + t * 60 * SECOND
            llm_s = 0.5 + 0.1 * t
            tool_s = 0.2 * t
            end = start + round((llm_s + 2 * tool_s + 0.05) * SECOND)
            walls.append((end - start) / SECOND)
            llm_end = start + round(llm_s * SECOND)
            spans = [
                _span(t, 2, 1, "chat", _llm_attrs("m-" + "xy"[t % 2], llm_s, 0.1 + 0.01 * t,
                                                  100 * t), start, llm_end),
                _span(t, 3, 1, "execute_tool pytest", {
                    semconv.COMPONENT: semconv.TOOL_EXECUTION,
                    semconv.GEN_AI_TOOL_NAME: "pytest"},
                    llm_end, llm_end + round(tool_s * SECOND)),
                _span(t, 4, 1, "execute_tool grep", {
                    semconv.COMPONENT: semconv.TOOL_EXECUTION,
                    semconv.GEN_AI_TOOL_NAME: "grep"},
                    llm_end + round(tool_s * SECOND), llm_end + round(2 * tool_s * SECOND)),
                _span(t, 1, None, "task", {semconv.TASK_NAME: "fix" if t % 3 else "review"},
                      start, end),
            ]
            service = "a" if t % 2 else "b"
            f.write(json.dumps({"resourceSpans": [{
                "resource": {"attributes": [{"key": "service.name",
                                             "value": {"stringValue": service}}]},
                "scopeSpans": [{"spans": spans}]}]}) + "\n")
    return walls


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_latency", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, list[float]]:
    path = tmp_path / "fleet.jsonl"
    return path, write_fleet(path)


class TestSummary:
    """The summary: percentiles per name, across tasks and per model, equal to _stats'."""

    def test_json_percentiles_equal_those_of_the_tasks(self, fleet):
        path, walls = fleet
        result = cli("report", "--json", str(path))
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert doc["schema"] == 1 and len(doc["tasks"]) == 12
        summary = doc["summary"]
        assert summary["all"]["wall"] == pytest.approx(summarize(walls))
        tasks, _ = load_tasks(path)
        for name in ("fix", "review"):
            mine = [t for t in tasks if t.name == name]
            group = summary["by_name"][name]
            assert group["count"] == len(mine)
            for c in COMPONENTS:
                assert group["components"][c] == pytest.approx(
                    summarize([t.budget.shares[c] for t in mine]))
        ttfts = [0.1 + 0.01 * t for t in range(1, 13)]
        assert summary["all"]["first_token"] == pytest.approx(summarize(ttfts))
        models = summary["by_model"]
        assert set(models) == {"m-x", "m-y"} and models["m-x"]["calls"] == 6
        assert models["m-y"]["first_token"]["p50"] == pytest.approx(
            summarize([0.1 + 0.01 * t for t in range(1, 13, 2)])["p50"])
        assert models["m-x"]["output_tokens_per_second"]["count"] == 6
        slowest = summary["slowest"]
        assert slowest["tasks"][0]["wall"] == pytest.approx(max(walls))
        assert slowest["tools"][0]["duration"] == pytest.approx(0.2 * 12)
        assert slowest["llm_calls"][0]["model"] == "m-x"  # task 12's

    def test_text_summary_first_and_tasks_on_request(self, fleet):
        path, _ = fleet
        result = cli("report", str(path))
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].startswith("12 tasks (2 names)")
        for heading in ("all tasks (12 tasks)", "fix (8 tasks)", "review (4 tasks)",
                        "per model", "slowest tasks", "slowest LLM calls", "slowest tools"):
            assert heading in result.stdout
        assert "task fix:" not in result.stdout
        detail = cli("report", "--tasks", str(path))
        assert detail.stdout.count("task fix:") == 8


class TestFilters:
    """--task, --since/--until and --service choose the tasks summarised."""

    def test_filters(self, fleet):
        path, _ = fleet

        def count(*args: str) -> int:
            result = cli("report", "--json", *args, str(path))
            assert result.returncode in (0, 1), result.stderr
            return len(json.loads(result.stdout)["tasks"]) if result.returncode == 0 else 0

        assert count("--task", "review") == 4
        assert count("--task", "review", "--task", "fix") == 12
        assert count("--service", "a") == 6
        # Task t starts at BASE + t minutes: since minute 3 (inclusive), until minute 6.
        since = "2023-11-14T22:16:20Z"
        until = "2023-11-14T22:19:20+00:00"
        assert count("--since", since) == 10
        assert count("--since", since, "--until", until) == 3
        assert count("--until", "1h") == 12
        empty = cli("report", "--task", "nope", str(path))
        assert empty.returncode == 1 and "no tasks" in empty.stderr and "named nope" in (
            empty.stderr)

    def test_parse_time(self):
        assert parse_time("2023-11-14T22:13:20Z") == BASE
        assert parse_time("2023-11-14 22:13:20") == BASE  # UTC unless a zone is named
        assert parse_time("2023-11-15T00:13:20+02:00") == BASE
        assert parse_time("2h", now=1000.0 + 7200) == 1000 * SECOND
        with pytest.raises(ValueError, match="neither"):
            parse_time("yesterday")

    def test_bad_time_is_one_line_status_2(self, fleet):
        path, _ = fleet
        result = cli("report", "--since", "yesterday", str(path))
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1

    def test_directory_source(self, fleet):
        path, _ = fleet
        result = cli("report", "--json", str(path.parent))
        assert result.returncode == 0, result.stderr
        assert len(json.loads(result.stdout)["tasks"]) == 12

    @pytest.mark.parametrize("command", ["report", "whatif"])
    def test_default_source_follows_agent_latency_dir(self, tmp_path, command):
        """With no SOURCE each command reads where instrument() writes: $AGENT_LATENCY_DIR."""
        out = tmp_path / "elsewhere"
        out.mkdir()
        write_fleet(out / "traces.jsonl")
        args = {"report": ("report", "--json"),
                "whatif": ("whatif", "--output-tps", "1000")}[command]
        env = {**os.environ, "AGENT_LATENCY_DIR": str(out)}
        result = subprocess.run([sys.executable, "-m", "agent_latency", *args], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, result.stderr
        if command == "report":
            assert len(json.loads(result.stdout)["tasks"]) == 12


class TestWhatIfCommandLine:
    """whatif: both spellings of a reduction, unknown tools, the preset."""

    def test_ttft_spellings_agree(self, fleet):
        path, _ = fleet
        runs = [cli("whatif", "--json", *form, str(path))
                for form in (["--ttft", "-50%"], ["--ttft=-50%"], ["--ttft", "50%"])]
        for run in runs:
            assert run.returncode == 0, run.stderr
        assert runs[0].stdout == runs[1].stdout == runs[2].stdout
        rows = [json.loads(line) for line in runs[0].stdout.splitlines()]
        assert all(r["projected_wall"] < r["recorded_wall"] for r in rows)
        assert "first token -50%" in rows[0]["scenario"]

    def test_unknown_tool_is_an_error_listing_the_tools_seen(self, fleet):
        path, _ = fleet
        result = cli("whatif", "--tool-speedup", "nosuchtool=2", str(path))
        assert result.returncode == 2
        assert len(result.stderr.splitlines()) == 1
        assert "'nosuchtool'" in result.stderr and "tools seen: grep, pytest" in result.stderr
        ok = cli("whatif", "--json", "--tool-speedup", "pytest=2", str(path))
        assert ok.returncode == 0, ok.stderr

    def test_preset_latency_first(self, fleet):
        path, _ = fleet
        result = cli("whatif", "--json", "--preset", "latency-first", str(path))
        assert result.returncode == 0, result.stderr
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert all(r["projected_wall"] < r["recorded_wall"] for r in rows)
        assert rows[0]["scenario"].startswith("preset latency-first, output tok/s 1000")
        overridden = cli("whatif", "--json", "--preset", "latency-first", "--output-tps", "50",
                         str(path))
        assert "output tok/s 50," in json.loads(overridden.stdout.splitlines()[0])["scenario"]
        helped = cli("whatif", "--help")
        assert "round-trip overhead by 80" in helped.stdout and "claim" in helped.stdout


class TestClosedPipeAndErrors:
    """A closed pipe ends quietly; errors are one line naming the file, status 2."""

    @pytest.mark.parametrize("command", [["report", "--tasks"], ["whatif", "--ttft", "-10%"]])
    def test_closed_pipe(self, tmp_path, command):
        path = tmp_path / "many.jsonl"
        write_fleet(path, tasks=600)  # more output than a pipe's buffer
        shell = (f"set -o pipefail; {sys.executable} -m agent_latency {' '.join(command)} "
                 f"{path} | head -n 1; echo status=$?")
        result = subprocess.run(["bash", "-c", shell], capture_output=True, text=True,
                                timeout=120)
        assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, (
            result.stderr)
        assert result.stderr == ""
        assert result.stdout.strip().splitlines()[-1] in ("status=0", "status=141")

    def test_missing_file_is_one_line_status_2(self, tmp_path):
        for command in ("report", "whatif"):
            result = cli(command, str(tmp_path / "nope.jsonl"))
            assert result.returncode == 2
            assert result.stderr.count("\n") == 1 and "nope.jsonl: no such file" in (
                result.stderr)

    def test_bad_line_names_file_and_line(self, fleet):
        path, _ = fleet
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:3]) + "{oops\n" + "".join(lines[3:]))
        for command in ("report", "whatif"):
            result = cli(command, str(path))
            assert result.returncode == 2 and result.stderr.count("\n") == 1
            assert f"{path}:4: malformed JSON" in result.stderr
            kept = cli(command, "--keep-going", str(path))
            assert kept.returncode == 2 and f"{path}:4:" in kept.stderr
            assert "12 tasks" in kept.stdout or kept.stdout.count("task ") == 12

    def test_unknown_option_is_one_line(self):
        result = cli("report", "--nope")
        assert result.returncode == 2 and result.stderr.count("\n") == 1


class TestProgress:
    """The progress bar: only on a terminal, only after a second."""

    def test_not_on_a_pipe(self, fleet):
        path, _ = fleet
        result = cli("report", str(path))
        assert result.stderr == ""
        assert Progress(10, io.StringIO()).feed() is None

    def test_appears_after_the_delay_and_clears(self, monkeypatch):
        out = io.StringIO()
        bar = Progress(1000, out, enabled=True)
        bar.add(100)
        assert bar._bar is None  # within the first second: nothing shown
        monkeypatch.setattr(bar, "_next_at", 0.0)
        bar.add(100)
        assert bar._bar is not None
        bar.close()
        assert bar._bar is None


class TestStatedNotes:
    """What the trace checks state (spans in no task) is said, and is not bad input."""

    def test_spans_in_no_task_are_stated_with_status_0(self, tmp_path):
        path = tmp_path / "orphan.jsonl"
        tool = {semconv.COMPONENT: semconv.TOOL_EXECUTION}
        path.write_text("".join(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": s}]}]})
                                + "\n" for s in (
            [_span(1, 1, None, "task", {semconv.TASK_NAME: "t"}, BASE, BASE + SECOND),
             _span(1, 2, 1, "tool", tool, BASE, BASE + SECOND // 2)],
            [_span(2, 3, 9, "tool", tool, BASE, BASE + SECOND // 2)])))
        result = cli("report", str(path))
        assert result.returncode == 0, result.stderr
        assert "in no task" in result.stderr and len(result.stderr.splitlines()) == 1
        assert result.stdout.startswith("1 task (1 name)")
        result = cli("whatif", "--tool-speedup", "2", str(path))
        assert result.returncode == 0, result.stderr
        assert "in no task" in result.stderr and result.stdout.startswith("task t:")
