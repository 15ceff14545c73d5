"""An ordinary Agno program: an agent with one function tool answers.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY (Agno's OpenAIChat builds an openai client).  ``--stream`` streams the run.
"""

import sys
import time

from agno.agent import Agent
from agno.models.openai import OpenAIChat


def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


agent = Agent(model=OpenAIChat(id="gpt-4o"), tools=[lookup],
              instructions="Answer with the lookup tool.", telemetry=False)

if __name__ == "__main__":
    if "--stream" in sys.argv:
        print("".join(str(e.content) for e in agent.run("What is the answer?", stream=True)
                      if getattr(e, "event", "") == "RunContent" and e.content))
    else:
        print(agent.run("What is the answer?").content)
