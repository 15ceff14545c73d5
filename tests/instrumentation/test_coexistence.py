"""Other GenAI instrumentations active at the same time: nothing breaks, nothing counted twice.

The official ``opentelemetry-instrumentation-openai-v2`` unwraps cleanly, so it is switched
on and off around each test.  OpenLLMetry's ``uninstrument()`` leaves its wrappers in place
(with the tracer of the provider current when it was instrumented), so the test with all
three libraries runs in a child process of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import openai
import pytest
from llm_helpers import assert_phases_add_up, one_llm_span

import agent_latency
from agent_latency import semconv

MESSAGES = [{"role": "user", "content": "hello " * 50}]


@pytest.fixture
def official(otel):
    v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
    instrumentor = v2.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=otel.provider)
    yield instrumentor
    instrumentor.uninstrument()


@pytest.mark.parametrize("stream", [True, False])
def test_official_counted_once(otel, sim, official, stream):
    client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
    with agent_latency.task("t"):
        result = client.chat.completions.create(
            model="m", messages=MESSAGES, max_tokens=8, stream=stream,
            **({"stream_options": {"include_usage": True}} if stream else {}))
        if stream:
            assert list(result)
        else:
            assert result.choices[0].message.content
    client.close()
    span = one_llm_span(otel)
    assert_phases_add_up(span)
    if stream:
        assert span.attributes[semconv.LLM_TTFT] > 0
    theirs = [s for s in otel.spans() if s.name == "chat m" and s is not span]
    assert len(theirs) == 1, [s.name for s in otel.spans()]
    task = otel.span("invoke_agent t")
    assert task.attributes[semconv.budget_count("llm_calls")] == 1
    wall = task.attributes[semconv.BUDGET_WALL]
    assert sum(task.attributes[semconv.budget_share(c)] for c in semconv.COMPONENTS) == \
        pytest.approx(wall, abs=1e-6)


_ALL_THREE = textwrap.dedent('''
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import openai, agent_latency
    from agent_latency import BudgetSpanProcessor, semconv
    from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
    from agent_latency.simulator import Simulator, SimulatorConfig

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BudgetSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument()
    loaded = []
    for module, cls in (("opentelemetry.instrumentation.openai_v2", "OpenAIInstrumentor"),
                        ("opentelemetry.instrumentation.openai", "OpenAIInstrumentor"),
                        ("openinference.instrumentation.openai", "OpenAIInstrumentor")):
        try:
            mod = __import__(module, fromlist=[cls])
        except ImportError:
            continue
        getattr(mod, cls)().instrument(tracer_provider=provider, skip_dep_check=True)
        loaded.append(module)
    out = {"loaded": loaded, "calls": []}
    with Simulator(SimulatorConfig(prefill_tps=20000, output_tps=1000)) as sim:
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
        for stream in (True, False):
            exporter.clear()
            with agent_latency.task("t"):
                r = client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi " * 50}],
                    max_tokens=8, stream=stream)
                if stream:
                    n = len([c for c in r])
            spans = exporter.get_finished_spans()
            ours = [s for s in spans if semconv.LLM_CLIENT in s.attributes]
            task = [s for s in spans if s.name == "invoke_agent t"][0]
            phases = sum(ours[0].attributes[a] for a, _, _ in semconv.LLM_PHASES)
            out["calls"].append({
                "stream": stream, "ours": len(ours), "names": [s.name for s in spans],
                "llm_calls": task.attributes[semconv.budget_count("llm_calls")],
                "phase_error": phases - (ours[0].end_time - ours[0].start_time) / 1e9,
                "ttft": ours[0].attributes.get(semconv.LLM_TTFT)})
    print(json.dumps(out))
''')


def test_all_three_at_once():
    for module in ("opentelemetry.instrumentation.openai", "openinference.instrumentation.openai"):
        pytest.importorskip(module)
    env = {**os.environ, "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
    proc = subprocess.run([sys.executable, "-c", _ALL_THREE], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["loaded"]) == 3, out
    for call in out["calls"]:
        assert call["ours"] == 1, call
        assert call["llm_calls"] == 1, call
        assert abs(call["phase_error"]) < 2e-6, call
        assert len(call["names"]) >= 4, call  # theirs are there too
    assert out["calls"][0]["ttft"] > 0
