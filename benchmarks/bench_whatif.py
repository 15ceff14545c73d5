"""Is the what-if right?  Record the demo agent on the simulator at one speed, project it to
another, run it again at that speed, and compare.

Not a test: prints a table.  Run: ``python benchmarks/bench_whatif.py``.  Each case runs
``examples/demo_agent.py`` (real openai SDK, real shell commands) against the simulator in a
child process, reads the recorded task with the offline report, and projects it with
``budget.project``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from agent_latency.budget import Scenario, project
from agent_latency.report import load_tasks
from agent_latency.simulator import SimulatorConfig, SimulatorProcess

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _script() -> dict:
    """The demo's script without its per-turn rate overrides, so every turn runs at the rates
    under test."""
    script = json.loads((EXAMPLES / "scripts" / "coding_agent.json").read_text())
    for turns in script["models"].values():
        for turn in turns:
            for key in ("prefill_tps", "output_tps"):
                turn.pop(key, None)
    return script


def record(prefill_tps: float, output_tps: float, directory: Path):
    """Run the demo agent once; return its task (intervals, start, end, wall)."""
    config = SimulatorConfig(port=0, prefill_tps=prefill_tps, output_tps=output_tps,
                             script=_script())
    traces = directory / "traces.jsonl"
    traces.unlink(missing_ok=True)
    with SimulatorProcess(config) as sim:
        env = {**os.environ, "OPENAI_BASE_URL": sim.base_url + "/v1",
               "OPENAI_API_KEY": "simulator", "AGENT_LATENCY_DIR": str(directory),
               "AGENT_LATENCY_SUMMARY": "false"}
        subprocess.run([sys.executable, str(EXAMPLES / "demo_agent.py")], env=env,
                       check=True, stdout=subprocess.DEVNULL)
    tasks, problems = load_tasks(str(traces), "demo")
    if problems or len(tasks) != 1:
        raise SystemExit(f"unexpected trace: {problems or [t.name for t in tasks]}")
    return tasks[0]


_MODEL = ("prefill", "output_generation")


def main() -> int:
    cases = [
        ("output 100 -> 400 tok/s", (4000, 100), (4000, 400),
         Scenario(output_tps=400)),
        ("output 400 -> 100 tok/s", (4000, 400), (4000, 100),
         Scenario(output_tps=100)),
        ("prefill 1000 -> 8000 tok/s", (1000, 300), (8000, 300),
         Scenario(prefill_tps=8000)),
        ("output x3, prefill x2", (2000, 100), (4000, 300),
         Scenario(output_speedup=3, prefill_speedup=2)),
    ]
    print(f"{'case':<28} {'recorded s':>10} {'projected s':>12} {'measured s':>11} "
          f"{'error ms':>9} {'error %':>8} {'model s proj/meas':>18} {'model err %':>11}")
    errors, model_errors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for label, before, after, scenario in cases:
            recorded = record(*before, directory)
            projection = project(recorded.intervals, recorded.span.start_ns,
                                 recorded.span.end_ns, scenario)
            after_task = record(*after, directory)
            measured = after_task.budget.wall
            err = projection.projected_wall - measured
            errors.append(abs(err) / measured)
            # The model's own time (prefill + output generation), projected vs measured: the
            # part the scenario changes, free of tool-run noise.
            model_proj = sum(e - s for iv, s, e in projection.schedule if iv.phase in _MODEL)
            model_meas = sum(after_task.budget.busy[c] for c in _MODEL)
            model_err = (model_proj / 1e9 - model_meas) / model_meas
            model_errors.append(abs(model_err))
            print(f"{label:<28} {projection.recorded_wall:>10.3f} "
                  f"{projection.projected_wall:>12.3f} {measured:>11.3f} "
                  f"{err * 1e3:>+9.1f} {100 * err / measured:>+7.1f}% "
                  f"{model_proj / 1e9:>8.3f}/{model_meas:<9.3f} {100 * model_err:>+10.1f}%")
        base = [record(4000, 300, directory).budget.wall for _ in range(3)]
    print(f"\nmax |error|: wall {100 * max(errors):.1f} %, model time "
          f"{100 * max(model_errors):.1f} %")
    print(f"noise: the same run three times took {min(base):.3f}-{max(base):.3f} s "
          f"({1e3 * (max(base) - min(base)):.0f} ms apart: tool runs and agent work vary)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
