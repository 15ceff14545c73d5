"""Is the what-if right?  Record an agent on the simulator at one speed, project it to
another, run it again at that speed, and compare.

Not a test: prints a table.  Run: ``python benchmarks/bench_whatif.py``.  Each case runs an
agent (real openai SDK, real shell commands) against the simulator in a child process, reads
the recorded task with the offline report, and projects it with ``budget.project``:

* ``demo``: ``examples/demo_agent.py`` and its coding script (sequential, ``ls`` and
  ``python -c``);
* ``sequential``: one tool call per turn (``sleep``s of known length), four turns;
* ``parallel``: turns with two or three tool calls run at once in threads (the recorded
  overlap must be kept, not double-saved).

Goal: projected wall within 3 % of the measured one for every task; the last column says
``ok`` or ``over``.  Both sides are the median of three runs (``BENCH_WHATIF_REPEAT``): the
recording projected is the median-wall one of three at the old rates, the measured wall the
median of three at the new rates, and how far apart those were is printed beside it: that
spread is the machine's noise, not the projection's.  Arguments name the agents to run
(default all).
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


# An agent that runs each turn's tool calls at once, one thread each (the context copied
# into each thread, so every tool span is a child of the task).
THREADED_AGENT = """
import contextvars, json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
import agent_latency
agent_latency.instrument()
import openai
TOOLS = [{"type": "function", "function": {"name": "run_shell", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]
client = openai.OpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="simulator")
def run(command):
    with agent_latency.tool("run_shell"):
        return subprocess.run(command, shell=True, capture_output=True, text=True).stdout
messages = [{"role": "user", "content": "Fix the failing test, please."}]
with agent_latency.task("demo"), ThreadPoolExecutor(4) as pool:
    for turn in range(8):
        calls, text = {}, []
        for chunk in client.chat.completions.create(
                model="sim-coder", messages=messages, tools=TOOLS, stream=True,
                stream_options={"include_usage": True}):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            text.append(delta.content or "")
            for c in delta.tool_calls or ():
                slot = calls.setdefault(c.index, {"id": "", "arguments": ""})
                slot["id"] = c.id or slot["id"]
                slot["arguments"] += (c.function and c.function.arguments) or ""
        calls = [calls[i] for i in sorted(calls)]
        messages.append({"role": "assistant", "content": "".join(text) or None,
                         **({"tool_calls": [{"id": c["id"], "type": "function", "function": {
                             "name": "run_shell", "arguments": c["arguments"]}}
                             for c in calls]} if calls else {})})
        if not calls:
            break
        commands = [json.loads(c["arguments"])["command"] for c in calls]
        outputs = list(pool.map(lambda cmd: contextvars.copy_context().run(run, cmd),
                                commands))
        for c, out in zip(calls, outputs):
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
client.close()
"""


def _shell(*commands: str) -> list[dict]:
    return [{"name": "run_shell", "arguments": {"command": c}} for c in commands]


SCRIPTS = {
    "sequential": {"models": {"*": [
        {"content": "Let me run the tests.", "tool_calls": _shell("sleep 0.4"),
         "output_tokens": 150},
        {"tool_calls": _shell("sleep 0.5"), "output_tokens": 120},
        {"tool_calls": _shell("sleep 0.3"), "output_tokens": 100},
        {"content": "Fixed: the test passes now.", "output_tokens": 250},
    ]}},
    "parallel": {"models": {"*": [
        {"content": "Looking at three things at once.",
         "tool_calls": _shell("sleep 0.4", "sleep 0.6", "python3 -c 'print(1)'"),
         "output_tokens": 150},
        {"tool_calls": _shell("sleep 0.5", "sleep 0.3"), "output_tokens": 120},
        {"content": "Fixed: the test passes now.", "output_tokens": 250},
    ]}},
}


def record(prefill_tps: float, output_tps: float, directory: Path, agent: str = "demo"):
    """Run an agent once; return its task (intervals, start, end, wall)."""
    config = SimulatorConfig(port=0, prefill_tps=prefill_tps, output_tps=output_tps,
                             script=_script() if agent == "demo" else SCRIPTS[agent])
    traces = directory / "traces.jsonl"
    traces.unlink(missing_ok=True)
    with SimulatorProcess(config) as sim:
        env = {**os.environ, "OPENAI_BASE_URL": sim.base_url + "/v1",
               "OPENAI_API_KEY": "simulator", "AGENT_LATENCY_DIR": str(directory),
               "AGENT_LATENCY_SUMMARY": "false", "AGENT_LATENCY_PROCESS_TASK": "false"}
        program = ([str(EXAMPLES / "demo_agent.py")] if agent == "demo"
                   else ["-c", THREADED_AGENT])
        subprocess.run([sys.executable, *program], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    tasks, problems = load_tasks(str(traces), "demo")
    if problems or len(tasks) != 1:
        raise SystemExit(f"unexpected trace: {problems or [t.name for t in tasks]}")
    return tasks[0]


_MODEL = ("prefill", "output_generation")


REPEAT = int(os.environ.get("BENCH_WHATIF_REPEAT", "3"))


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
    agents = [a for a in ("demo", "sequential", "parallel")
              if len(sys.argv) < 2 or a in sys.argv[1:]]
    print(f"{'agent':<11} {'case':<28} {'recorded s':>10} {'projected s':>12} "
          f"{'measured s':>11} {'error ms':>9} {'error %':>8} {'model s proj/meas':>18} "
          f"{'model err %':>11}  3 %")
    errors, model_errors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        for agent, (label, before, after, scenario) in (
                (a, c) for a in agents for c in cases):
            # Recorded side too: the median of REPEAT runs (one slow tool start would otherwise
            # be projected as if it were the agent's).
            recorded = sorted((record(*before, directory, agent) for _ in range(REPEAT)),
                              key=lambda t: t.budget.wall)[REPEAT // 2]
            projection = project(recorded.intervals, recorded.span.start_ns,
                                 recorded.span.end_ns, scenario)
            # The measured side is the median of REPEAT runs: one run of a task that spawns
            # processes on a busy 2-core machine moves by tens of milliseconds.
            runs = sorted((record(*after, directory, agent) for _ in range(REPEAT)),
                          key=lambda t: t.budget.wall)
            after_task = runs[len(runs) // 2]
            measured = after_task.budget.wall
            spread = runs[-1].budget.wall - runs[0].budget.wall
            err = projection.projected_wall - measured
            errors.append(abs(err) / measured)
            # The model's own time (prefill + output generation), projected vs measured: the
            # part the scenario changes, free of tool-run noise.
            model_proj = sum(e - s for iv, s, e in projection.schedule if iv.phase in _MODEL)
            model_meas = sum(after_task.budget.busy[c] for c in _MODEL)
            model_err = (model_proj / 1e9 - model_meas) / model_meas
            model_errors.append(abs(model_err))
            print(f"{agent:<11} {label:<28} {projection.recorded_wall:>10.3f} "
                  f"{projection.projected_wall:>12.3f} {measured:>11.3f} "
                  f"{err * 1e3:>+9.1f} {100 * err / measured:>+7.1f}% "
                  f"{model_proj / 1e9:>8.3f}/{model_meas:<9.3f} {100 * model_err:>+10.1f}%"
                  f"  {'ok' if abs(err) <= 0.03 * measured else 'over'}"
                  f"  (runs {1e3 * spread:.0f} ms apart)", flush=True)
        base = [record(4000, 300, directory).budget.wall for _ in range(3)]
    print(f"\nmax |error|: wall {100 * max(errors):.1f} %, model time "
          f"{100 * max(model_errors):.1f} %")
    print(f"noise: the same run three times took {min(base):.3f}-{max(base):.3f} s "
          f"({1e3 * (max(base) - min(base)):.0f} ms apart: tool runs and agent work vary)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
