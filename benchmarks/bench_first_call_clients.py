"""Every client's streamed calls against the simulator's truth, a process's first call
included, on a loaded machine: is each client's prefill and output generation the server's?

Each measurement is a fresh child process (its first call is a process's first call, with
the client library's first parse, imports and model building in it) that makes two
streamed calls: ``first`` and ``second``.  Two busy loops (``yes > /dev/null``, twice) run
for the whole benchmark, started and killed by their process ids.  Per call the table prints
our prefill and output generation beside the server's truth, the error (how far ours is
outside the interval in which the server wrote the token), where the first and last tokens'
times came from (``measured``: a kernel stamp; ``estimated``: dated back from the pace;
``read``: a read's own time; ``handed-over``: when the client handed the chunk over, no wire
data) and the client's lag behind the wire.  Goal: each within max(5 ms, 5 %).

Clients: the openai SDK (the baseline: its own layer), groq, mistralai and huggingface_hub's
``InferenceClient`` (recognised on the wire: no SDK layer of ours), google-genai sync and
async (``client.aio``: the path google-adk streams through, aiohttp underneath), google-adk
itself when ``AGENT_LATENCY_FRAMEWORKS_PYTHON`` names a Python that has it, and ollama's
client (NDJSON on ``/api/chat``) when the simulator serves that route, and boto3's
``bedrock-runtime`` (``converse_stream`` and ``invoke_model_with_response_stream``: the AWS
event stream, recognised on the wire).  A client whose
package is missing, or whose route the simulator lacks, is named and skipped.

    python benchmarks/bench_first_call_clients.py [--repeat 5] [--only groq] [--busy 2]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import subprocess
import sys
import time
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_busy_client import OUTPUT_TOKENS, OUTPUT_TPS, PREFILL_TPS, WORDS, _report, _rows

CLIENTS = ["openai", "groq", "mistralai", "huggingface_hub", "google-genai",
           "google-genai-async", "google-adk", "ollama", "bedrock-converse",
           "bedrock-invoke"]
# The Python package each client needs (in the worker's interpreter).
PACKAGES = {"openai": "openai", "groq": "groq", "mistralai": "mistralai",
            "huggingface_hub": "huggingface_hub", "google-genai": "google.genai",
            "google-genai-async": "google.genai", "google-adk": "google.adk",
            "ollama": "ollama", "bedrock-converse": "boto3", "bedrock-invoke": "boto3"}
CALLS = ("first", "second")


# -- the worker: two streamed calls of one client, in a fresh process --------------------------
def _text() -> str:
    return "measure " * WORDS


def _messages() -> list[dict[str, str]]:
    return [{"role": "user", "content": _text()}]


def _drain(stream: Any) -> None:
    for _ in stream:
        pass


def _openai(base: str) -> None:
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-bench", max_retries=0)
    for _ in CALLS:
        _drain(client.chat.completions.create(model="sim", messages=_messages(), stream=True,
                                              max_tokens=OUTPUT_TOKENS))


def _groq(base: str) -> None:
    import groq

    client = groq.Groq(base_url=base, api_key="sk-bench", max_retries=0)
    for _ in CALLS:
        _drain(client.chat.completions.create(model="sim", messages=_messages(), stream=True,
                                              max_tokens=OUTPUT_TOKENS))


def _mistralai(base: str) -> None:
    from mistralai.client import Mistral

    client = Mistral(api_key="sk-bench", server_url=base)
    for _ in CALLS:
        _drain(client.chat.stream(model="sim", messages=_messages(),  # type: ignore[arg-type]
                                  max_tokens=OUTPUT_TOKENS))


def _huggingface_hub(base: str) -> None:
    from huggingface_hub import InferenceClient

    client = InferenceClient(base_url=base + "/v1", api_key="sk-bench")
    for _ in CALLS:
        _drain(client.chat_completion(messages=_messages(), model="sim", stream=True,
                                      max_tokens=OUTPUT_TOKENS))


def _genai_client(base: str) -> Any:
    from google import genai

    return genai.Client(api_key="sk-bench", http_options={"base_url": base})


def _google_genai(base: str) -> None:
    client = _genai_client(base)
    for _ in CALLS:
        _drain(client.models.generate_content_stream(
            model="sim", contents=_text(), config={"max_output_tokens": OUTPUT_TOKENS}))


def _google_genai_async(base: str) -> None:
    async def main() -> None:
        client = _genai_client(base)
        for _ in CALLS:
            stream = await client.aio.models.generate_content_stream(
                model="sim", contents=_text(), config={"max_output_tokens": OUTPUT_TOKENS})
            async for _ in stream:
                pass

    asyncio.run(main())


def _google_adk(base: str) -> None:
    os.environ["GOOGLE_GEMINI_BASE_URL"] = base
    os.environ["GEMINI_API_KEY"] = "sk-bench"
    from google.adk.agents import LlmAgent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    agent = LlmAgent(name="bench", model="gemini-2.5-flash", instruction="Answer.")

    async def main() -> None:
        runner = InMemoryRunner(agent=agent, app_name="bench")
        for _ in CALLS:
            session = await runner.session_service.create_session(app_name="bench",
                                                                  user_id="u")
            message = types.Content(role="user", parts=[types.Part(text=_text())])
            async for _ in runner.run_async(
                    user_id="u", session_id=session.id, new_message=message,
                    run_config=RunConfig(streaming_mode=StreamingMode.SSE)):
                pass

    asyncio.run(main())


def _ollama(base: str) -> None:
    import ollama

    client = ollama.Client(host=base)
    for _ in CALLS:
        _drain(client.chat(model="sim", messages=_messages(), stream=True,
                           options={"num_predict": OUTPUT_TOKENS}))


def _bedrock(base: str) -> Any:
    import boto3

    return boto3.client("bedrock-runtime", endpoint_url=base, region_name="us-east-1",
                        # (the simulator checks no signature)
                        aws_access_key_id="bench", aws_secret_access_key="bench")  # noqa: S106


def _bedrock_converse(base: str) -> None:
    client = _bedrock(base)
    for _ in CALLS:
        _drain(client.converse_stream(
            modelId="sim", messages=[{"role": "user", "content": [{"text": _text()}]}],
            inferenceConfig={"maxTokens": OUTPUT_TOKENS})["stream"])


def _bedrock_invoke(base: str) -> None:
    client = _bedrock(base)
    body = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": OUTPUT_TOKENS,
                       "messages": _messages()})
    for _ in CALLS:
        _drain(client.invoke_model_with_response_stream(modelId="sim", body=body)["body"])


RUN = {"openai": _openai, "groq": _groq, "mistralai": _mistralai,
       "huggingface_hub": _huggingface_hub, "google-genai": _google_genai,
       "google-genai-async": _google_genai_async, "google-adk": _google_adk,
       "ollama": _ollama, "bedrock-converse": _bedrock_converse,
       "bedrock-invoke": _bedrock_invoke}


def worker(client: str, base: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import agent_latency

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    agent_latency.instrument()
    RUN[client](base)
    spans = [dict(s.attributes or {}) for s in sorted(exporter.get_finished_spans(),
                                                      key=lambda s: s.start_time or 0)
             if "agent_latency.llm.prefill" in (s.attributes or {})]
    print(json.dumps({"meta": {}, "spans": spans}))


# -- the parent: the simulator, the busy loops, the table --------------------------------------
def _python_for(client: str) -> str | None:
    """The interpreter that has the client's package, or None."""
    candidates = [sys.executable]
    if client == "google-adk":
        candidates = [p for p in (os.environ.get("AGENT_LATENCY_FRAMEWORKS_PYTHON"),) if p]
    for python in candidates:
        found = subprocess.run([python, "-c", f"import {PACKAGES[client]}"],
                               capture_output=True, check=False)
        if found.returncode == 0:
            return python
    return None


