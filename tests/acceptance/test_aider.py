"""aider (aider-chat), unmodified, against the simulator: the same checks as test_agents.

aider pins openai 2.x and litellm exactly, so it lives in a virtual environment of its own
(``make .venv-aider/.test-installed``: aider-chat, this project without extras, pytest),
named by ``AGENT_LATENCY_AIDER_PYTHON``; this test runs in ``.venv`` and starts
``.venv-aider``'s interpreter.  aider answers one ``--message`` non-interactively with its
default streaming on: litellm.completion(stream=True) -> openai 2.x on litellm's
httpx.Client.  The scripted reply rewrites ``notes.txt`` in aider's whole-file edit format,
and ``--auto-test`` makes aider run a shell command after the edit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from agent_harness import MODES, Agent, check_agent_run, run_agent

REPO = Path(__file__).resolve().parents[2]
AIDER_PYTHON = REPO / os.environ.get("AGENT_LATENCY_AIDER_PYTHON", ".venv-aider/bin/python")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix", reason="exec-based runner"),
    pytest.mark.skipif(not AIDER_PYTHON.exists(), reason=(
        f"no {AIDER_PYTHON} (AGENT_LATENCY_AIDER_PYTHON): `make .venv-aider/.test-installed` "
        "builds aider's own virtual environment (it pins openai 2.x and litellm)")),
]

# What aider's --auto-test runs after the edit: one process, 0.2 s of it a sleep.
TEST_CMD = 'python3 -c "import time; time.sleep(0.2); print(6 * 7)"'

AIDER = Agent(
    "aider",
    ("{bin}/aider", "--model", "openai/gpt-4o", "--openai-api-base", "{base_url}",
     "--edit-format", "whole", "--yes-always", "--no-git", "--no-pretty", "--no-fancy-input",
     "--no-check-update", "--no-show-release-notes", "--no-analytics",
     "--no-show-model-warnings", "--map-tokens", "0", "--auto-test", "--test-cmd", TEST_CMD,
     "--message", "Write hello into notes.txt.", "notes.txt"),
    "aider_edit.json", ("python3",), stdout="42",
    env={"HOME": "{tmp}"},  # aider keeps caches and settings under ~/.aider
)


@pytest.mark.parametrize("mode", MODES)
def test_aider_edit_is_one_task_with_true_llm_and_tool_spans(tmp_path, simulators, mode):
    """Pins for aider: one task with a budget that adds up, one accurate streamed LLM span
    per served request carrying its traceparent, one process span for its test command."""
    run = run_agent(AIDER, mode, tmp_path, simulators(AIDER.script), python=str(AIDER_PYTHON))
    check_agent_run(run)
