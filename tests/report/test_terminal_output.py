"""What report and whatif print for a person: trace ids where a task is looked up, lines
that fit the terminal without breaking a number or an id, and what-ifs in words."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import write_fleet

TRACE_ID = re.compile(r"\b[0-9a-f]{32}\b")


def cli(*args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "agent_latency", *args], capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.jsonl"
    write_fleet(path)
    return path


class TestWidthAndTraceIds:
    """The summary fits COLUMNS (the first line, naming the source, aside); ids are whole."""

    @pytest.mark.parametrize("columns", [80, 100])
    def test_fits(self, fleet, columns):
        result = cli("report", str(fleet), columns=columns)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        too_long = [ln for ln in lines[1:] if len(ln) > columns]
        assert not too_long
        ids = {f"{t:032x}" for t in range(1, 13)}
        shown = set(TRACE_ID.findall(result.stdout))
        assert shown and shown <= ids  # whole ids, never cut

    def test_piped_without_columns_keeps_rows_whole(self, fleet):
        result = cli("report", str(fleet))
        slowest = result.stdout.split("slowest tasks\n", 1)[1].split("\n\n", 1)[0]
        assert all(TRACE_ID.search(row) for row in slowest.splitlines())

    def test_task_tables_carry_trace_ids(self, fleet):
        result = cli("report", "--tasks", str(fleet), columns=100)
        titles = [ln for ln in result.stdout.splitlines() if ln.startswith("task ")]
        assert len(titles) == 12
        assert all(re.match(r"^task \w+: [\d.]+ s  trace [0-9a-f]{32}$", t) for t in titles)


class TestWhatIfInWords:
    """whatif: a summary across tasks in words, tool factors by name, and with no option
    the usual changes one at a time instead of "no change" for every task."""

    def test_summary_across_tasks(self, fleet):
        result = cli("whatif", "--output-tps", "1000", "--tool-speedup", "pytest=2",
                     str(fleet))
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert "{" not in result.stdout and "'" not in result.stdout
        per_task = [ln for ln in lines if ln.startswith("task ")]
        assert len(per_task) == 12 and all(TRACE_ID.search(ln) for ln in per_task)
        assert "with output tok/s 1000, pytest ÷ 2" in per_task[0]
        assert re.match(r"^in all, 12 tasks: [\d.]+ s recorded -> [\d.]+ s with output tok/s "
                        r"1000, pytest ÷ 2 \(-[\d.]+ s, -\d+%\), per task -\d+% to -\d+%, "
                        r"median -\d+%$", lines[-1]), lines[-1]

    def test_no_option(self, fleet):
        result = cli("whatif", str(fleet))
        assert result.returncode == 0, result.stderr
        assert "no change" in result.stdout.splitlines()[0]
        rows = [ln for ln in result.stdout.splitlines() if ln.startswith("  ")]
        labels = [ln.split("->")[0].strip() for ln in rows]
        assert {"output tokens/s ×2", "tools twice as fast", "a persistent connection",
                "preset latency-first"} <= set(labels)
        savings = [float(re.search(r"-> ([\d.]+) s", ln).group(1)) for ln in rows]
        assert savings == sorted(savings)  # the largest saving first
        assert "task fix:" not in result.stdout
