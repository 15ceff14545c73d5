"""An ordinary Haystack program: an Agent with one tool answers.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY, handed to OpenAIChatGenerator (the openai SDK's chat completions).
"""

import os
import sys
import time

from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.tools import tool


@tool
def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


agent = Agent(chat_generator=OpenAIChatGenerator(model="gpt-4o",
                                                 api_base_url=os.environ["OPENAI_BASE_URL"]),
              tools=[lookup], system_prompt="Answer with the lookup tool.")

if __name__ == "__main__":
    result = agent.run(messages=[ChatMessage.from_user("What is the answer?")])
    print(result["messages"][-1].text)
