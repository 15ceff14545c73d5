"""An ordinary smolagents program: a ToolCallingAgent with a shell tool.

Nothing here knows about agent-latency.  ``openai`` uses OpenAIServerModel (the openai SDK
reads OPENAI_BASE_URL / OPENAI_API_KEY), ``litellm`` uses LiteLLMModel with an
``openai/…`` model id (litellm reads the same variables); ``--stream`` turns on
smolagents' streaming of model output.
"""

import gc
import subprocess
import sys

from smolagents import LiteLLMModel, OpenAIServerModel, ToolCallingAgent, tool

# The acceptance check compares our timing with the server's truth. A full collection of
# this process's heap (0.1 s with these frameworks and every OpenTelemetry instrumentor
# loaded, measured with gc.callbacks) inside a stream is a pause of the program itself that
# any client would see; full collections are deferred so the check measures our timing.
gc.set_threshold(700, 10, 10_000)


@tool
def run_shell(command: str) -> str:
    """Run a shell command in the working directory and return what it printed.

    Args:
        command: the shell command line to run.
    """
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=120)
    return f"exit code {done.returncode}\n{done.stdout}{done.stderr}"


def main() -> None:
    backend = sys.argv[1] if len(sys.argv) > 1 else "openai"
    name = "gpt-4o"
    if backend == "litellm":
        model = LiteLLMModel(model_id=f"openai/{name}")
    else:
        model = OpenAIServerModel(model_id=name)
    agent = ToolCallingAgent(tools=[run_shell], model=model, max_steps=8,
                             stream_outputs="--stream" in sys.argv, verbosity_level=0)
    print(agent.run("Write hello into notes.txt, compute 6*7, and report."))


if __name__ == "__main__":
    main()
