"""Trace files are untrusted: names are shown as text, never as markup or terminal control;
what cannot be encoded is escaped; out-of-range times are one problem per file; a parent
cycle is a stated fact, never a traceback."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hostile import BASE, SECOND, line, run_cli, span, task_spans, write

from agent_latency import semconv

SURROGATE = "fix \ud800 it"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\x9b31m"
BIDI = "invoice\u202egnp.exe \u2066x\u2069 \u200f\u061c"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "AGENT_LAT", "FORCE_COLOR", "NO_COLOR"))}
    env.update(extra)
    return env


def _clean(result) -> None:
    """No traceback, and nothing but text on either stream (rich's own colours aside, with
    FORCE_COLOR)."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for stream in (result.stdout, result.stderr):
        stream = re.sub("\x1b\\[[0-9;]*m", "", stream)
        assert "\x1b" not in stream and "\x9b" not in stream and "\x07" not in stream, stream
        assert "\u202e" not in stream and "\u2066" not in stream, stream


class TestUnencodableNames:
    """A lone surrogate in a task, tool or model name is shown escaped, never fatal."""

    @pytest.fixture
    def trace(self, tmp_path) -> Path:
        return write(tmp_path / "t.jsonl", task_spans(SURROGATE))

    @pytest.mark.parametrize("args", [("report",), ("report", "--tasks"),
                                      ("report", "--tasks", "--json"),
                                      ("whatif", "--persistent-connection"),
                                      ("whatif", "--output-speedup", "2")])
    def test_terminal_commands(self, trace, tmp_path, args):
        result = run_cli(*args, str(trace), cwd=tmp_path, env=_env())
        assert result.returncode == 0, result.stderr[-3000:]
        _clean(result)
        assert "fix \\ud800 it" in result.stdout

    def test_html_page(self, trace, tmp_path):
        page = tmp_path / "page.html"
        result = run_cli("report", "--html", str(page), str(trace), cwd=tmp_path, env=_env())
        assert result.returncode == 0, result.stderr[-3000:]
        _clean(result)
        text = page.read_text(encoding="utf-8")
        assert "fix \\ud800 it" in text

    def test_compare(self, trace, tmp_path):
        result = run_cli("compare", str(trace), str(trace), cwd=tmp_path, env=_env())
        assert result.returncode in (0, 1), result.stderr[-3000:]
        _clean(result)
        assert "fix \\ud800 it" in result.stdout

    def test_ascii_terminal(self, trace, tmp_path):
        """A terminal that cannot encode the page's bars or a name's letters gets escapes."""
        write(trace, task_spans("café ☕"))
        result = run_cli("report", "--tasks", str(trace), cwd=tmp_path,
                         env=_env(PYTHONIOENCODING="ascii"))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Traceback" not in result.stderr
        assert "caf\\xe9 \\u2615" in result.stdout


class TestNamesAreNotMarkup:
    """rich prints names as text: brackets stay, no style, no live link."""

    NAMES = ("summarize [/path]", "fix [#123]", "[link=https://evil.example]click[/link]",
             "[bold red]loud", ":warning: done")

    def test_task_tables(self, tmp_path):
        trace = write(tmp_path / "t.jsonl",
                      *(task_spans(name, trace=f"{n + 1:032x}") for n, name in
                        enumerate(self.NAMES)))
        # FORCE_COLOR: rich writes as to a terminal (styles, hyperlinks) into the pipe.
        result = run_cli("report", "--tasks", str(trace), cwd=tmp_path,
                         env=_env(FORCE_COLOR="1", COLUMNS="200"))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Traceback" not in result.stderr
        assert "\x1b]8;" not in result.stdout  # no OSC 8 hyperlink
        for name in self.NAMES:
            assert f"task {name}: " in result.stdout, (name, result.stdout)


class TestEscapeSequences:
    """ANSI CSI and OSC sequences in names, ids and services reach no stream unescaped."""

    @pytest.fixture
    def trace(self, tmp_path) -> Path:
        spans = task_spans(ESCAPES, trace=f"{1:032x}")
        spans[1]["attributes"].append({"key": semconv.GEN_AI_USAGE_OUTPUT_TOKENS,
                                       "value": {"stringValue": "many" + ESCAPES}})
        other = task_spans("plain", trace="\x1b[2J" + "e" * 28)
        path = tmp_path / "t.jsonl"
        path.write_text(line(spans, service=ESCAPES) + line(other), encoding="ascii")
        return path

    @pytest.mark.parametrize("args", [("report", "--keep-going"),
                                      ("report", "--keep-going", "--tasks"),
                                      ("whatif", "--keep-going"),
                                      ("whatif", "--tool-speedup", "nosuchtool=2")])
    def test_shown_escaped(self, trace, tmp_path, args):
        result = run_cli(*args, str(trace), cwd=tmp_path, env=_env(FORCE_COLOR="1"))
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        _clean(result)
        assert "\\x1b]0;owned\\x07" in result.stdout + result.stderr
        assert all(len(problem) for problem in result.stderr.splitlines())

    def test_html_page(self, trace, tmp_path):
        page = tmp_path / "page.html"
        run_cli("report", "--keep-going", "--html", str(page), str(trace), cwd=tmp_path,
                env=_env())
        text = page.read_text(encoding="utf-8")
        assert "\x1b" not in text and "\x07" not in text and "\\x1b]0;owned" in text


