"""A simulator in a child process (its own interpreter and GIL), for benchmarks and demos."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ._cli import config_to_argv
from ._config import SimulatorConfig

_LISTENING = re.compile(r"simulator listening on (http://\S+)")


class SimulatorProcess:
    """``python -m agent_latency.simulator`` with ``config``; a context manager.

    ``truth`` reads the child's truth file (a temporary one unless ``config.truth_path``
    is set). A script given as a dict is written to a temporary file.
    """

    __slots__ = ("_proc", "_seen", "_stderr", "_tmp", "base_url", "config")

    def __init__(self, config: SimulatorConfig | None = None, **overrides: Any) -> None:
        cfg = (config or SimulatorConfig(port=0)).replace(**overrides)
        self._tmp = tempfile.TemporaryDirectory(prefix="agent-latency-sim-")
        if cfg.truth_path is None:
            cfg = cfg.replace(truth_path=str(Path(self._tmp.name) / "truth.jsonl"))
        if isinstance(cfg.script, dict):
            path = Path(self._tmp.name) / "script.json"
            path.write_text(json.dumps(cfg.script), encoding="utf-8")
            cfg = cfg.replace(script=str(path))
        self.config = cfg
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: list[str] = []
        self._seen = 0  # truth records before the last clear_truth()
        self.base_url = ""

    def start(self, timeout: float = 20.0) -> SimulatorProcess:
        """Start the child and wait for its "listening" line."""
        cmd = [sys.executable, "-m", "agent_latency.simulator", *config_to_argv(self.config)]
        self._proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        found = threading.Event()

        def drain() -> None:
            assert self._proc is not None and self._proc.stderr is not None
            for line in self._proc.stderr:
                self._stderr.append(line)
                m = _LISTENING.search(line)
                if m and not found.is_set():
                    self.base_url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(timeout) or not self.base_url:
            self.stop()
            raise RuntimeError("simulator did not start: " + "".join(self._stderr[-20:]))
        return self

    def stop(self) -> None:
        """SIGINT the child, then kill it if it lingers."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        """Stop and remove the temporary directory."""
        self.stop()
        self._tmp.cleanup()

    def __enter__(self) -> SimulatorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def stderr(self) -> str:
        """What the child printed on stderr so far."""
        return "".join(self._stderr)

    @property
    def port(self) -> int:
        """The port clients connect to."""
        return int(self.base_url.rpartition(":")[2])

    @property
    def truth(self) -> list[dict[str, Any]]:
        """Ground-truth records the child has written since the last :meth:`clear_truth`."""
        return self._records()[self._seen:]

    def _records(self) -> list[dict[str, Any]]:
        path = Path(str(self.config.truth_path))
        if not path.exists():
            return []
        text = path.read_text()
        # Whole lines only: the child may be writing the next record right now.
        complete = text[:text.rfind("\n") + 1]
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def clear_truth(self) -> None:
        """Forget the records written so far (the truth file is left alone)."""
        self._seen = len(self._records())
