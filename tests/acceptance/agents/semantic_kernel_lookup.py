"""An ordinary Semantic Kernel program: a ChatCompletionAgent with one plugin function
answers.

Nothing here knows about agent-latency.  The model endpoint comes from OPENAI_BASE_URL /
OPENAI_API_KEY, handed to an openai client for OpenAIChatCompletion; the agent calls the
function through automatic function calling.
"""

import asyncio
import os
import sys
import time

from openai import AsyncOpenAI
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
from semantic_kernel.functions import kernel_function


class Notes:
    """The team's notes."""

    @kernel_function(name="lookup", description="Look a key up in the team's notes.")
    def lookup(self, key: str) -> str:
        start = time.perf_counter()
        time.sleep(0.2)
        # How long the tool's own code ran, for the test to hold the tool span against.
        print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
        return f"{key} = 42"


async def main() -> None:
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"],
                         api_key=os.environ["OPENAI_API_KEY"])
    service = OpenAIChatCompletion(ai_model_id="sk-gpt-4o", async_client=client)
    agent = ChatCompletionAgent(service=service, name="lookup_agent",
                                instructions="Answer with the lookup tool.", plugins=[Notes()])
    print((await agent.get_response(messages="What is the answer?")).content)


if __name__ == "__main__":
    asyncio.run(main())
