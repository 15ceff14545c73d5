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
        assert found["tasks"] == [t.name for t in tasks]
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
