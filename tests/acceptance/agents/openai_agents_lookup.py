"""An ordinary OpenAI Agents SDK program: an agent with one function tool answers.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY (the SDK's default Responses API).
"""

import sys
import time

from agents import Agent, Runner, function_tool


@function_tool
def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


agent = Agent(name="lookup-agent", instructions="Answer with the lookup tool.",
              tools=[lookup], model="gpt-4o")

if __name__ == "__main__":
    print(Runner.run_sync(agent, "What is the answer?").final_output)
