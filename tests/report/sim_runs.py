"""Runs of scripted tasks against the simulator, recorded in the local trace file.

``python sim_runs.py OUTPUT_TPS RUNS`` (in the directory to record in): starts a
simulator in this process at ``OUTPUT_TPS``, instruments, runs the task ``fix-bug`` RUNS
times — three streamed LLM calls of 40 output tokens and a 30 ms tool between them — and
prints, as JSON, the simulator's ground truth per run: the summed output-generation time.
"""

from __future__ import annotations

import json
import sys
import time

import openai

import agent_latency
from agent_latency.simulator import Simulator, SimulatorConfig

output_tps, runs = float(sys.argv[1]), int(sys.argv[2])
agent_latency.instrument()
truth_per_run = []
config = SimulatorConfig(prefill_tps=20000.0, output_tps=output_tps, default_output_tokens=40)
with Simulator(config) as sim:
    client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
    for run in range(runs):
        before = len(sim.truth)
        with agent_latency.task("fix-bug"):
            for step in range(3):
                stream = client.chat.completions.create(
                    model="sim-model", stream=True, max_tokens=40,
                    messages=[{"role": "user", "content": f"step {step} " * 40}])
                for _ in stream:
                    pass
                if step < 2:
                    with agent_latency.tool("pytest"):
                        time.sleep(0.03)
        deadline = time.monotonic() + 3
        while len(sim.truth) < before + 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        truth_per_run.append(sum(t["output_generation_s"] for t in sim.truth[before:]))
print(json.dumps(truth_per_run))
