"""A program for the HTML page test: two tasks, one nested, with LLM calls against an
in-process simulator, a tool that runs a nested tool, and two tools in parallel."""

import time
from concurrent.futures import ThreadPoolExecutor

import openai
from opentelemetry import context

import agent_latency
from agent_latency.simulator import Simulator, SimulatorConfig

agent_latency.instrument()
config = SimulatorConfig(prefill_tps=4000.0, output_tps=600.0, default_output_tokens=30)
with Simulator(config) as sim:
    client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)

    def ask(text: str) -> None:
        for _ in client.chat.completions.create(
                model="sim-model", stream=True,
                messages=[{"role": "user", "content": text * 60}]):
            pass

    for run in range(2):
        with agent_latency.task("fix-bug"):
            ask("plan ")
            with agent_latency.tool("run_shell"):
                time.sleep(0.02)
                with agent_latency.tool("pytest"):  # nested: its own row, same call
                    time.sleep(0.03)
            with agent_latency.task("review"):
                ask("review ")
                ctx = context.get_current()

                def grep(seconds: float) -> None:
                    token = context.attach(ctx)
                    try:
                        with agent_latency.tool("grep"):
                            time.sleep(seconds)
                    finally:
                        context.detach(token)

                with ThreadPoolExecutor(2) as pool:
                    list(pool.map(grep, [0.02, 0.03]))
            ask("done ")
