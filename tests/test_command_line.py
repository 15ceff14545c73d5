"""The ``agent-latency`` command as a new user meets it: plain help with an example for
every subcommand, one line naming the extra when an optional package is missing, and a demo
that never deletes or writes over traces it did not write."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent_latency import _demo
from agent_latency.cli import COMMANDS, EXTRAS, missing_extra

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path | None = None, pre: str = "",
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``agent-latency ARGS`` in a fresh interpreter; ``pre`` runs first (to hide a
    package: ``sys.modules[name] = None`` makes its import fail as a missing one does)."""
    code = f"import sys\n{pre}\nfrom agent_latency.cli import main\nsys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})


def hide(*modules: str) -> str:
    return "\n".join(f"sys.modules[{m!r}] = None" for m in modules)


class TestHelp:
    """Every subcommand's --help: plain text (no reST backticks, no doubled %), an example,
    every option explained; run's in argparse's format."""

    @pytest.mark.parametrize("command", sorted(COMMANDS))
    def test_plain_with_examples(self, command):
        result = cli(command, "--help")
        assert result.returncode == 0, result.stderr
        text = result.stdout
        assert text.startswith(f"usage: agent-latency {command} "), text[:80]
        assert "`" not in text and "%%" not in text
        assert "\nexamples:\n  agent-latency " + command in text
        assert "\noptions:\n" in text
        # Each option has a description: on its line, or on the next when the option
        # is long.
        section = text.split("\noptions:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        for i, line in enumerate(section):
            if re.match(r"^  -", line) and not re.search(r"\S  +\S", line.strip()):
                following = section[i + 1] if i + 1 < len(section) else ""
                assert following.startswith(" " * 8) and not following.strip().startswith(
                    "-"), f"{command}: no help for {line.strip()!r}"

    def test_top_level(self):
        result = cli("--help")
        assert result.returncode == 0
        assert "agent-latency demo" in result.stdout and "`" not in result.stdout
        for command in COMMANDS:
            assert f"\n  {command} " in result.stdout


class TestMissingExtra:
    """A missing optional package is one line naming the extra, exit status 2, no
    traceback."""

    @pytest.mark.parametrize(("args", "hidden", "extra"), [
        (("simulate", "--help"), ("aiohttp",), "simulator"),
        (("demo",), ("aiohttp",), "simulator"),
        (("demo",), ("openai",), "openai"),
    ])
    def test_one_line(self, tmp_path, args, hidden, extra):
        result = cli(*args, "--dir", str(tmp_path / "d"), cwd=tmp_path, pre=hide(*hidden)) \
            if args == ("demo",) else cli(*args, cwd=tmp_path, pre=hide(*hidden))
        assert result.returncode == 2
        lines = result.stderr.splitlines()
        assert len(lines) == 1, result.stderr
        assert f"pip install 'agent-latency[{extra}]'" in lines[0]
        assert lines[0].startswith(f"agent-latency {args[0]}: needs ")
        assert not (tmp_path / "d").exists()  # nothing written before the check

    def test_html_page_without_jinja2(self, tmp_path):
        task = {"traceId": "ab" * 16, "spanId": "01" * 8, "name": "invoke_agent t",
                "startTimeUnixNano": "1700000000000000000",
                "endTimeUnixNano": "1700000001000000000",
                "attributes": [{"key": "agent_latency.task.name",
                                "value": {"stringValue": "t"}}]}
        (tmp_path / "t.jsonl").write_text(json.dumps(
            {"resourceSpans": [{"scopeSpans": [{"spans": [task]}]}]}) + "\n")
        result = cli("report", str(tmp_path / "t.jsonl"), "--html", str(tmp_path / "p.html"),
                     pre=hide("jinja2"))
        assert result.returncode == 2
        assert result.stderr.splitlines()[-1] == (
            "agent-latency report: needs jinja2 (the [report] extra): "
            "pip install 'agent-latency[report]'")
        assert "Traceback" not in result.stderr

    def test_every_extra_is_named(self):
        tomllib = pytest.importorskip("tomllib")
        extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "optional-dependencies"]
        integrations = set(extras) - {"test", "test-legacy", "docs", "bench"}
        assert integrations == set(EXTRAS.values())
        assert missing_extra("google.genai") == ("google.genai", "google-genai")
        assert missing_extra("aiohttp.web") == ("aiohttp", "simulator")
        assert missing_extra("nosuchmodule") is None  # a bug: its traceback is wanted


class TestDemoDirectory:
    """demo --dir: only the demo's own traces are ever replaced."""

    def test_foreign_traces_refused_and_kept(self, tmp_path):
        user = tmp_path / ".agent-latency"
        user.mkdir()
        (user / "traces.jsonl").write_text('{"mine": 1}\n')
        (user / "traces.jsonl.1").write_text('{"older": 1}\n')
        result = cli("demo", "--dir", str(user), cwd=tmp_path)
        assert result.returncode == 2
        (line,) = result.stderr.splitlines()
        assert "holds traces the demo did not write" in line
        assert (user / "traces.jsonl").read_text() == '{"mine": 1}\n'
        assert (user / "traces.jsonl.1").read_text() == '{"older": 1}\n'
        assert sorted(p.name for p in user.iterdir()) == ["traces.jsonl", "traces.jsonl.1"]

    def test_own_traces_replaced_changed_ones_not(self, tmp_path):
        own = tmp_path / "demo"
        assert _demo.claim_directory(own) is None  # new: made and marked
        (own / "traces.jsonl").write_text("the demo's run\n")
        _demo.record_directory(own)  # as the demo does once its agent ended
        assert _demo.claim_directory(own) is None
        assert not (own / "traces.jsonl").exists()  # its own previous run: replaced
        (own / "traces.jsonl").write_text("the demo's run\n")
        _demo.record_directory(own)
        with (own / "traces.jsonl").open("a") as f:
            f.write("another program's span\n")  # written to since
        assert "did not write" in (_demo.claim_directory(own) or "")
        assert (own / "traces.jsonl").exists()

    def test_not_a_directory(self, tmp_path):
        (tmp_path / "f").write_text("")
        assert "not a directory" in (_demo.claim_directory(tmp_path / "f") or "")

    def test_agent_ships_in_the_package_or_tree(self):
        found = _demo.examples_dir()
        assert found is not None
        assert (found / "demo_agent.py").is_file()
        assert (found / "scripts" / "coding_agent.json").is_file()
