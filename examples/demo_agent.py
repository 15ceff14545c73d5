"""A small coding agent: the openai SDK, chat completions with tools, streaming.

It asks the model what to do, runs each ``run_shell`` tool call as a real shell command
(``subprocess.run``), feeds the output back, and stops when the model answers without a
tool call or after ``--turns`` turns.  Everything runs inside ``agent_latency.task("demo")``
with each tool inside ``agent_latency.tool(name)``, so the task's budget (output generation,
prefill, tool execution, network, other) is printed when it ends.

Against the simulator and its scripted coding turns::

    agent-latency simulate --script examples/scripts/coding_agent.json &
    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 python examples/demo_agent.py --turns 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import agent_latency

TOOLS = [{
    "type": "function",
    "function": {
        "name": "run_shell",
        "description": "Run a shell command in the project directory and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command."}},
            "required": ["command"],
        },
    },
}]
SYSTEM = ("You are a coding agent. Use the run_shell tool to inspect and run code, then "
          "answer the user's question briefly.")


def run_shell(command: str, timeout: float = 30.0) -> str:
    """Run ``command`` with the shell; its exit code, stdout and stderr, truncated."""
    with agent_latency.tool("run_shell"):
        proc = subprocess.run(command, shell=True, capture_output=True, text=True,
                              timeout=timeout)
    output = (proc.stdout + proc.stderr)[-4000:]
    return f"exit code {proc.returncode}\n{output}"


def one_turn(client, model: str, messages: list[dict]) -> tuple[str, list[dict]]:
    """Stream one assistant turn; returns its text and its tool calls."""
    text: list[str] = []
    calls: dict[int, dict] = {}
    stream = client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                            stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            text.append(delta.content)
            print(delta.content, end="", flush=True)
        for call in delta.tool_calls or ():
            slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            if call.id:
                slot["id"] = call.id
            if call.function and call.function.name:
                slot["name"] = call.function.name
            if call.function and call.function.arguments:
                slot["arguments"] += call.function.arguments
    if text:
        print()
    return "".join(text), [calls[i] for i in sorted(calls)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5, help="most model turns (default 5)")
    parser.add_argument("--model", default=os.environ.get("DEMO_MODEL", "sim-coder"))
    parser.add_argument("--question", default="What does `python -c 'print(42)'` print?")
    parser.add_argument("--task", default="demo", help="the task's name (default demo)")
    args = parser.parse_args(argv)

    agent_latency.instrument()  # before the client is made: patches openai and httpx
    import openai

    base_url = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    client = openai.OpenAI(base_url=base_url,
                           api_key=os.environ.get("OPENAI_API_KEY", "sk-demo"))
    messages: list[dict] = [{"role": "system", "content": SYSTEM},
                            {"role": "user", "content": args.question}]
    with agent_latency.task(args.task):
        for turn in range(args.turns):
            text, calls = one_turn(client, args.model, messages)
            assistant: dict = {"role": "assistant", "content": text or None}
            if calls:
                assistant["tool_calls"] = [
                    {"id": c["id"] or f"call_{turn}_{i}", "type": "function",
                     "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for i, c in enumerate(calls)]
            messages.append(assistant)
            if not calls:
                break
            for call in assistant["tool_calls"]:
                try:
                    command = json.loads(call["function"]["arguments"] or "{}")["command"]
                except (ValueError, KeyError, TypeError):
                    result = "error: arguments must be JSON with a 'command'"
                else:
                    print(f"$ {command}")
                    result = run_shell(command)
                    print(result.rstrip())
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": result})
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
