"""An ordinary CrewAI program: one agent with one tool does one task.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY (CrewAI's OpenAI provider builds an openai client; the model calls the tool
natively).
"""

import sys
import time

from crewai import Agent, Crew, Task
from crewai.tools import tool


@tool("lookup")
def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


agent = Agent(role="Researcher", goal="Answer questions from the notes",
              backstory="You look things up.", tools=[lookup], llm="openai/gpt-4o",
              verbose=False)
task = Task(description="What is the answer?", expected_output="The answer.", agent=agent)

if __name__ == "__main__":
    print(Crew(agents=[agent], tasks=[task], verbose=False).kickoff())
