"""A simulator process for the acceptance tests (``agent-latency simulate --port 0``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def simulator_url() -> Iterator[str]:
    script = HERE / "scripts" / "shell_agent.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LATENCY"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_latency", "simulate", "--port", "0", "--script",
         str(script), "--output-tps", "400", "--prefill-tps", "4000"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        url = None
        assert proc.stderr is not None
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if match:
                url = match.group(1)
                break
        if url is None:
            pytest.fail("the simulator did not start")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
