"""mini-swe-agent: ``DefaultAgent.run`` becomes a task.

``DefaultAgent.run`` (and every agent class built on it, ``InteractiveAgent`` included)
opens a task named after the agent class.  What happens in it is seen by the other
instrumentations: the model's calls (litellm, or the SDK under it) and every command the
environment runs — ``LocalEnvironment`` runs each in a ``subprocess``, so each is an
``execute_tool {program}`` process span; a container environment's ``docker exec`` too.

Patched when the program imports ``minisweagent``.
"""

from __future__ import annotations

from typing import Any

from ._frameworks import FrameworkInstrumentor, agent_name, call_as_task


class MiniSweAgentInstrumentor(FrameworkInstrumentor):
    """Tasks for mini-swe-agent runs."""

    _instruments = ("mini-swe-agent >= 1.0",)
    PATCHES = (("minisweagent.agents.default", "DefaultAgent.run", "_run"),)

    @staticmethod
    def _run(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return call_as_task(lambda: agent_name(instance), wrapped, args, kwargs)
