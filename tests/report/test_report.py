"""agent-latency report and whatif on stored traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from machine_load import busy_slack

from agent_latency import semconv
from agent_latency.budget import COMPONENTS
from agent_latency.report import TraceFileError, load_tasks, read_spans

PROGRAM = textwrap.dedent("""
    import time, agent_latency
    from concurrent.futures import ThreadPoolExecutor
    from opentelemetry import context
    agent_latency.instrument()
    with agent_latency.task("outer"):
        with agent_latency.tool("pytest"):
            time.sleep(0.03)
            with agent_latency.tool("python"):  # nested: tool time, not another tool call
                time.sleep(0.03)
        with agent_latency.task("inner"):
            ctx = context.get_current()
            def work(d):
                token = context.attach(ctx)
                try:
                    with agent_latency.tool("grep"):
                        time.sleep(d)
                finally:
                    context.detach(token)
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(work, [0.03, 0.03]))
        time.sleep(0.01)
""")


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_latency", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("trace")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_PROCESS_TASK] = "false"  # the tasks are the program's own
    result = subprocess.run([sys.executable, "-c", PROGRAM], cwd=directory, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return directory


class TestOfflineBudgets:
    """Budgets recomputed from the file equal the ones the live processor set."""

    def test_recomputed_equals_recorded(self, recorded):
        tasks, problems = load_tasks(str(recorded / ".agent-latency/traces.jsonl"))
        assert problems == []
        assert [t.name for t in tasks] == ["outer", "inner"]
        for task in tasks:
            attrs = task.span.attributes
            for c in COMPONENTS:
                assert task.budget.shares[c] == pytest.approx(
                    attrs[semconv.budget_share(c)], abs=1e-6), (task.name, c)
            assert task.budget.counts["tool_calls"] == attrs[semconv.budget_count("tool_calls")]
        outer = tasks[0]
        assert outer.budget.counts["tool_calls"] == 3
        assert outer.budget.counts["subtasks"] == 1

    def test_report_command_prints_the_summary_then_each_task(self, recorded):
        result = run_cli("report", cwd=recorded)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("2 tasks (2 names)")
        assert "all tasks (2 tasks)" in result.stdout and "slowest tools" in result.stdout
        assert "task outer:" not in result.stdout
        result = run_cli("report", "--tasks", cwd=recorded)
        assert "task outer" in result.stdout and "task inner" in result.stdout
        assert "tool execution" in result.stdout
        assert "3 tool calls" in result.stdout

    def test_report_json(self, recorded):
        result = run_cli("report", "--json", "--task", "inner", cwd=recorded)
        doc = json.loads(result.stdout)
        assert doc["schema"] == 1
        assert [r["task"] for r in doc["tasks"]] == ["inner"]
        row = doc["tasks"][0]
        assert abs(sum(row["shares"].values()) - row["wall"]) < 1e-9
        assert set(doc["summary"]) >= {"by_name", "all", "by_model"}
        assert doc["summary"]["by_name"]["inner"]["wall"]["p50"] == row["wall"]


class TestWhatIf:
    """whatif projects recorded tasks."""

    def test_tool_speedup_halves_tool_time(self, recorded):
        result = run_cli("whatif", "--json", "--tool-speedup", "2", "--task", "outer",
                         cwd=recorded)
        assert result.returncode == 0, result.stderr
        row = json.loads(result.stdout)
        tool_share = load_tasks(str(recorded / ".agent-latency/traces.jsonl"), "outer")[0][
            0].budget.shares["tool_execution"]
        # Exact when the two parallel tools overlap fully; a busy machine starts the second
        # thread late, which moves the saving by milliseconds.
        assert row["recorded_wall"] - row["projected_wall"] == pytest.approx(
            tool_share / 2, abs=0.01 + busy_slack())

    def test_named_tool_speedup_and_no_change(self, recorded):
        result = run_cli("whatif", "--json", "--tool-speedup", "pytest=3", cwd=recorded)
        rows = {json.loads(x)["task"]: json.loads(x) for x in result.stdout.splitlines()}
        assert rows["inner"]["projected_wall"] == pytest.approx(rows["inner"]["recorded_wall"])
        assert rows["outer"]["projected_wall"] < rows["outer"]["recorded_wall"] - 0.03

    def test_bad_percentage_is_a_one_line_error(self, recorded):
        result = run_cli("whatif", "--network", "150%", cwd=recorded)
        assert result.returncode == 2
        assert "not a percentage" in result.stderr


class TestBadFiles:
    """Malformed input is reported in one line and loses nothing else."""

    def test_malformed_lines_are_skipped_and_named(self, recorded, tmp_path):
        good = (recorded / ".agent-latency/traces.jsonl").read_text().splitlines()
        bad = tmp_path / "mixed.jsonl"
        bad.write_text("\n".join([good[0], "{not json", '{"resourceSpans": 5}', *good[1:]]))
        result = read_spans(bad)
        assert len(result.problems) == 2
        assert "mixed.jsonl:2: malformed JSON" in result.problems[0]
        assert "mixed.jsonl:3: not an OTLP/JSON trace export" in result.problems[1]
        full = read_spans(recorded / ".agent-latency/traces.jsonl")
        assert len(result.spans) == len(full.spans)
        cli = run_cli("report", str(bad), cwd=tmp_path)
        assert cli.returncode == 2 and cli.stderr.count("\n") == 1
        assert "mixed.jsonl:2: malformed JSON" in cli.stderr
        cli = run_cli("report", "--keep-going", str(bad), cwd=tmp_path)
        assert cli.returncode == 2
        assert cli.stderr.count("\n") == 2
        assert cli.stdout.startswith("2 tasks")

    def test_keep_going_reports_a_directorys_good_files(self, recorded, tmp_path):
        directory = tmp_path / "runs"
        directory.mkdir()
        good = directory / "good.jsonl"
        good.write_text((recorded / ".agent-latency/traces.jsonl").read_text())
        (directory / "notes.jsonl").write_text("hello world\nthis is not OTLP\n")
        (directory / "zeros.pb").write_bytes(b"\x00\x00\x00\xff" + bytes(range(1, 40)))
        alone = run_cli("report", str(good), cwd=tmp_path)
        cli = run_cli("report", "--keep-going", str(directory), cwd=tmp_path)
        assert cli.returncode == 2
        assert cli.stdout.split(" from ")[0] == alone.stdout.split(" from ")[0], cli.stderr
        lines = cli.stderr.splitlines()
        assert len(lines) == 2, lines
        assert "notes.jsonl: text, not a trace file" in lines[0]
        assert "zeros.pb: " in lines[1]
        stops = run_cli("report", str(directory), cwd=tmp_path)
        assert stops.returncode == 2 and stops.stdout == ""
        assert "notes.jsonl: text, not a trace file" in stops.stderr

    def test_keep_going_with_nothing_readable_says_why(self, tmp_path):
        (tmp_path / "notes.jsonl").write_text("hello\n")
        cli = run_cli("report", "--keep-going", str(tmp_path / "notes.jsonl"), cwd=tmp_path)
        assert cli.returncode == 2 and cli.stdout == ""
        assert cli.stderr.count("\n") == 1 and "text, not a trace file" in cli.stderr

    @pytest.mark.parametrize(("line", "said"), [
        ('{"a": "cut', "Unterminated string starting at column 7"),
        ('{"a": "\x01"}', "Invalid control character at column 8"),
        ("{nope", "Expecting property name enclosed in double quotes at column 2"),
    ])
    def test_a_json_error_says_where_once(self, tmp_path, line, said):
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"resourceSpans": []}\n' + line)  # the last line: no newline
        (problem,) = read_spans(bad).problems
        assert f"bad.jsonl:2: malformed JSON ({said}); line skipped" in problem
        assert " at at " not in problem

    def test_missing_file(self, tmp_path):
        with pytest.raises(TraceFileError, match="no such file"):
            read_spans(tmp_path / "nope.jsonl")
        result = run_cli("report", cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.strip().count("\n") == 0
        assert "no such file" in result.stderr

    def test_file_without_tasks(self, tmp_path):
        (tmp_path / "empty.jsonl").write_text("")
        result = run_cli("report", "empty.jsonl", cwd=tmp_path)
        assert result.returncode == 1 and "no tasks" in result.stderr


class TestImplicitProcessTask:
    """The report shows the implicit process task only when it had work of its own."""

    @pytest.mark.parametrize(("outside", "names"), [
        ("", ["outer", "inner"]),
        ("subprocess.run(['true'])", ["python -c", "outer", "inner"]),
    ])
    def test_shown_only_with_work_of_its_own(self, tmp_path, outside, names):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
        program = "import subprocess\n" + PROGRAM + outside + "\n"
        result = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        tasks, _ = load_tasks(str(tmp_path / ".agent-latency/traces.jsonl"))
        assert [t.name for t in tasks] == names
