"""An ordinary pydantic-ai program: an agent with one function tool answers a question.

Nothing here knows about agent-latency.  ``anthropic`` talks to ANTHROPIC_BASE_URL with
``AnthropicModel`` (the model's default max_tokens, 64000, is more than the anthropic SDK
accepts without streaming: pydantic-ai's non-streamed request falls back to a stream);
``openai`` to OPENAI_BASE_URL with ``OpenAIChatModel``.  ``--stream`` runs the agent with
``run_stream`` instead of ``run``.
"""

import asyncio
import sys
import time

from pydantic_ai import Agent

MODELS = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": "openai:gpt-4o"}


def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


agent = Agent(MODELS[sys.argv[1]], instructions="Answer with the lookup tool.", tools=[lookup])


async def main() -> None:
    question = "What is the answer?"
    if "--stream" in sys.argv:
        async with agent.run_stream(question) as result:
            print(await result.get_output())
    else:
        print((await agent.run(question)).output)


if __name__ == "__main__":
    asyncio.run(main())
