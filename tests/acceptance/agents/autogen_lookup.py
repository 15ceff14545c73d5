"""An ordinary AutoGen (autogen-agentchat) program: an AssistantAgent with one function tool
answers.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY (autogen-ext's OpenAIChatCompletionClient builds an openai client).
"""

import asyncio
import os
import sys
import time

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient


def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


async def main() -> None:
    client = OpenAIChatCompletionClient(model="gpt-4o", base_url=os.environ["OPENAI_BASE_URL"])
    agent = AssistantAgent("lookup_agent", model_client=client, tools=[lookup],
                           reflect_on_tool_use=True,
                           system_message="Answer with the lookup tool.")
    result = await agent.run(task="What is the answer?")
    print(result.messages[-1].content)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
