"""Fixtures for the backend tests: a real Arize Phoenix in a network namespace of its own.

Phoenix runs from its own virtual environment (``make test`` builds ``.venv-phoenix``) in a
network namespace: its gRPC port binds every interface, whatever its host setting says, and
nothing outside the test may reach it.  Programs that talk to it run in the same namespace
(the ``in_namespace`` fixture).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = Path(os.environ.get("AGENT_LATENCY_PHOENIX", ROOT / ".venv-phoenix" / "bin" / "phoenix"))
HTTP = "http://127.0.0.1:6006"


def _in_namespace(namespace: str, *command: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", namespace, *command], **kwargs)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 for a network namespace of its own")
    if not PHOENIX.exists():
        pytest.skip(f"no Phoenix at {PHOENIX} (make test installs it in .venv-phoenix)")
    namespace = f"al-phoenix-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    server = None
    try:
        _in_namespace(namespace, "ip", "link", "set", "lo", "up", check=True)
        work = tmp_path_factory.mktemp("phoenix")
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
               "PHOENIX_PORT": "6006", "PHOENIX_GRPC_PORT": "4317",
               "PHOENIX_TELEMETRY_ENABLED": "false"}
        log = (work / "phoenix.log").open("w")
        server = subprocess.Popen(["ip", "netns", "exec", namespace, str(PHOENIX), "serve"],
                                  env=env, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        probe = (f"import urllib.request; urllib.request.urlopen('{HTTP}/healthz', timeout=2)")
        deadline = time.monotonic() + 120
        while True:
            if _in_namespace(namespace, sys.executable, "-c", probe,
                             capture_output=True).returncode == 0:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("Phoenix did not start: " + (work / "phoenix.log").read_text()[-2000:])
            time.sleep(1)
        yield namespace
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        subprocess.run(["ip", "netns", "del", namespace], check=False)



@pytest.fixture(scope="session")
def in_namespace() -> Callable[..., subprocess.CompletedProcess]:
    """``in_namespace(namespace, *command, **run_kwargs)``: run a command in Phoenix's
    network namespace."""
    return _in_namespace
