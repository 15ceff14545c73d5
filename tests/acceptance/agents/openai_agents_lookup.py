"""An ordinary OpenAI Agents SDK program: an agent with one function tool answers.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY (the SDK's default Responses API).
"""

import time

from agents import Agent, Runner, function_tool


@function_tool
def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    time.sleep(0.2)
    return f"{key} = 42"


agent = Agent(name="lookup-agent", instructions="Answer with the lookup tool.",
              tools=[lookup], model="gpt-4o")

if __name__ == "__main__":
    print(Runner.run_sync(agent, "What is the answer?").final_output)