class TestBidiControls:
    """Bidirectional controls in names are escaped on the page and on the terminal."""

    def test_page_and_terminal(self, tmp_path):
        trace = write(tmp_path / "t.jsonl", task_spans(BIDI))
        page = tmp_path / "page.html"
        result = run_cli("report", "--tasks", "--html", str(page), str(trace), cwd=tmp_path,
                         env=_env())
        assert result.returncode == 0, result.stderr[-3000:]
        _clean(result)
        text = page.read_text(encoding="utf-8")
        for control in "\u202e\u2066\u2069\u200f\u061c":
            assert control not in text and control not in result.stdout
        assert "invoice\\u202egnp.exe" in text and "invoice\\u202egnp.exe" in result.stdout


def _out_of_range_lines(stderr: str) -> list[str]:
    return [x for x in stderr.splitlines() if "out of range" in x]


class TestTimeRange:
    """Times before 2000, more than a day ahead, or ending before they start: one problem
    line per file, and those spans are left out."""

    def _files(self, tmp_path: Path) -> tuple[Path, Path]:
        good = task_spans("good", trace=f"{1:032x}")
        future = task_spans("future", trace=f"{2:032x}", end=10**40)  # 1e31 s of wall time
        backwards = task_spans("backwards", trace=f"{3:032x}",
                               tool_times=(BASE + SECOND // 2, BASE + SECOND // 4))
        ancient = task_spans("ancient", trace=f"{4:032x}", start=SECOND)  # 1970
        endless = task_spans("endless", trace=f"{5:032x}")
        endless[2]["endTimeUnixNano"] = float("inf")  # json.dumps writes Infinity
        first = write(tmp_path / "a.jsonl", good, future, backwards)
        second = write(tmp_path / "b.jsonl", ancient, endless, task_spans(
            "good", trace=f"{6:032x}"))
        return first, second

    def test_one_line_per_file_and_spans_left_out(self, tmp_path):
        first, second = self._files(tmp_path)
        result = run_cli("report", "--keep-going", "--json", str(first), str(second),
                         cwd=tmp_path, env=_env())
        assert result.returncode == 2, result.stderr[-3000:]
        _clean(result)
        lines = _out_of_range_lines(result.stderr)
        assert len(lines) == 2, result.stderr
        assert str(first) in lines[0] and str(second) in lines[1]
        doc = json.loads(result.stdout)
        walls = {t["task"]: t["wall"] for t in doc["tasks"]}
        # The future and ancient tasks' own spans are left out: no task there.
        assert "future" not in walls and "ancient" not in walls
        assert max(walls.values()) < 2
        # A tool that ends before it starts is left out; its task is counted without it.
        backwards = next(t for t in doc["tasks"] if t["task"] == "backwards")
        assert backwards["counts"]["tool_calls"] == 0
        assert backwards["counts"]["llm_calls"] == 1
        # Infinity is not a time at all: the line is unreadable, one problem.
        assert "endless" not in walls
        assert sum("b.jsonl:2: not an OTLP/JSON trace export" in x
                   for x in result.stderr.splitlines()) == 1, result.stderr

    def test_without_keep_going_the_first_stops(self, tmp_path):
        first, _ = self._files(tmp_path)
        result = run_cli("report", str(first), cwd=tmp_path, env=_env())
        assert result.returncode == 2
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "out of range" in result.stderr

    def test_whatif(self, tmp_path):
        first, second = self._files(tmp_path)
        result = run_cli("whatif", "--keep-going", "--json", str(first), str(second),
                         cwd=tmp_path, env=_env())
        assert result.returncode == 2, result.stderr[-3000:]
        assert len(_out_of_range_lines(result.stderr)) == 2
        rows = [json.loads(x) for x in result.stdout.splitlines()]
        assert rows and all(r["recorded_wall"] < 2 for r in rows)


class TestParentCycle:
    """A 50,000-span parent cycle: no traceback from a worker, a note, and the report."""

    def test_workers_print_no_traceback(self, tmp_path):
        n = 50_000
        cycle = [span("ab" * 16, i + 1, (i + 1) % n + 1, f"t{i}", {semconv.TASK_NAME: "t"},
                      BASE + i, BASE + SECOND) for i in range(n)]
        others = [task_spans("other", trace=f"{k + 1:032x}") for k in range(3)]
        path = tmp_path / "cycle.jsonl"
        path.write_text(line(cycle) + "".join(line(s) for s in others), encoding="ascii")
        result = run_cli("report", "--json", str(path), cwd=tmp_path,
                         env=_env(AGENT_LATENCY_REPORT_WORKERS="2"), timeout=600)
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        assert result.returncode == 0, result.stderr[-3000:]
        cycles = [x for x in result.stderr.splitlines() if "cycle" in x]
        assert len(cycles) == 1, result.stderr[-3000:]
        doc = json.loads(result.stdout)
        assert doc["summary"]["by_name"]["t"]["count"] == n
        assert doc["summary"]["by_name"]["other"]["count"] == 3
