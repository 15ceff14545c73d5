"""An ordinary Strands Agents program: an agent with one function tool answers.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY, handed to Strands' OpenAIModel (it streams chat completions).
"""

import os
import sys
import time

from strands import Agent, tool
from strands.models.openai import OpenAIModel


@tool
def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


model = OpenAIModel(client_args={"base_url": os.environ["OPENAI_BASE_URL"],
                                 "api_key": os.environ["OPENAI_API_KEY"]}, model_id="gpt-4o")
agent = Agent(model=model, tools=[lookup], system_prompt="Answer with the lookup tool.",
              callback_handler=None)

if __name__ == "__main__":
    print(agent("What is the answer?"))
