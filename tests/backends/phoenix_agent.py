"""An agent run against real Phoenix: ``register()`` first, then ``instrument()``.

Run by tests/backends/test_phoenix.py inside the network namespace where Phoenix listens
(its gRPC port binds every interface).  Prints, as JSON, the spans Phoenix's REST API gives
back for the project.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request

import openai
from phoenix.otel import register

import agent_latency
from agent_latency.simulator import Simulator

protocol, endpoint, project, api = sys.argv[1:5]
provider = register(endpoint=endpoint, protocol=protocol, project_name=project, batch=True,
                    verbose=False)
agent_latency.instrument()
with Simulator(prefill_tps=4000.0, output_tps=400.0) as sim:
    client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
    with agent_latency.task("phoenix-task"):
        stream = client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": "hello " * 50}],
            stream=True, max_tokens=20)
        for _ in stream:
            pass
        with agent_latency.tool("pytest"):
            time.sleep(0.05)
provider.force_flush()

deadline = time.monotonic() + 60
spans: list = []
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(f"{api}/v1/projects/{project}/spans?limit=100",
                                    timeout=5) as response:
            spans = json.load(response).get("data", [])
    except OSError:
        spans = []
    if any(s.get("name") == "invoke_agent phoenix-task" for s in spans):
        break
    time.sleep(0.5)
print(json.dumps(spans))
