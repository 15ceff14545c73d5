"""The program sees no warning it would not see without us: ``instrument()`` imports no
module of a package before that package has set up its own warning filters, and none the
program never imports (``python -W error`` turns any such warning into a failure)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from agent_latency import semconv

pytest.importorskip("requests")
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("socks") is not None,
    reason="PySocks is installed: urllib3 has no SOCKS DependencyWarning to give")

CHECK_PATCHED = (
    "\nimport requests, urllib3\n"
    "assert hasattr(requests.sessions.Session.send, '__wrapped__')\n"
    "assert hasattr(urllib3.connectionpool.HTTPConnectionPool.urlopen, '__wrapped__')\n"
    "print('patched')\n")


def _run(tmp_path: Path, *flags: str, program: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([sys.executable, *flags, "-c", program + CHECK_PATCHED],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


class TestRequestsAfterInstrument:
    """``import requests`` after ``instrument()``: no SOCKS DependencyWarning, patched."""

    PROGRAMS: ClassVar[dict[str, str]] = {
        "requests after": "import agent_latency\nagent_latency.instrument()\nimport requests",
        "urllib3 before": "import urllib3\nimport agent_latency\nagent_latency.instrument()",
        "requests before": "import requests\nimport agent_latency\nagent_latency.instrument()",
    }

    @pytest.mark.parametrize("flags", [(), ("-W", "error")], ids=["default", "W-error"])
    @pytest.mark.parametrize("name", list(PROGRAMS))
    def test_silent_and_patched(self, tmp_path: Path, flags: tuple[str, ...], name: str):
        proc = _run(tmp_path, *flags, program=self.PROGRAMS[name])
        assert proc.stderr == "", proc.stderr
        assert proc.returncode == 0 and proc.stdout == "patched\n"

    def test_a_program_on_urllib3_alone_does_not_get_requests(self, tmp_path: Path):
        proc = subprocess.run(
            [sys.executable, "-W", "error", "-c",
             "import sys, urllib3\nimport agent_latency\nagent_latency.instrument()\n"
             "print('requests' in sys.modules)"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, semconv.ENV_OUTPUT_DIR: str(tmp_path / "out")})
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "False\n", "")