def _served(base: str, path: str) -> bool:
    """Whether the simulator routes ``POST path`` (a 404 says it has no such route)."""
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    try:
        connection.request("POST", path, b"{}", {"content-type": "application/json"})
        return connection.getresponse().status != 404
    except OSError:
        return False
    finally:
        connection.close()


def _busy_loops(count: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="clients whose name starts with this")
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per client")
    parser.add_argument("--busy", type=int, default=2, help="busy loops (yes > /dev/null)")
    parser.add_argument("--worker")
    parser.add_argument("--url")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.url)
        return 0

    from agent_latency.simulator import SimulatorConfig, SimulatorProcess

    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    with SimulatorProcess(SimulatorConfig(port=0, prefill_tps=PREFILL_TPS,
                                          output_tps=OUTPUT_TPS)) as sim:
        clients = []
        for client in CLIENTS:
            if not client.startswith(args.only):
                continue
            python = _python_for(client)
            if python is None:
                skipped.append(f"{client}: {PACKAGES[client]} is not installed"
                               + (" (set AGENT_LATENCY_FRAMEWORKS_PYTHON)"
                                  if client == "google-adk" else ""))
            elif client == "ollama" and not _served(sim.base_url, "/api/chat"):
                skipped.append("ollama: the simulator has no /api/chat route")
            else:
                clients.append((client, python))
        busy = _busy_loops(args.busy)
        try:
            for _ in range(args.repeat):
                for client, python in clients:
                    rows += _measure(sim, client, python, env)
        finally:
            for loop in busy:
                loop.kill()
                loop.wait()
    for line in skipped:
        print(f"skipped {line}")
    print(f"{args.busy} busy loops (yes > /dev/null) ran throughout; "
          f"{args.repeat} fresh processes per client, two streamed calls each\n")
    return _report(rows)


def _measure(sim: Any, client: str, python: str, env: dict[str, str]
             ) -> list[dict[str, Any]]:
    before = {r["request_id"] for r in sim.truth}
    out = subprocess.run([python, __file__, "--worker", client, "--url", sim.base_url],
                         capture_output=True, text=True, timeout=600, env=env, check=False)
    if out.returncode != 0:
        print(f"{client}: worker failed\n{out.stderr[-2000:]}")
        return []
    result = json.loads(out.stdout.strip().splitlines()[-1])
    deadline = time.monotonic() + 5.0
    while True:  # the server writes each record just after its response
        truths = [t for t in sim.truth
                  if t["request_id"] not in before and t.get("last_token_at_mono")]
        if len(truths) >= len(result["spans"]) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    rows = []
    for label, span in zip(CALLS, result["spans"], strict=False):
        rows += _rows(f"{client}:{label}", {"meta": {}, "spans": [span]}, truths)
    return rows


if __name__ == "__main__":
    sys.exit(main())
