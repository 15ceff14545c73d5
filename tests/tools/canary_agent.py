"""A small instrumented agent that plants canaries everywhere a secret can hide, for
test_canaries.py: ``python canary_agent.py SIMULATOR_BASE_URL`` with ``CANARY_*`` variables.

It calls the real openai SDK against the simulator (the API key, an ``Authorization``
header and credentials in the URL are canaries; so are the prompt, the tool arguments the
model returns and sends back, and a prompt quoted back in an API error), runs tools through
``subprocess``, ``os.system`` and ``agent_latency.tool()`` with canaries on their command
lines, in their environment and in a failure's message, then writes ``canary-agent-ready``
and waits for a line on stdin (the test scrapes the Prometheus endpoint meanwhile) before
exiting.
"""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import openai

import agent_latency

#: What the agent writes once its calls and tools are done, in one ``os.write``: its
#: exporters' threads write stdout too, and ``print()`` writes text and newline apart, so
#: another thread's output can land between them (measured: 412 in 20,000 prints).
READY = b"canary-agent-ready\n"


def _with_credentials(base_url: str, secret: str) -> str:
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(netloc=f"agent:{secret}@{parts.netloc}"))


def _llm_calls(base_url: str, env: dict[str, str]) -> None:
    client = openai.OpenAI(base_url=_with_credentials(base_url, env["CANARY_URL"]) + "/v1",
                           api_key=env["CANARY_KEY"], max_retries=0)
    tools = [{"type": "function", "function": {
        "name": "run_shell", "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
    messages: list[dict[str, object]] = [
        {"role": "user", "content": f"Fix the bug. {env['CANARY_PROMPT']}"}]
    stream = client.chat.completions.create(
        model="sim-model", messages=messages, tools=tools, stream=True,
        stream_options={"include_usage": True},
        extra_headers={"Authorization": f"Bearer {env['CANARY_AUTH']}"})
    arguments = ""
    call_id = "call_1"
    for chunk in stream:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or ():
                call_id = tc.id or call_id
                arguments += (tc.function.arguments or "") if tc.function else ""
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "run_shell", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "ok"}]
    client.chat.completions.create(model="sim-model", messages=messages, tools=tools)
    try:  # an API error whose message quotes the request (a prompt canary) back
        client.chat.completions.create(
            model="sim-model", messages=[{"role": "user", "content": "again"}],
            extra_body={"simulator": {"fault": env["CANARY_PROMPT"]}})
    except openai.APIError:
        pass


def _tools(env: dict[str, str]) -> None:
    secret = env["CANARY_CMD"]
    subprocess.run(["sh", "-c", f'AUTH="Bearer {secret}" true'], check=False)
    subprocess.run(f"TOKEN='{secret}' true --password={secret}", shell=True, check=False)
    os.system(f'AUTH="Bearer {secret}" true')
    try:
        with agent_latency.tool("deploy"):
            subprocess.run([sys.executable, "-c", "raise SystemExit(3)",
                            f"--token={secret}"], check=True)
    except subprocess.CalledProcessError:
        pass
    try:
        with agent_latency.tool("login"):
            raise PermissionError(f"bad password {secret}")
    except PermissionError:
        pass


def main() -> int:
    base_url = sys.argv[1]
    env = {k: v for k, v in os.environ.items() if k.startswith("CANARY_")}
    agent_latency.instrument()
    with agent_latency.task("canary"):
        _llm_calls(base_url, env)
        _tools(env)
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), READY)
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
