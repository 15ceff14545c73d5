"""Jaeger's own UI draws an agent's trace: Jaeger v2 (the deployed config, the UI served from
a jaeger-ui build through ``extensions.jaeger_query.ui.assets_path``) gets a demo task's
spans straight from an instrumented agent, and headless Chromium opens the trace page.

No package registry serves a built jaeger-ui and Jaeger's Go module holds only a placeholder
page: the build is ``shared/jaeger-ui/build`` beside the repository (built from jaeger-ui's
own source; docs/production.md, "Tests").  Without it the test skips, saying where it looked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency.simulator import Simulator, SimulatorConfig

from ._servers import Jaeger
from ._stack import REPO

pytestmark = pytest.mark.slow

JAEGER_UI = Path(os.environ.get("AGENT_LATENCY_JAEGER_UI")
                 or REPO.parent / "shared" / "jaeger-ui" / "build")
CHROMIUM = os.environ.get("AGENT_LATENCY_CHROMIUM", "/usr/bin/chromium")
SERVICE = "jaeger-ui-demo"
# What the waterfall must draw: the task, its LLM call, the call's phase children, the tool.
DRAWN = ("invoke_agent demo", "chat sim-large", "prefill", "output_generation",
         "execute_tool run_tests", SERVICE)


def _demo_trace(tmp: Path, jaeger: Jaeger) -> str:
    """One task of the test agent (a streamed call with a 0.3 s prefill, then a tool),
    exported over OTLP to Jaeger; its trace id."""
    plan = tmp / "plan.json"
    plan.write_text(json.dumps({"workers": 1, "tasks": [{"kind": "demo", "seconds": 0.6}]}))
    out = tmp / "tasks.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env.update({"OTEL_SERVICE_NAME": SERVICE, "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp_http,
                "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none",
                "AGENT_LATENCY_DIR": str(tmp / "agent"), "AGENT_LATENCY_PROCESS_TASK": "false",
                "AGENT_LATENCY_SUMMARY": "false"})
    # ~500 input tokens at 1,600 tokens/s: a prefill long enough to be drawn as a bar.
    with Simulator(SimulatorConfig(prefill_tps=1_600.0, output_tps=200.0)) as sim:
        agent = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("otlp_agent.py")), sim.base_url,
             str(plan), str(out)], env=env, capture_output=True, text=True, timeout=120,
            check=False)
    assert agent.returncode == 0, agent.stderr[-3000:]
    (task,) = [json.loads(line) for line in out.read_text().splitlines()]
    return str(task["trace_id"])


class TestJaegerUi:
    """Jaeger's UI in headless Chromium draws a task's trace: the task span, the LLM call
    with its phase children, the tool."""

    def test_trace_page_draws_phase_children(self, tmp_path: Path):
        if not (JAEGER_UI / "index.html").is_file():
            pytest.skip(f"no Jaeger UI build at {JAEGER_UI} (shared/jaeger-ui/build beside "
                        "the repository; docs/production.md#tests)")
        playwright = pytest.importorskip("playwright.sync_api")
        if not Path(CHROMIUM).exists():
            pytest.skip(f"no Chromium at {CHROMIUM} (make test installs Debian's chromium)")
        jaeger = Jaeger(tmp_path, str(JAEGER_UI))
        try:
            trace_id = _demo_trace(tmp_path, jaeger)
            screenshot = tmp_path / "jaeger-trace.png"
            errors: list[str] = []
            with playwright.sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run"])
                try:
                    page = browser.new_page(viewport={"width": 1600, "height": 900})
                    page.on("pageerror", lambda e: errors.append(str(e)))
                    page.goto(f"{jaeger.query}/trace/{trace_id}")
                    page.get_by_text("output_generation").first.wait_for(timeout=30_000)
                    text = page.inner_text("body")
                    # One row per span in the waterfall: 5 at least (task, call, two phases,
                    # tool), each with its bar.
                    rows = page.locator(".span-row").count()
                    bars = page.locator(".SpanBar--bar").count()
                    page.screenshot(path=str(screenshot), full_page=True)
                finally:
                    browser.close()
        finally:
            jaeger.stop()
        # Kept with the test's other files (pytest keeps the last runs' directories).
        print(f"\nJaeger UI screenshot: {screenshot}")
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert errors == []
        for name in DRAWN:
            assert name in text, name
        assert trace_id[:7] in text
        assert rows >= 5 and bars >= 5, (rows, bars)
