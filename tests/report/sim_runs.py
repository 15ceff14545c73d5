"""Runs of scripted tasks against the simulator, recorded in the local trace file.

``python sim_runs.py OUTPUT_TPS RUNS`` (in the directory to record in): starts a
simulator in this process at ``OUTPUT_TPS``, instruments, runs the task ``fix-bug`` RUNS
times — three streamed LLM calls of 40 output tokens (with a 30 ms tool between them when
a third argument ``tools`` is given) — and prints, as JSON, the simulator's ground truth
per run: the summed output-generation time.

With ``--stepped`` it prints ``ready`` once set up, then waits for a line on stdin before
each run and prints ``ran`` after it: a test steps several recorders in turn, so that the
machine's load, which drifts, falls on every set of runs alike.
"""

from __future__ import annotations

import json
import sys
import time

import openai

import agent_latency
from agent_latency.simulator import Simulator, SimulatorConfig

output_tps, runs = float(sys.argv[1]), int(sys.argv[2])
tools = "tools" in sys.argv[3:]
stepped = "--stepped" in sys.argv[3:]
agent_latency.instrument()
truth_per_run = []
config = SimulatorConfig(prefill_tps=20000.0, output_tps=output_tps, default_output_tokens=40)
with Simulator(config) as sim:
    client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
    if stepped:
        print("ready", flush=True)
    for run in range(runs):
        if stepped:
            sys.stdin.readline()
        before = len(sim.truth)
        with agent_latency.task("fix-bug"):
            for step in range(3):
                stream = client.chat.completions.create(
                    model="sim-model", stream=True, max_tokens=40,
                    messages=[{"role": "user", "content": f"step {step} " * 40}])
                for _ in stream:
                    pass
                if tools and step < 2:
                    with agent_latency.tool("pytest"):
                        time.sleep(0.03)
        deadline = time.monotonic() + 3
        while len(sim.truth) < before + 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        truth_per_run.append(sum(t["output_generation_s"] for t in sim.truth[before:]))
        if stepped:
            print("ran", flush=True)
print(json.dumps(truth_per_run))
