"""Requests recognised on the wire (clients no SDK layer of ours knows: groq, huggingface_hub,
boto3's bedrock-runtime over the AWS event stream) get their first token dated from the
kernel's receive stamps, as the openai SDK's does: a process's first streamed call stays the
server's prefill while the client is busy with its first chunk when the first token lands.

Each call runs in a fresh process (its first call is a process's first call); the program
burns CPU on the first chunk handed over (the opening role-only chunk, or Bedrock's opening
event, sent before the prefill), so the first token arrives while it is busy,
deterministically.  Before arrival times on this path the first token was dated when read
(``handed-over``): the burn was booked as prefill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from machine_load import busy_slack
from truth_log import close_to, server_prefill, truth_of

from agent_latency import semconv
from agent_latency.simulator import SimulatorConfig, SimulatorProcess

# quiet: a first call's prefill read from the kernel's stamps while the client is busy;
# other tests on the cores would add their wake-ups (make test runs it alone).
pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"),
                                 reason="arrival times come from Linux's receive stamps"),
              pytest.mark.quiet]

# ~2,000 input tokens at 25,000/s: ~80 ms of prefill, inside the first chunk's 250 ms burn.
PREFILL_TPS = 25000.0
BURN = 0.25

FIRST_CALL = """
import json, sys, time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
import agent_latency
agent_latency.instrument()
base, client, burn = sys.argv[1], sys.argv[2], float(sys.argv[3])
messages = [{"role": "user", "content": "measure " * 1000}]
if client == "groq":
    import groq
    sdk = groq.Groq(base_url=base, api_key="k", max_retries=0)
    stream = sdk.chat.completions.create(model="sim", messages=messages, stream=True,
                                         max_tokens=20)
elif client == "huggingface_hub":
    from huggingface_hub import InferenceClient
    sdk = InferenceClient(base_url=base + "/v1", api_key="k")
    stream = sdk.chat_completion(messages=messages, model="sim", stream=True, max_tokens=20)
else:  # boto3's bedrock-runtime: the AWS event stream (its opening event before the prefill)
    import boto3
    sdk = boto3.client("bedrock-runtime", endpoint_url=base, region_name="us-east-1",
                       aws_access_key_id="k", aws_secret_access_key="k")
    if client == "converse_stream":
        stream = sdk.converse_stream(
            modelId="sim", messages=[{"role": "user", "content": [{"text": "measure " * 1000}]}],
            inferenceConfig={"maxTokens": 20})["stream"]
    else:
        stream = sdk.invoke_model_with_response_stream(modelId="sim", body=json.dumps(
            {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 20,
             "messages": messages}))["body"]
for i, _ in enumerate(stream):
    if i == 0:  # the first chunk's parse, made slow
        end = time.perf_counter() + burn
        while time.perf_counter() < end:
            pass
[span] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
print(json.dumps(dict(span.attributes)))
"""


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorProcess]:
    with SimulatorProcess(SimulatorConfig(port=0, prefill_tps=PREFILL_TPS,
                                          output_tps=100.0)) as server:
        yield server


def first_call(sim: SimulatorProcess, client: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", FIRST_CALL, sim.base_url, client, str(BURN)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OTEL_SDK_DISABLED": "false"})
    assert out.returncode == 0, out.stderr
    attributes: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return attributes


class TestFirstCallOnTheWire:
    """A wire-recognised stream's first token is its bytes' arrival, not its hand-over."""

    @pytest.mark.parametrize("client", ["groq", "huggingface_hub"])
    def test_first_token_dated_from_the_kernel(self, sim: SimulatorProcess,
                                               client: str) -> None:
        pytest.importorskip(client)
        _dated_from_the_kernel(sim, client)


def _dated_from_the_kernel(sim: SimulatorProcess, client: str) -> None:
    """The first call's first token: a kernel stamp (or dated back from one), its prefill
    the server's, the first chunk's burn booked as the client's lag."""
    a = first_call(sim, client)
    truth = truth_of(sim, a[semconv.LLM_SERVER_REQUEST_ID])
    window = server_prefill(truth)
    prefill = window[1]
    # (the burn starts as the opening chunk is handed over, before the prefill's end)
    assert prefill < BURN - 0.05, "the first token must land inside the first chunk's burn"
    assert a[semconv.LLM_FIRST_TOKEN_SOURCE] in (semconv.ARRIVAL_MEASURED,
                                                 semconv.ARRIVAL_ESTIMATED), a
    # The burn is the client's: lag behind the wire, not prefill.
    # (the attributes that say how the first token was dated, whole: pytest cuts a dict short)
    dated = {k: v for k, v in a.items() if "arrival" in k or "lag" in k or "bound" in k
             or k.endswith(("prefill", "ttft", "client", "source"))}
    assert close_to(a[semconv.LLM_PREFILL], window), (a[semconv.LLM_PREFILL], window, dated)
    assert a[semconv.LLM_CLIENT_LAG] >= BURN - prefill - 0.05 - busy_slack(), a


class TestBedrockOnTheWire:
    """A Bedrock stream's first token (the AWS event stream's binary messages, split by their
    length prefix) is its bytes' arrival, not its hand-over."""

    @pytest.mark.parametrize("client", ["converse_stream", "invoke_model_with_response_stream"])
    def test_first_token_dated_from_the_kernel(self, sim: SimulatorProcess,
                                               client: str) -> None:
        pytest.importorskip("boto3")
        _dated_from_the_kernel(sim, client)
