"""--html: the page opened in a real headless Chromium (Debian's, driven by Playwright)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import semconv
from agent_latency.report import load_tasks

CHROMIUM = os.environ.get("AGENT_LATENCY_CHROMIUM", "/usr/bin/chromium")
PROGRAM = Path(__file__).with_name("html_program.py")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("html")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_PROCESS_TASK] = "false"
    result = subprocess.run([sys.executable, str(PROGRAM)], cwd=directory, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return directory / ".agent-latency" / "traces.jsonl"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_latency", *args],
                          capture_output=True, text=True, timeout=120)


def _open_in_chromium(page_path: Path, screenshot: Path) -> dict:
    """Load the page in headless Chromium: console errors, requests made, waterfalls."""
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (make test installs Debian's chromium)")
    errors: list[str] = []
    requests: list[str] = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri())
            found = {
                "waterfalls": page.locator("svg.waterfall").count(),
                "tasks": page.locator("section.task").evaluate_all(
                    "nodes => nodes.map(n => n.dataset.task)"),
                "bars": page.locator("svg.waterfall rect").count(),
                "text": page.inner_text("body"),
            }
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    found.update(errors=errors, requests=requests)
    return found


class TestReportPage:
    """report --html: one waterfall per task, no console error, nothing fetched."""

    def test_page_in_headless_chromium(self, recorded, tmp_path):
        page = tmp_path / "report.html"
        result = _cli("report", str(recorded), "--html", str(page))
        assert result.returncode == 0, result.stderr
        tasks, _ = load_tasks(recorded)
        assert [t.name for t in tasks] == ["fix-bug", "review"] * 2
        screenshot = Path(os.environ.get("AGENT_LATENCY_SCREENSHOT", tmp_path / "report.png"))
        found = _open_in_chromium(page, screenshot)
        assert found["errors"] == []
        assert found["requests"] == [page.as_uri()]  # self-contained: nothing else loaded
        assert found["waterfalls"] == len(tasks) == 4
        # The slowest first.
        assert found["tasks"] == [t.name for t in sorted(tasks, key=lambda t: -t.budget.wall)]
        assert screenshot.stat().st_size > 10_000
        text = found["text"]
        for expected in ("Components per task", "Percentiles", "What if", "LLM sim-model",
                         "tool run_shell", "tool pytest", "tool grep", "task review"):
            assert expected in text, expected

    def test_untrusted_names_are_escaped(self, recorded, tmp_path):
        from agent_latency.report._html import render_report_page

        tasks, _ = load_tasks(recorded)
        tasks[0].name = "<script>alert(1)</script>"
        html = render_report_page(tasks, "<b>file</b>")
        assert "<script>alert" not in html and "&lt;script&gt;" in html
        assert "<b>file</b>" not in html


class TestComparePage:
    """compare --html: the comparison table and each side's median run."""

    def test_compare_page_in_headless_chromium(self, recorded, tmp_path):
        page = tmp_path / "compare.html"
        result = _cli("compare", str(recorded), str(recorded), "--html", str(page))
        assert result.returncode == 0, result.stderr
        found = _open_in_chromium(page, tmp_path / "compare.png")
        assert found["errors"] == [] and found["requests"] == [page.as_uri()]
        # Two task names, a median run of each side for each.
        assert found["waterfalls"] == 4
        assert "too few runs to say" in found["text"]
        assert "no significant difference" in found["text"]


def test_chromium_is_debians():
    """The browser is the system package, not a downloaded build."""
    if shutil.which("dpkg") is None or not Path(CHROMIUM).exists():
        pytest.skip("no dpkg or no chromium")
    assert subprocess.run(["dpkg", "-S", CHROMIUM], capture_output=True).returncode == 0


def _sections(html: str) -> list[str]:
    """Each waterfall's HTML, in page order."""
    return html.split('<section class="task"')[1:]


def _task_bar_width(section: str) -> float:
    """The width of a waterfall's first bar: the task's own."""
    import re

    match = re.search(r'<rect x="[\d.]+" y="\d+" width="([\d.]+)"', section)
    assert match, section[:300]
    return float(match.group(1))


