"""A small instrumented coding agent for the Prometheus tests: streamed LLM calls and tools
in a loop, its metrics sent where the ``OTEL_*`` variables say, until told to stop.

    OTEL_METRICS_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:PORT \
    python prom_agent.py BASE_URL CONTROL_FILE

The exporter is the one ``instrument()`` builds from those variables, as a deployment would
run it (``OTEL_METRICS_EXPORTER=prometheus`` gives the agent's own pull endpoint instead).

CONTROL_FILE holds the simulator's prefill tokens/s for the next call (sent as the
per-request ``simulator`` override), or ``stop``.  Every tenth call asks the simulator for a
server error, so the error-ratio queries have errors to count.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import openai

import agent_latency

PROMPT = "Fix the failing test in tests/test_parser.py. " * 45  # ~500 input tokens
MODELS = ("sim-large", "sim-small")


def main() -> int:
    base_url, control = sys.argv[1], Path(sys.argv[2])
    agent_latency.instrument()
    calls = 0
    while True:
        setting = control.read_text().strip()
        if setting == "stop":
            return 0
        override: dict[str, object] = {"prefill_tps": float(setting), "output_tokens": 24}
        if calls % 10 == 0:  # the first call too: both paths have errors from the start
            override["fault"] = "server_error"
        with agent_latency.task("fix-tests"):
            # A client per task, as many agents do: one new connection per task.
            with openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test",
                               max_retries=0) as client:
                try:
                    stream = client.chat.completions.create(
                        model=MODELS[calls % len(MODELS)],
                        messages=[{"role": "user", "content": PROMPT}], stream=True,
                        stream_options={"include_usage": True},
                        extra_body={"simulator": override})
                    for _ in stream:
                        pass
                except openai.APIError:
                    pass
            with agent_latency.tool("run_tests"):
                time.sleep(0.03)
            with agent_latency.tool("read_file"):
                time.sleep(0.005)
        calls += 1


if __name__ == "__main__":
    raise SystemExit(main())
