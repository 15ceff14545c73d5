"""An ordinary LlamaIndex program: a FunctionAgent with one function tool answers.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY, handed to llama-index-llms-openai (it builds an openai client and streams).
"""

import asyncio
import os
import sys
import time

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.openai import OpenAI


def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


async def main() -> None:
    llm = OpenAI(model="gpt-4o", api_base=os.environ["OPENAI_BASE_URL"])
    agent = FunctionAgent(tools=[lookup], llm=llm, system_prompt="Answer with the lookup tool.")
    print(await agent.run("What is the answer?"))


if __name__ == "__main__":
    asyncio.run(main())
