"""An ordinary DSPy program: a ReAct agent with one function tool answers a question.

Nothing here knows about agent-latency.  ``dspy.LM`` on its default engine talks to the
server through the HTTP client DSPy bundles (plain sockets, no SDK, no litellm); ``--async``
runs the program with ``acall`` (the same client on asyncio streams).  The server's address
is passed as ``api_base``: with OPENAI_BASE_URL in the environment DSPy's default engine
would hand the request to LiteLLM instead (a gateway configured there), so the program takes
the variable out first.  It says at the end which client answered (the module of the
response object DSPy kept).
"""

import asyncio
import os
import sys
import time

import dspy


def lookup(key: str) -> str:
    """Look a key up in the team's notes."""
    start = time.perf_counter()
    time.sleep(0.2)
    # How long the tool's own code ran, for the test to hold the tool span against.
    print(f"lookup ran {time.perf_counter() - start:.6f} s", file=sys.stderr)
    return f"{key} = 42"


def main() -> None:
    base_url = os.environ.pop("OPENAI_BASE_URL")
    lm = dspy.LM("openai/gpt-4o", api_base=base_url, api_key=os.environ["OPENAI_API_KEY"],
                 cache=False)
    agent = dspy.ReAct("question -> answer", tools=[lookup], max_iters=1)
    with dspy.context(lm=lm):
        if "--async" in sys.argv:
            result = asyncio.run(agent.acall(question="What is the answer?"))
        else:
            result = agent(question="What is the answer?")
    module = type(lm.history[-1]["response"]).__module__
    via = "lm15" if "lm15" in module else module
    print(f"the answer is {result.answer} (answered by {via})")


if __name__ == "__main__":
    main()
