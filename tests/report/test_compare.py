"""agent-latency compare: simulator runs at two output rates, and at the same rate twice."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from machine_load import OthersCpu, busy_slack

from agent_latency import semconv
from agent_latency.report._compare import compare_tasks, mann_whitney_rank, shift
from agent_latency.report._sources import load_source

RUNS = 8
SLOW_TPS, FAST_TPS = 200.0, 800.0
RECORDER = Path(__file__).with_name("sim_runs.py")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_PROCESS_TASK] = "false"
    return env


def _record(directory: Path, output_tps: float, runs: int = RUNS) -> list[float]:
    directory.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([sys.executable, str(RECORDER), str(output_tps), str(runs)],
                            cwd=directory, env=_env(), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _record_interleaved(sets: dict[Path, float], runs: int = RUNS) -> dict[Path, list[float]]:
    """Record several sets of runs a run at a time in turn (A1 B1 C1 A2 …): the machine's
    load drifts over seconds on a shared machine, and must fall on every set alike, or two
    sets at the same settings differ for real."""
    procs = {}
    for directory, output_tps in sets.items():
        directory.mkdir(parents=True, exist_ok=True)
        procs[directory] = subprocess.Popen(
            [sys.executable, str(RECORDER), str(output_tps), str(runs), "--stepped"],
            cwd=directory, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
    try:
        for proc in procs.values():
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()[-3000:]
        for _ in range(runs):
            for proc in procs.values():
                proc.stdin.write("go\n")
                proc.stdin.flush()
                assert proc.stdout.readline().strip() == "ran", proc.stderr.read()[-3000:]
        truths = {}
        for directory, proc in procs.items():
            # Not communicate(): it reads the pipe's descriptor, past what readline() has
            # already buffered (the last line may be in that buffer).
            proc.stdin.close()
            out, err = proc.stdout.read(), proc.stderr.read()
            assert proc.wait(timeout=120) == 0, err[-3000:]
            truths[directory] = json.loads(out.strip().splitlines()[-1])
        return truths
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


class Recordings(dict[str, tuple[Path, list[float]]]):
    """Each set's trace directory and truth by name, and ``others``: what the rest of the
    machine used of the CPUs while they were recorded (cores; None where unknown)."""

    others: float | None = None


# The rest of the machine used less than this share of a core while the sets were recorded:
# the recorders' own time (the client's CPU, ``other``) is alike in each.
QUIET_OTHERS = 0.1


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Recordings:
    root = tmp_path_factory.mktemp("compare")
    sets = {"slow": SLOW_TPS, "fast": FAST_TPS, "fast2": FAST_TPS}
    with OthersCpu() as others:
        truths = _record_interleaved({root / name: tps for name, tps in sets.items()})
    recordings = Recordings(
        {name: (root / name / ".agent-latency", truths[root / name]) for name in sets})
    recordings.others = others.share
    return recordings


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent_latency", "compare", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.quiet  # rates recorded on the simulator, to 2 %: make test runs it alone
class TestCompareOnTheSimulator:
    """The faster output rate is found significantly faster; the same rate twice is not."""

    def test_faster_rate_is_significant_and_truth_inside_interval(self, recorded):
        slow_dir, slow_truth = recorded["slow"]
        fast_dir, fast_truth = recorded["fast"]
        result = _cli(str(slow_dir), str(fast_dir), "--json")
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        assert doc["schema"] == 1 and doc["warnings"] == []
        [task] = doc["tasks"]
        assert (task["task"], task["runs_a"], task["runs_b"]) == ("fix-bug", RUNS, RUNS)
        for metric in ("wall", "output_generation"):
            m = task["metrics"][metric]
            assert m["significant"], (metric, m)
            low, high = m["interval"]
            assert high < 0  # B (fast) is faster
            # The measured difference (of the medians) lies inside the interval.
            assert low <= m["difference"] <= high, (metric, m)
        # The shift is the one the simulator really made: its ground truth (server side)
        # and the rates' prediction, 3 calls × 39 gaps × (1/800 − 1/200) s.  Within 3 %:
        # the client sees the first token of a fast stream a little late (measured here:
        # about 1.5 ms per call at 800 tok/s), which shortens its output time.
        output = task["metrics"]["output_generation"]
        truth_difference = statistics.median(fast_truth) - statistics.median(slow_truth)
        # The simulator's own pacing drifts on a loaded machine (3.8 % with two busy loops
        # beside the suite): a check of the set-up, loose; the product's claim is the next
        # one, against the truth itself.
        assert truth_difference == pytest.approx(3 * 39 * (1 / FAST_TPS - 1 / SLOW_TPS),
                                                 rel=0.06 if busy_slack() else 0.02)
        assert output["estimate"] == pytest.approx(truth_difference, rel=0.03)
        # No tools in these tasks: nothing to call significant.
        assert not task["metrics"]["tool_execution"]["significant"]

    def test_same_settings_are_not_significant(self, recorded):
        (fast_dir, fast_truth), (fast2_dir, fast2_truth) = recorded["fast"], recorded["fast2"]
        result = _cli(str(fast_dir), str(fast2_dir), "--json")
        assert result.returncode == 0, result.stderr
        [task] = json.loads(result.stdout)["tasks"]
        significant = {k: v for k, v in task["metrics"].items() if v["significant"]}
        # On a loaded machine the simulator itself can pace one set slower (its ground
        # truth moves): then the difference is real and compare must say so; the verdict
        # is judged against the truth's own, never against a 5 % coin toss.
        truth = shift(fast_truth, fast2_truth)
        output = task["metrics"]["output_generation"]
        loaded = recorded.others is not None and recorded.others >= QUIET_OTHERS
        # Each stream's last token is read when the client wakes: with others on the cores
        # (two busy loops beside the suite), the two sets' client medians once parted by
        # 5.9 ms while the simulator's own parted by 0.5 ms.
        assert output["estimate"] == pytest.approx(truth.estimate,
                                                   abs=0.010 if loaded else 0.005), (
            output, truth, recorded.others)
        # Another program on the cores while they ran (a test beside this one) slows each
        # recorder's own work as it comes and goes: their client time (``other``: 42.6
        # against 31.8 ms, medians, beside two tests) then differs for real, and so may
        # the wall time around it, and every figure that holds a wake-up of the recorder
        # or the simulator: the time to first token holds the client's building of the
        # request, prefill the simulator's wake-up after its prefill sleep (first token
        # 13.0 against 11.0 ms, medians, beside two busy loops: 1.3 cores of others).
        # Output generation alone is judged there, against the simulator's own record.
        client = {"other", "wall", "first_token", "prefill", "network_overhead"} if loaded \
            else set()
        margin = (truth.high - truth.low) / 5  # a truth near the edge may go either way
        if truth.low < -margin and truth.high > margin:
            assert set(significant) <= client, (significant, truth, recorded.others)
        else:
            assert set(significant) <= {"output_generation", "wall"} | client, (
                significant, truth, recorded.others)

    def test_text_output_names_the_verdict(self, recorded):
        result = _cli(str(recorded["slow"][0]), str(recorded["fast"][0]))
        assert result.returncode == 0, result.stderr
        assert "task fix-bug: 8 runs in A, 8 in B" in result.stdout
        wall = next(line for line in result.stdout.splitlines() if "wall time" in line)
        assert "B faster" in wall

    def test_too_few_runs_warn(self, recorded, tmp_path):
        few = tmp_path / "few"
        _record(few, FAST_TPS, runs=3)
        result = _cli(str(recorded["slow"][0]), str(few / ".agent-latency"), "--json")
        assert result.returncode == 0, result.stderr
        [task] = json.loads(result.stdout)["tasks"]
        assert "too few runs" in task["warning"]
        assert not any(m["significant"] for m in task["metrics"].values())
        # 8 against 3 still has a (wide) 95 % interval; 3 against 3 has none.
        assert mann_whitney_rank(3, 3)[0] == 0
        text = _cli(str(recorded["slow"][0]), str(few / ".agent-latency"))
        assert "WARNING: too few runs to say" in text.stdout


class TestMannWhitneyInterval:
    """The interval's order statistics and coverage match the published tables."""

    def test_table_values(self):
        # Critical U (two-sided 5 %) for n = m = 8 is 13: the interval is d_(14)..d_(51).
        assert mann_whitney_rank(8, 8)[0] == 14
        assert mann_whitney_rank(5, 5)[0] == 3  # critical U = 2
        assert mann_whitney_rank(3, 3) == (0, 0.0)  # no 95 % interval exists
        _k, level = mann_whitney_rank(8, 8)
        assert 0.95 <= level < 0.96

    def test_pure_shift_is_estimated_exactly(self):
        a = [1.0, 1.2, 0.9, 1.1, 1.05, 0.95, 1.15, 1.02]
        s = shift(a, [x + 0.5 for x in a])
        assert s.estimate == pytest.approx(0.5)
        assert s.low <= 0.5 <= s.high and s.low > 0 and s.significant

    def test_a_tiny_shift_is_not_significant(self):
        a = [1.0 + i * 1e-4 for i in range(10)]
        s = shift(a, [x + 0.005 for x in a])  # 0.5 %: below the 2 % floor
        assert s.low > 0 and not s.significant

    def test_names_on_one_side_are_reported(self, tmp_path):
        assert compare_tasks([], []).tasks == []


def test_load_source_reads_a_directory(recorded):
    tasks, problems = load_source(recorded["fast"][0])
    assert problems == [] and len(tasks) == RUNS
