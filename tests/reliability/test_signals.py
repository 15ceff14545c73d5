"""Exit statuses and signal deaths are the program's own: each case is run plain, with
instrument() and under agent-latency run, and must end the same way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_latency import semconv

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

CASES = {
    "keyboard_interrupt": "raise KeyboardInterrupt",
    "keyboard_interrupt_in_task": "with agent_latency.task('t'):\n"
                                  "    with agent_latency.tool('x'):\n"
                                  "        raise KeyboardInterrupt",
    "sigint_to_self": "import os, signal, time\n"
                      "with agent_latency.task('t'):\n"
                      "    os.kill(os.getpid(), signal.SIGINT)\n"
                      "    time.sleep(5)",
    "keyboard_interrupt_subclass": "class Stop(KeyboardInterrupt): pass\nraise Stop",
    "sys_exit_3": "import sys\nwith agent_latency.task('t'):\n    sys.exit(3)",
    "exception": "with agent_latency.task('t'):\n    raise ValueError('no')",
    "normal": "with agent_latency.task('t'):\n    pass",
    "sigterm_to_self": "import os, signal\nwith agent_latency.task('t'):\n"
                       "    os.kill(os.getpid(), signal.SIGTERM)\n    import time; time.sleep(5)",
    "sigkill_to_self": "import os, signal\nwith agent_latency.task('t'):\n"
                       "    os.kill(os.getpid(), signal.SIGKILL)",
}

PRELUDE = {
    "plain": "import contextlib\nclass agent_latency:\n"
             "    task = tool = staticmethod(lambda name: contextlib.nullcontext())\n",
    "instrument": "import agent_latency\nagent_latency.instrument()\n",
    "run": "import agent_latency\n",
}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    return env


def _default_signals() -> None:
    """The child starts with SIGINT and SIGTERM at their defaults, as from a terminal.

    A background job (``make test &``, a CI script's job) inherits SIGINT ignored, and an
    ignored signal stays ignored across ``exec``: Python then installs no KeyboardInterrupt
    handler, and a SIGINT does nothing.  These tests test what the signals do, so they set
    the disposition themselves.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _cmd(mode: str, script: Path) -> list[str]:
    cmd = [sys.executable, str(script)]
    if mode == "run":
        cmd = [sys.executable, "-m", "agent_latency", "run", "--", *cmd]
    return cmd


def _status(mode: str, body: str, tmp_path: Path) -> int:
    script = tmp_path / f"{mode}.py"
    script.write_text(PRELUDE[mode] + body + "\n")
    proc = subprocess.run(_cmd(mode, script), check=False, env=_env(tmp_path), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          preexec_fn=_default_signals)
    assert "internal error" not in proc.stderr, proc.stderr
    return proc.returncode


class TestExitStatusUnchanged:
    """Every way out of the program gives the status plain Python gives."""

    @pytest.mark.parametrize("case", sorted(CASES))
    def test_same_status_as_plain_python(self, case: str, tmp_path: Path) -> None:
        plain = _status("plain", CASES[case], tmp_path)
        assert _status("instrument", CASES[case], tmp_path) == plain
        assert _status("run", CASES[case], tmp_path) == plain

    def test_keyboard_interrupt_is_death_by_sigint(self, tmp_path: Path) -> None:
        assert _status("plain", CASES["keyboard_interrupt"], tmp_path) == -signal.SIGINT


class TestSignalsFromOutside:
    """SIGTERM, SIGINT and SIGKILL sent by another process; SIGTERM ends the task first and
    still dies of SIGTERM, within the flush bound."""

    @pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
    @pytest.mark.parametrize("mode", ["plain", "instrument", "run"])
    def test_signal_death(self, sig: int, mode: str, tmp_path: Path) -> None:
        script = tmp_path / f"{mode}.py"
        script.write_text(PRELUDE[mode] + "import sys, time\n"
                          "with agent_latency.task('t'):\n"
                          "    print('ready', flush=True)\n"
                          "    time.sleep(30)\n")
        proc = subprocess.Popen(_cmd(mode, script), env=_env(tmp_path), cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_default_signals)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        sent = time.monotonic()
        proc.send_signal(sig)
        code = proc.wait(timeout=30)
        waited = time.monotonic() - sent
        proc.stdout.close()
        stderr = proc.stderr.read() if proc.stderr else ""
        expected = -sig
        assert code == expected, stderr
        # the final flush is bounded (2 s); generous for a busy machine
        assert waited < 6.0
        if mode != "plain" and sig == signal.SIGTERM:
            assert "task t " in stderr, stderr  # ended with its budget before dying


class TestBrokenPipe:
    """A reader that goes away (SIGPIPE is ignored by Python: BrokenPipeError) ends the
    program with the same status with or without us."""

    @pytest.mark.parametrize("mode", ["instrument", "run"])
    def test_broken_pipe(self, mode: str, tmp_path: Path) -> None:
        body = ("import sys\nwith agent_latency.task('t'):\n"
                "    for _ in range(100000):\n        print('x' * 100)\n")
        codes = {}
        for m in ("plain", mode):
            script = tmp_path / f"{m}.py"
            script.write_text(PRELUDE[m] + body)
            proc = subprocess.Popen(_cmd(m, script), env=_env(tmp_path), cwd=tmp_path,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    preexec_fn=_default_signals)
            assert proc.stdout is not None
            proc.stdout.read(10)
            proc.stdout.close()
            codes[m] = proc.wait(timeout=60)
        assert codes[mode] == codes["plain"]
