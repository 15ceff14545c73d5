"""An instrumented coding agent for the Collector and Jaeger tests: the tasks a plan lists,
run concurrently, each a streamed LLM call on the simulator and then a tool that takes the
rest of the task's time; a task marked ``fail`` raises at its end (its span: ERROR).

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:PORT OTEL_TRACES_EXPORTER=otlp,jsonl \\
    python otlp_agent.py BASE_URL PLAN OUT

PLAN is JSON: ``{"workers": N, "tasks": [{"kind": "slow", "seconds": 4.0, "fail": false},
…]}``.  OUT gets one JSON line per task: its kind, trace id and task span id (hex).  The
exporters are the ones ``instrument()`` builds from the ``OTEL_*`` variables, as a
deployment would run them; everything is flushed at exit.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
from opentelemetry import trace

import agent_latency

PROMPT = "Fix the failing test in tests/test_parser.py. " * 45  # ~500 input tokens


class TaskFailed(RuntimeError):
    """What a task marked ``fail`` raises."""


def run_task(base_url: str, spec: dict[str, Any], out: Any, lock: threading.Lock) -> None:
    started = time.monotonic()
    try:
        with agent_latency.task(spec["kind"]):
            context = trace.get_current_span().get_span_context()
            with lock:
                out.write(json.dumps({"kind": spec["kind"],
                                      "trace_id": f"{context.trace_id:032x}",
                                      "span_id": f"{context.span_id:016x}"}) + "\n")
            with openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test",
                               max_retries=0) as client:
                for _ in client.chat.completions.create(
                        model="sim-large", messages=[{"role": "user", "content": PROMPT}],
                        stream=True, stream_options={"include_usage": True},
                        extra_body={"simulator": {"output_tokens": 16}}):
                    pass
            with agent_latency.tool("run_tests"):
                time.sleep(max(0.0, spec["seconds"] - (time.monotonic() - started)))
            if spec.get("fail"):
                raise TaskFailed(f"{spec['kind']} task failed on purpose")
    except TaskFailed:
        pass


def main() -> int:
    base_url, plan_path, out_path = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    plan = json.loads(plan_path.read_text())
    agent_latency.instrument()
    lock = threading.Lock()
    with open(out_path, "w") as out, ThreadPoolExecutor(plan["workers"]) as pool:
        for future in [pool.submit(run_task, base_url, spec, out, lock)
                       for spec in plan["tasks"]]:
            future.result()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