class TestReportPageContents:
    """The page has first-token percentiles, a per-model table, the slowest tasks, calls and
    tools, trace ids as links with --trace-url, the slowest tasks drawn first (and kept when
    the page is capped), and a legend in words."""

    @pytest.fixture(scope="class")
    def page(self, recorded, tmp_path_factory) -> str:
        path = tmp_path_factory.mktemp("page") / "report.html"
        result = _cli("report", str(recorded), "--html", str(path), "--trace-url",
                      "http://localhost:16686/trace/{trace_id}")
        assert result.returncode == 0, result.stderr
        return path.read_text()

    def test_first_token_percentiles(self, page):
        assert "first token (per LLM call, n = 4)" in page  # fix-bug: 2 runs, 2 calls each
        assert "first token (per LLM call, n = 2)" in page  # review

    def test_per_model_table(self, page):
        models = page.split('<table class="models">')[1].split("</table>")[0]
        assert "<td>sim-model</td><td>6</td>" in models
        assert "prefill tok/s p50" in models

    def test_slowest_lists_link_their_traces(self, recorded, page):
        tasks, _ = load_tasks(recorded)
        slowest = max(tasks, key=lambda t: t.budget.wall)
        rows = page.split('<table class="slowest slowest-tasks">')[1].split("</table>")[0]
        first_row = rows.split("</tr>")[1]
        url = f"http://localhost:16686/trace/{slowest.span.trace_id}"
        assert f'href="{url}"' in first_row
        assert f"{slowest.budget.wall:.3f}" in first_row
        for kind in ("slowest-calls", "slowest-tools"):
            table = page.split(f'<table class="slowest {kind}">')[1].split("</table>")[0]
            assert table.count('<a class="trace" href="http://localhost:16686/trace/') >= 2
        assert "<td>run_shell</td>" in page
        # And the waterfalls' headings.
        assert all('<a class="trace" href="http://localhost:16686/trace/' in s
                   for s in _sections(page))

    def test_legend_names_a_person_reads(self, page):
        legend = page.split("LLM call phases:")[1].split("</p>")[0]
        for words in ("client after the last byte", "round trip", "TLS handshake",
                      "prefill (with queueing)", "server time (not split)"):
            assert words in legend, words
        assert "client_tail" not in legend and "output_generation" not in legend
        # Tooltips too.
        assert ": client_tail " not in page and ": output_generation " not in page

    def test_slowest_first_when_capped(self, recorded, monkeypatch):
        from agent_latency.report import _html

        tasks, _ = load_tasks(recorded)
        monkeypatch.setattr(_html, "MAX_WATERFALLS", 2)
        html = _html.render_report_page(tasks, "x")
        drawn = [s.split('data-task="')[1].split('"')[0] for s in _sections(html)]
        walls = sorted((t.budget.wall for t in tasks), reverse=True)
        assert len(drawn) == 2
        headings = [float(s.split(" — ")[1].split(" s")[0]) for s in _sections(html)]
        assert headings == [round(w, 3) for w in walls[:2]]
        assert "2 faster tasks not drawn" in html

    def test_no_link_without_a_template(self, recorded):
        from agent_latency.report._html import render_report_page

        tasks, _ = load_tasks(recorded)
        assert 'href="' not in render_report_page(tasks, "x")

    @pytest.mark.parametrize("template", ["http://x/trace/", "javascript:alert({trace_id})"])
    def test_bad_template_is_one_line_and_status_2(self, recorded, template, tmp_path):
        result = _cli("report", str(recorded), "--html", str(tmp_path / "p.html"),
                      "--trace-url", template)
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


class TestComparePageScale:
    """compare --html: a task's two median runs are drawn on one time scale."""

    def test_one_scale(self, recorded, tmp_path):
        from agent_latency.report._compare import compare_tasks
        from agent_latency.report._html import render_compare_page

        tasks, _ = load_tasks(recorded)
        fix = sorted((t for t in tasks if t.name == "fix-bug"), key=lambda t: t.budget.wall)
        short, long = fix[0], fix[-1]
        assert short.budget.wall < long.budget.wall
        html = render_compare_page(compare_tasks([short], [long]), [short], [long], "a", "b")
        first, second = _sections(html)[:2]
        ratio = _task_bar_width(first) / _task_bar_width(second)
        assert ratio == pytest.approx(short.budget.wall / long.budget.wall, rel=0.02)
        # The axis of both ends at the longer run's length (the last tick ends there).
        import re

        ends = [re.findall(r'text-anchor="end">([^<]*)</text>', s) for s in (first, second)]
        assert ends[0] == ends[1] and len(ends[0]) == 1
