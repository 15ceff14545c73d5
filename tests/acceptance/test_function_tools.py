"""Agent frameworks' function tools, unmodified, against the simulator: a 0.2 s pure-Python
tool (``lookup``) is tool time within 10 ms, counted once, whoever made its span — ours
(pydantic-ai, the OpenAI Agents SDK, Agno, Haystack, LlamaIndex, CrewAI) or the framework's
own GenAI ``execute_tool`` span (google-adk, AutoGen, Strands, Semantic Kernel) — and each
request the server served is one LLM call.

pydantic-ai, the Agents SDK, Agno and Haystack run in ``.venv``.  google-adk, AutoGen, Strands,
LlamaIndex's OpenAI client, CrewAI and Semantic Kernel pin OpenTelemetry, protobuf, pydantic,
google-genai, mcp or openai below this project's test line, so they live in a virtual
environment of their own (``make .venv-frameworks/.test-installed``), named by
``AGENT_LATENCY_FRAMEWORKS_PYTHON``; this test starts its interpreter.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
from agent_harness import MODES, Agent, check_agent_run, run_agent

REPO = Path(__file__).resolve().parents[2]
FRAMEWORKS_PYTHON = REPO / os.environ.get("AGENT_LATENCY_FRAMEWORKS_PYTHON",
                                          ".venv-frameworks/bin/python")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="exec-based runner")]

SCRIPT = "lookup_agent.json"
LOOKUP = {"files": {}, "stdout": "answer is 42", "other_tools": ("lookup",),
          "min_tool_time": 0.2, "function_tool_time": 0.2}
ANTHROPIC = {"env": {"ANTHROPIC_BASE_URL": "{server}", "ANTHROPIC_API_KEY": "sk-ant-sim"}}

# In this project's own environment.
AGENTS = [
    # Responses API (non-streaming) through the openai SDK; tool spans are ours.
    Agent("openai-agents", ("{python}", "{agents}/openai_agents_lookup.py"), SCRIPT, (),
          modules=("agents",), framework_task="lookup-agent", **LOOKUP),
    # AnthropicModel: each non-streamed request is refused by the anthropic SDK (max_tokens
    # 64000 without streaming) and sent again as a stream; tool spans are ours.
    Agent("pydantic-ai-anthropic", ("{python}", "{agents}/pydantic_ai_lookup.py", "anthropic"),
          SCRIPT, (), modules=("pydantic_ai", "anthropic"), **ANTHROPIC, **LOOKUP),
    Agent("pydantic-ai-anthropic-stream",
          ("{python}", "{agents}/pydantic_ai_lookup.py", "anthropic", "--stream"), SCRIPT, (),
          modules=("pydantic_ai", "anthropic"), **ANTHROPIC, **LOOKUP),
    # OpenAIChatModel: chat completions through the openai SDK.
    Agent("pydantic-ai-openai", ("{python}", "{agents}/pydantic_ai_lookup.py", "openai"),
          SCRIPT, (), modules=("pydantic_ai", "openai"), **LOOKUP),
    # OpenAIChat: chat completions through the openai SDK, plain and streamed; tool spans
    # are ours.
    Agent("agno", ("{python}", "{agents}/agno_lookup.py"), SCRIPT, (), modules=("agno",),
          **LOOKUP),
    Agent("agno-stream", ("{python}", "{agents}/agno_lookup.py", "--stream"), SCRIPT, (),
          modules=("agno",), **LOOKUP),
    # Agent with OpenAIChatGenerator: chat completions through the openai SDK; tool spans are
    # ours.  Its usage telemetry would call out.
    Agent("haystack", ("{python}", "{agents}/haystack_lookup.py"), SCRIPT, (),
          modules=("haystack",), env={"HAYSTACK_TELEMETRY_ENABLED": "False"}, **LOOKUP),
    # dspy.LM on its default engine: the HTTP client DSPy bundles, on plain sockets (sync)
    # or asyncio streams (acall), not litellm; its calls are seen on the wire only.  Tool
    # spans are ours.
    Agent("dspy", ("{python}", "{agents}/dspy_lookup.py"), "dspy_lookup.json", (),
          modules=("dspy",), **{**LOOKUP, "stdout": "the answer is 42 (answered by lm15)"}),
    Agent("dspy-async", ("{python}", "{agents}/dspy_lookup.py", "--async"), "dspy_lookup.json",
          (), modules=("dspy",),
          **{**LOOKUP, "stdout": "the answer is 42 (answered by lm15)"}),
]

# In .venv-frameworks: the frameworks' own execute_tool spans.
FRAMEWORK_AGENTS = [
    # Gemini generateContent through google-genai.  ADK's own execute_tool span holds its
    # work around the function (the call's events and their models): 15-19 ms beyond the
    # tool's code here with a plain OpenTelemetry SDK and no agent-latency at all (CI: 27).
    Agent("google-adk", ("{python}", "{agents}/adk_lookup.py"), SCRIPT, (),
          env={"GOOGLE_GEMINI_BASE_URL": "{server}", "GEMINI_API_KEY": "sim"},
          **{**LOOKUP, "tool_time_tolerance": 0.03}),
    # OpenAIChatCompletionClient: chat completions through the openai SDK.
    Agent("autogen", ("{python}", "{agents}/autogen_lookup.py"), SCRIPT, (), **LOOKUP),
    # Strands' OpenAIModel: streamed chat completions through the openai SDK.
    Agent("strands", ("{python}", "{agents}/strands_lookup.py"), SCRIPT, (), **LOOKUP),
    # FunctionAgent with llama-index-llms-openai: streamed chat completions; tool spans are
    # ours.  FunctionTool.acall runs a sync function in a worker thread and emits the
    # dispatcher's events around it: ~10 ms of LlamaIndex's own work inside the tool span.
    Agent("llama-index", ("{python}", "{agents}/llama_index_lookup.py"), SCRIPT, (),
          **{**LOOKUP, "tool_time_tolerance": 0.03}),
    # A Crew of one agent, native function calling through CrewAI's OpenAI provider (openai
    # SDK chat completions); tool spans are ours.  Its telemetry and tracing would call out.
    # ChatCompletionAgent with a plugin (automatic function calling through the openai SDK);
    # its own execute_tool span, named {plugin}-{function} (the script's "sk-gpt-4o" model
    # calls it so).
    Agent("semantic-kernel", ("{python}", "{agents}/semantic_kernel_lookup.py"), SCRIPT, (),
          **{**LOOKUP, "other_tools": ("Notes-lookup",)}),
    Agent("crewai", ("{python}", "{agents}/crewai_lookup.py"), SCRIPT, (),
          env={"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_TRACING_ENABLED": "false",
               "HOME": "{tmp}"}, **LOOKUP),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.id)
def test_function_tool_is_tool_time_once(tmp_path, simulators, agent, mode):
    """Pins, per agent and mode: tool time within 10 ms of the tool's 0.2 s, one tool call,
    one LLM call per served request (the task's ``llm_calls`` equal to the server's count)."""
    for module in agent.modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    check_agent_run(run_agent(agent, mode, tmp_path, simulators(agent.script)))


@pytest.mark.skipif(not FRAMEWORKS_PYTHON.exists(), reason=(
    f"no {FRAMEWORKS_PYTHON} (AGENT_LATENCY_FRAMEWORKS_PYTHON): `make "
    ".venv-frameworks/.test-installed` builds the frameworks' own virtual environment"))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("agent", FRAMEWORK_AGENTS, ids=lambda a: a.id)
def test_frameworks_own_tool_spans_are_tool_time_once(tmp_path, simulators, agent, mode):
    """The same pins for frameworks that emit GenAI execute_tool spans themselves."""
    module = {"google-adk": "google.adk", "autogen": "autogen_agentchat",
              "strands": "strands", "llama-index": "llama_index.core",
              "crewai": "crewai", "semantic-kernel": "semantic_kernel"}[agent.id]
    probe = subprocess.run([str(FRAMEWORKS_PYTHON), "-c", f"import {module}"],
                           capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"{module} is not installed in {FRAMEWORKS_PYTHON}")
    check_agent_run(run_agent(agent, mode, tmp_path, simulators(agent.script),
                              python=str(FRAMEWORKS_PYTHON)))
