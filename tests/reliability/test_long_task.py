"""A long-lived process: per-call CPU and memory stay flat over 50,000 streamed LLM calls in
one process task, and its budget equals the full sweep over every call
(``benchmarks/bench_long_task.py`` runs the same with 1,000,000)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CALLS = 50_000


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("long-task")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "AGENT_LAT", "PYTHON"))}
    env["PYTHONPATH"] = str(ROOT / "src")
    env["AGENT_LATENCY_DIR"] = str(out)
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_long_task.py"),
                           "--calls", str(CALLS), "--json"], check=False, env=env, cwd=out,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.slow
class TestLongTaskStaysFlat:
    """CPU per call and memory do not grow with the task's length; the budget stays exact."""

    def test_cpu_per_call_does_not_grow(self, figures: dict) -> None:
        # Blocks of 10,000 calls.  Compared as slopes, against the median of the early
        # blocks: a shared, loaded machine moves single blocks by tens of percent, while a
        # per-call cost that grows with the task (the merge of every interval it held) was
        # 40x by 19,000 calls.
        blocks = figures["cpu_per_call"]
        early = sorted(blocks[:2])[0]
        late = sorted(blocks[-2:])[0]
        assert late < 2.0 * early, blocks

    def test_memory_does_not_grow(self, figures: dict) -> None:
        rss = figures["rss_mb"]
        # Compared from the higher of the warm blocks (20,000 and 30,000 calls).  The task
        # keeps its last second of intervals unfolded (spans may start a little in the past)
        # and folds when twice what the last fold kept is waiting: at this benchmark's
        # ~10,000 calls a second that is up to ~60,000 intervals, a sawtooth whose peaks
        # leave the allocator's arenas 44 to 48 MB by 30,000 calls and 52 to 54 MB from
        # 60,000 to 150,000 calls, flat from there (measured; bounded by the call rate, not
        # the task's length).  From 20,000 calls alone, four runs grew 3.8 to 5.9 MB by
        # 50,000.  The leak this pins was +13.6 MB per 10,000 calls.
        assert rss[-1] - max(rss[1:3]) < 5.0, rss

    def test_budget_equals_the_offline_recomputation(self, figures: dict) -> None:
        for component, share in figures["budget"].items():
            assert share == pytest.approx(figures["offline"][component], abs=1e-6), component
        assert sum(figures["budget"].values()) == pytest.approx(figures["wall"], abs=1e-6)
