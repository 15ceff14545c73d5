"""Real agents from PyPI, unmodified, against the simulator, checked against its truth log.

Each agent gets scripted turns (``scripts/``) that make it write a file, run a program and
read the file back with shell commands through its own shell tool, then answer.  Each runs
twice: under ``agent-latency run`` and under ``opentelemetry-instrument`` with
agent-latency's ``instrument()`` alone (see ``agent_harness``).  Either way the process must
be one task whose budget adds up, with one LLM span per model request the server served
(timed like the server says for streams, and named by the ``traceparent`` the request
carried) and one process span per shell command, none for libraries' own probes.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from agent_harness import MODES, Agent, check_agent_run, run_agent

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.name != "posix", reason="exec-based runner")]

SHELL = ("echo", "python3", "cat")  # the first command words of the three shell commands
MINI_ENV = {
    "MSWEA_MODEL_NAME": "openai/gpt-4o",
    "MSWEA_COST_TRACKING": "ignore_errors",  # litellm has no price for a local model
    "MSWEA_SILENT_STARTUP": "1",
    "MSWEA_GLOBAL_CONFIG_DIR": "{tmp}/mini-swe-agent",  # not the user's ~/.config
}
# A ToolCallingAgent without a name: its run is the task "ToolCallingAgent"; it ends by
# calling its final_answer tool.
SMOLAGENTS = {"tool_wrapper": "run_shell", "other_tools": ("final_answer",),
              "framework_task": "ToolCallingAgent"}

AGENTS = [
    # Responses API through the openai SDK (non-streaming), function tools.
    Agent("openai-agents", ("{python}", "{agents}/openai_agents_shell.py"), "shell_agent.json",
          SHELL, modules=("agents",), tool_wrapper="run_shell", framework_task="shell-coder"),
    # ChatOpenAI(streaming=True): chat completions streamed through the openai SDK.
    Agent("langgraph-react", ("{python}", "{agents}/langgraph_shell.py"), "shell_agent.json",
          SHELL, modules=("langgraph", "langchain_openai"), tool_wrapper="run_shell"),
    # litellm.completion (non-streaming) -> openai SDK on litellm's httpx.Client; commands
    # run straight from LocalEnvironment's subprocess (no tool span around them).
    Agent("mini-swe-agent-text", ("{python}", "{agents}/mini_swe_shell.py", "textbased"),
          "mini_swe_shell.json", (*SHELL, "printf"), modules=("minisweagent",), env=MINI_ENV,
          framework_task="DefaultAgent"),
    Agent("mini-swe-agent-toolcall", ("{python}", "{agents}/mini_swe_shell.py", "toolcall"),
          "mini_swe_shell.json", (*SHELL, "printf"), modules=("minisweagent",), env=MINI_ENV,
          framework_task="DefaultAgent"),
    # OpenAIServerModel: openai SDK chat completions, plain and streamed.
    Agent("smolagents-openai", ("{python}", "{agents}/smolagents_shell.py", "openai"),
          "smolagents_shell.json", SHELL, modules=("smolagents", "openai"), **SMOLAGENTS),
    Agent("smolagents-openai-stream",
          ("{python}", "{agents}/smolagents_shell.py", "openai", "--stream"),
          "smolagents_shell.json", SHELL, modules=("smolagents", "openai"), **SMOLAGENTS),
    # LiteLLMModel: litellm.completion, plain and streamed.
    Agent("smolagents-litellm", ("{python}", "{agents}/smolagents_shell.py", "litellm"),
          "smolagents_shell.json", SHELL, modules=("smolagents", "litellm"), **SMOLAGENTS),
    Agent("smolagents-litellm-stream",
          ("{python}", "{agents}/smolagents_shell.py", "litellm", "--stream"),
          "smolagents_shell.json", SHELL, modules=("smolagents", "litellm"), **SMOLAGENTS),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("agent", AGENTS, ids=lambda a: a.id)
def test_agent_run_is_one_task_with_true_llm_and_tool_spans(tmp_path, simulators, agent, mode):
    """Pins, per agent and mode: one task with a budget that adds up, one accurate LLM span
    per served request carrying its traceparent, one process span per shell command."""
    for module in agent.modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    run = run_agent(agent, mode, tmp_path, simulators(agent.script))
    check_agent_run(run)
