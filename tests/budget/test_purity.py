"""The budget engine stays pure."""

from __future__ import annotations

import subprocess
import sys


def test_budget_imports_no_opentelemetry():
    code = (
        "import sys, agent_latency.budget;"
        "bad=[m for m in sys.modules if m.startswith(('opentelemetry','wrapt','httpx'))];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
