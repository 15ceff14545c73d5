"""The live task line on stderr: never written into a file of the program's own, names shown
escaped and cut, one whole line per task however many threads end tasks together."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import semconv
from agent_latency._console import NAME_LIMIT, ConsoleLines, shown_name

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX descriptors")

_LINE = re.compile(r"task (\S+) \d+\.\d\ds = output ")


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "prog.py"
    script.write_text("import os, sys, threading\nimport agent_latency\n"
                      "agent_latency.instrument()\n" + body)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_OUTPUT_DIR] = str(tmp_path / "out")
    env["PYTHONIOENCODING"] = "utf-8"
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=120,
                          check=False)


class TestTheProgramsOwnFile:
    """A data file that took descriptor 2 after the program closed it gets no task line."""

    def test_closed_then_reused_descriptor(self, tmp_path: Path) -> None:
        proc = _run(tmp_path, (
            "os.close(2)\n"
            "data = open('data.txt', 'w')\n"
            "assert data.fileno() == 2, data.fileno()\n"
            "with agent_latency.task('reused'):\n"
            "    with agent_latency.tool('x'):\n"
            "        pass\n"
            "data.write('DATA\\n')\n"
            "data.close()\n"))
        assert proc.returncode == 0, proc.stdout
        assert (tmp_path / "data.txt").read_text() == "DATA\n"
        assert proc.stdout == ""
        spans = (tmp_path / "out" / "traces.jsonl").read_text()
        assert "invoke_agent reused" in spans  # the spans are kept all the same

    def test_the_same_stderr_still_gets_it(self, tmp_path: Path) -> None:
        proc = _run(tmp_path, "with agent_latency.task('kept'):\n    pass\n")
        assert _LINE.match(proc.stderr), proc.stderr

    def test_a_stream_without_descriptor_is_written_to(self) -> None:
        import io

        stream = io.StringIO()
        ConsoleLines(stream).print("a line")
        assert stream.getvalue() == "a line\n"


class TestNames:
    """Controls, bidirectional marks and newlines are escapes; a long name is cut."""

    HOSTILE = "a\x1b[2J\x07b\x9b31m\u202ec\nfake task line\r\x00"

    def test_escaped_in_the_line(self, tmp_path: Path) -> None:
        proc = _run(tmp_path, f"with agent_latency.task({self.HOSTILE!r}):\n    pass\n")
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(r"task a\x1b[2J\x07b\x9b31m\u202ec\x0afake task line"
                                   r"\x0d\x00 "), lines[0]
        assert not re.search("[\x00-\x1f\x7f-\x9f\u202e]", proc.stderr.rstrip("\n"))

    def test_a_10kb_name_is_cut(self, tmp_path: Path) -> None:
        proc = _run(tmp_path, "with agent_latency.task('n' * 10_000):\n    pass\n")
        (line,) = proc.stderr.splitlines()
        assert line.startswith("task " + "n" * (NAME_LIMIT - 1) + "… ")
        assert len(line) < NAME_LIMIT + 200

    def test_escapes_count_towards_the_limit(self) -> None:
        assert len(shown_name("\x1b" * 1000)) == NAME_LIMIT
        assert shown_name("fix") == "fix"


class TestThreads:
    """200 threads ending tasks together print 200 whole lines."""

    def test_no_line_is_split_or_joined(self, tmp_path: Path) -> None:
        proc = _run(tmp_path, (
            "barrier = threading.Barrier(200)\n"
            "def work(i):\n"
            "    with agent_latency.task(f'w{i}'):\n"
            "        barrier.wait()\n"
            "threads = [threading.Thread(target=work, args=(i,)) for i in range(200)]\n"
            "for t in threads: t.start()\n"
            "for t in threads: t.join()\n"))
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = proc.stderr.splitlines()
        names = sorted(match.group(1) for line in lines if (match := _LINE.match(line)))
        assert len(lines) == 200, [line for line in lines if not _LINE.match(line)][:5]
        assert names == sorted(f"w{i}" for i in range(200))
        assert all(line.count("task ") == 1 for line in lines)
