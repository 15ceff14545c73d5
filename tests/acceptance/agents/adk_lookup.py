"""An ordinary google-adk program: an LlmAgent with one function tool answers.

Nothing here knows about agent-latency.  The Gemini endpoint comes from
GOOGLE_GEMINI_BASE_URL / GEMINI_API_KEY (google-genai's own variables).
"""

import asyncio
import sys
import time

from google.adk.agents import LlmAgent
from google.adk.runners import InMemoryRunner
from google.genai import types


def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


agent = LlmAgent(name="lookup_agent", model="gemini-2.5-flash",
                 instruction="Answer with the lookup tool.", tools=[lookup])


async def main() -> None:
    runner = InMemoryRunner(agent=agent, app_name="lookup")
    session = await runner.session_service.create_session(app_name="lookup", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="What is the answer?")])
    async for event in runner.run_async(user_id="u", session_id=session.id,
                                        new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            print(event.content.parts[0].text)


if __name__ == "__main__":
    asyncio.run(main())
