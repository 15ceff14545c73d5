"""Estimated is visible: a non-streamed call's server time that nothing could split into
prefill and output generation is said to be unsplit on the budget line, in the report and
on the HTML page, and no speed is derived from it; a split made with learned rates is said
to be an estimate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_latency import semconv
from agent_latency.budget import Budget
from agent_latency.codec import split_source
from agent_latency.simulator import Simulator, SimulatorConfig

PY = sys.executable
pytestmark = pytest.mark.skipif(os.name != "posix", reason="exec-based runner")

AGENT = """
    import openai, sys
    client = openai.OpenAI(base_url=sys.argv[1], api_key="x", max_retries=0)
    if sys.argv[2] == "stream-first":
        for _ in client.chat.completions.create(
                model="sim-a", messages=[{"role": "user", "content": "hi " * 50}],
                max_tokens=8, stream=True):
            pass
    for _ in range(3):
        client.chat.completions.create(
            model="sim-a", messages=[{"role": "user", "content": "hi " * 50}], max_tokens=8)
    """


@pytest.fixture(scope="module")
def sim():
    with Simulator(SimulatorConfig(prefill_tps=2000.0, output_tps=200.0,
                                   default_output_tokens=8)) as server:
        yield server


def run_agent(tmp_path: Path, sim: Simulator, mode: str) -> tuple[str, Path]:
    """Run the agent under ``agent-latency run``: its stderr (the budget line) and its
    traces."""
    prog = tmp_path / "agent.py"
    prog.write_text(textwrap.dedent(AGENT))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "AGENT_LATENCY_"))}
    environ[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    proc = subprocess.run([PY, "-m", "agent_latency", "run", "--", PY, str(prog),
                           sim.base_url + "/v1", mode], env=environ, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr, tmp_path / "out" / "traces.jsonl"


def report(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([PY, "-m", "agent_latency", "report", *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


class TestNotSplit:
    """Three plain create() calls, no stream before them: their server time is unsplit."""

    def test_budget_line_says_server_not_split(self, tmp_path, sim):
        stderr, _ = run_agent(tmp_path, sim, "plain")
        line = next(ln for ln in stderr.splitlines() if ln.startswith("task agent "))
        assert "server " in line and "(not split: non-streamed)" in line, line
        assert "prefill" not in line and "output" not in line, line

    def test_report_marks_it_and_derives_no_speed(self, tmp_path, sim):
        _, traces = run_agent(tmp_path, sim, "plain")
        text = report(str(traces)).stdout
        assert "3 of 3 LLM calls not split (non-streamed)" in text, text
        model_row = next(ln for ln in text.splitlines() if ln.strip().startswith("sim-a"))
        assert model_row.split()[-1] == "-" and model_row.split()[-2] == "-", model_row
        data = json.loads(report("--json", str(traces)).stdout)
        assert data["summary"]["all"]["not_split_calls"] == 3
        task = data["summary"]["slowest"]["tasks"][0]
        assert task["counts"]["not_split_calls"] == 3
        assert task["prefill_tokens_per_second"] is None
        assert task["output_tokens_per_second"] is None
        assert all(c["split"] == "not-split" and c["prefill_tokens_per_second"] is None
                   for c in data["summary"]["slowest"]["llm_calls"])
        detail = report("--tasks", str(traces)).stdout
        assert "prefill*" in detail and "not split into prefill and output" in detail, detail

    def test_html_page_marks_it(self, tmp_path, sim):
        _, traces = run_agent(tmp_path, sim, "plain")
        page = tmp_path / "r.html"
        report("--html", str(page), str(traces))
        html = page.read_text()
        assert "not split (non-streamed)" in html
        assert "server time (not split)" in html  # the waterfall's legend and bars


class TestEstimated:
    """After a stream has taught the rates, the split is made and said to be an estimate."""

    def test_marked_as_estimate(self, tmp_path, sim):
        stderr, traces = run_agent(tmp_path, sim, "stream-first")
        line = next(ln for ln in stderr.splitlines() if ln.startswith("task agent "))
        assert "(3 of 4 calls split by estimate)" in line, line
        assert "3 of 4 LLM calls split by estimate" in report(str(traces)).stdout
        data = json.loads(report("--json", str(traces)).stdout)
        calls = data["summary"]["slowest"]["llm_calls"]
        estimated = [c for c in calls if c["split"] == "estimated"]
        assert estimated and all(c["prefill_tokens_per_second"] is None for c in estimated)


class TestSplitSource:
    """The split's source read back from a call's attributes, old traces included."""

    def test_sources(self):
        assert split_source({semconv.LLM_TIMING_SOURCE: "not-split"}) == "not-split"
        assert split_source({semconv.LLM_TIMING_SOURCE: "measured"}) == "measured"
        assert split_source({}) == "measured"
        # Recorded before "not-split" existed: estimated, with no output generation.
        assert split_source({semconv.LLM_TIMING_SOURCE: "estimated",
                             semconv.LLM_OUTPUT_GENERATION: 0.0,
                             semconv.LLM_STREAMING: False}) == "not-split"
        assert split_source({semconv.LLM_TIMING_SOURCE: "estimated",
                             semconv.LLM_OUTPUT_GENERATION: 0.2}) == "estimated"

    def test_budget_line_forms(self):
        shares = {"output_generation": 0.0, "prefill": 0.96, "tool_execution": 0.0,
                  "network_overhead": 0.01, "other": 0.03}
        budget = Budget(wall=1.0, shares=shares, busy=dict(shares),
                        counts={"llm_calls": 3, "not_split_calls": 3, "input_tokens": 30})
        assert budget.summary("t").startswith(
            "task t 1.00s = server 0.96 (not split: non-streamed) | tools 0.00")
        assert budget.prefill_tokens_per_second is None
        budget.counts.update(llm_calls=4, not_split_calls=1, estimated_calls=2)
        assert ("prefill 0.96 (1 of 4 calls not split (non-streamed), in prefill; "
                "2 of 4 calls split by estimate)") in budget.summary("t")
        budget.counts.update(not_split_calls=0, estimated_calls=0)
        assert "(" not in budget.summary("t")
        assert budget.prefill_tokens_per_second == pytest.approx(30 / 0.96)


class TestSplitBound:
    """The split point's bound (the calls' first-token bounds summed) shown after both
    figures it moves time between, in the task line and the report; nothing under 5 ms
    (ordinary timing jitter, not a pause: the demo's 1 ms bound said "a long garbage
    collection")."""

    @staticmethod
    def _budget(bound_us: int) -> Budget:
        shares = {"output_generation": 0.33, "prefill": 0.37, "tool_execution": 0.0,
                  "network_overhead": 0.01, "other": 1.29}
        return Budget(wall=2.0, shares=shares, busy=dict(shares),
                      counts={"llm_calls": 1, "split_bound_us": bound_us})

    def test_the_task_line(self):
        assert self._budget(326_000).summary("t").startswith(
            "task t 2.00s = output 0.33 ±0.33 | prefill 0.37 ±0.33 | tools 0.00")
        assert "±" not in self._budget(4_000).summary("t")  # 0.00 at two decimals

    def test_the_report_text(self):
        from io import StringIO

        from agent_latency.report._render import render_budget

        out = StringIO()
        render_budget("t", self._budget(326_000), out)
        assert "prefill and output generation: split point ±0.326 s: a first token" \
            in out.getvalue()
        for under in (400, 1_000, 4_999):
            out = StringIO()
            render_budget("t", self._budget(under), out)
            assert "split point" not in out.getvalue(), under
        assert self._budget(5_000).bound_note().startswith("split point ±0.005 s")

    def test_counted_from_the_calls(self):
        from agent_latency.budget import COUNT_NAMES
        from agent_latency.codec import count_span

        counts = dict.fromkeys(COUNT_NAMES, 0)
        for bound in (0.25, 0.076, 0.0):
            count_span(counts, "llm", {semconv.LLM_FIRST_TOKEN_BOUND: bound})
        count_span(counts, "llm", {})  # a non-streamed call: none
        assert counts["split_bound_us"] == 326_000


class TestSplitBoundInTheSummary:
    """The aggregate report says how many calls were split at a first token dated within a
    window, and the widest bound; its JSON carries both."""

    @staticmethod
    def _call(bound: float | None):
        from agent_latency.report._read import StoredSpan
        from agent_latency.report._summary import CallRecord

        attrs = {semconv.GEN_AI_REQUEST_MODEL: "m", semconv.LLM_STREAMING: True,
                 semconv.LLM_TTFT: 0.4}
        if bound is not None:
            attrs[semconv.LLM_FIRST_TOKEN_BOUND] = bound
        return CallRecord("t", StoredSpan("a" * 32, "b" * 16, "", "chat m", 0, 10**9, attrs))

    def test_counted_and_said(self):
        from agent_latency.report._summary import _Splits, split_words

        splits = _Splits()
        splits.count([self._call(0.326), self._call(0.002), self._call(None)])
        more = _Splits()
        more.count([self._call(0.09)])
        splits.merge(more)  # a report read in parts gives what one read gives
        figures = splits.to_json()
        assert figures["bounded_calls"] == 2
        assert figures["max_split_bound"] == pytest.approx(0.326)
        words = split_words(figures)
        assert words.startswith("2 of 4 LLM calls split at a first token dated within a "
                                "window")
        assert "±0.326 s" in words

    def test_nothing_said_under_the_shown_precision(self):
        from agent_latency.report._summary import _Splits, split_words

        splits = _Splits()
        splits.count([self._call(0.004), self._call(None)])
        assert splits.to_json()["bounded_calls"] == 0
        assert split_words(splits.to_json()) == ""

    def test_each_call_carries_its_bound(self):
        assert self._call(0.25).to_json()["split_bound"] == 0.25
        assert self._call(None).to_json()["split_bound"] == 0.0
