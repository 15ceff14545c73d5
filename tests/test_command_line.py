"""The ``agent-latency`` command as a new user meets it: plain help with an example for
every subcommand, one line naming the extra when an optional package is missing, and a demo
that never deletes or writes over traces it did not write."""

from __future__ import annotations

import argparse
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

    def test_own_traces_kept_changed_ones_refused(self, tmp_path):
        own = tmp_path / "demo"
        assert _demo.claim_directory(own) is None  # new: made and marked
        (own / "traces.jsonl").write_text("the demo's run\n")
        _demo.record_directory(own)  # as the demo does once its agent ended
        assert _demo.claim_directory(own) is None
        # Its own previous run is kept: the next run adds to it (compare needs runs).
        assert (own / "traces.jsonl").read_text() == "the demo's run\n"
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


def _file_services(path: Path) -> list[str]:
    return [kv["value"]["stringValue"] for line in path.read_text().splitlines()
            for rs in json.loads(line)["resourceSpans"]
            for kv in rs.get("resource", {}).get("attributes", ())
            if kv["key"] == "service.name"]


def _task_spans(path: Path) -> list[dict]:
    return [span for line in path.read_text().splitlines()
            for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
            for span in ss["spans"]
            if any(a["key"] == "agent_latency.task.name" for a in span.get("attributes", ()))]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    return {**env, **extra}


class TestDemoRuns:
    """demo --dir X twice: both runs kept (compare gets its runs), each run's output only
    its own budget; an OTLP endpoint in the environment gets the spans too, and says so;
    the spans' service is agent-latency-demo unless OTEL_SERVICE_NAME names one."""

    def test_runs_add_up_and_otlp_is_honoured(self, tmp_path):
        demo_dir = tmp_path / "runs"
        args = [sys.executable, "-m", "agent_latency", "demo", "--dir", str(demo_dir),
                "--output-tps", "2000", "--prefill-tps", "50000"]
        first = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True,
                               timeout=300, env=_clean_env())
        assert first.returncode == 0, first.stderr
        traces = demo_dir / "traces.jsonl"
        assert set(_file_services(traces)) == {"agent-latency-demo"}
        from acceptance.agent_harness import OtlpReceiver

        received = tmp_path / "received.jsonl"
        receiver = OtlpReceiver(received)  # writes what it receives as OTLP/JSON lines
        try:
            second = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True,
                                    timeout=300, env=_clean_env(
                                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=receiver.endpoint,
                                        OTEL_SERVICE_NAME="my-demo",
                                        OTEL_METRICS_EXPORTER="none"))
        finally:
            receiver.close()
        assert second.returncode == 0, second.stderr
        assert f"the spans also go to {receiver.endpoint}" in second.stderr
        assert set(_file_services(received)) == {"my-demo"}
        assert len(_task_spans(received)) == 2  # the run's demo task and process task
        tasks = [span for span in _task_spans(traces) if span["name"] == "invoke_agent demo"]
        assert len(tasks) == 2  # the first run's trace is still there
        assert len({span["traceId"] for span in tasks}) == 2
        assert second.stdout.count("with a 1,000 tokens/s model") == 1  # this run's only
        assert "2 runs so far" in second.stdout
        compare = cli("compare", str(demo_dir), str(demo_dir))
        assert compare.returncode == 0, compare.stderr
        assert "task demo: 2 runs in A, 2 in B" in compare.stdout

    def test_environment(self, tmp_path):
        env = _demo.agent_environment({"OTEL_TRACES_EXPORTER": "none"}, tmp_path)
        assert "OTEL_TRACES_EXPORTER" not in env  # the local default: the file alone
        assert env["OTEL_SERVICE_NAME"] == "agent-latency-demo"
        env = _demo.agent_environment({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:1",
                                       "OTEL_RESOURCE_ATTRIBUTES": "service.name=x"}, tmp_path)
        assert env["OTEL_TRACES_EXPORTER"] == "otlp,jsonl"
        assert "OTEL_SERVICE_NAME" not in env
        env = _demo.agent_environment({"OTEL_TRACES_EXPORTER": "console"}, tmp_path)
        assert env["OTEL_TRACES_EXPORTER"] == "console,jsonl"


# Makes the launcher's own set-up (instrument()) take a second, as it can on a loaded
# machine: none of it may be booked as the program's time.
_SLOW_SETUP = ("import time, agent_latency.configure as c\n"
               "_instrument = c.instrument\n"
               "def slow(*a, **k):\n"
               "    time.sleep(1.0)\n"
               "    return _instrument(*a, **k)\n"
               "c.instrument = slow\n")
# Makes the launcher's look at the program take _LOOK seconds before it execs it: longer
# than a Python program's own start-up (booked) on a loaded machine, 1.16 s once beside two
# busy loops and the suite's two workers; a second was not.
_LOOK = 3.0
_SLOW_LOOK = ("import time, agent_latency._run as r\n"
              "_not_python = r.not_python\n"
              "def slow(program):\n"
              f"    time.sleep({_LOOK})\n"
              "    return _not_python(program)\n"
              "r.not_python = slow\n")


class TestRunWallTime:
    """run books the program's own wall time, from its start to its exit: never the
    launcher's start-up or set-up before it."""

    def _booked(self, tmp_path: Path, pre: str, *cmd: str) -> float:
        result = cli("run", "--", *cmd, pre=pre,
                     env={"AGENT_LATENCY_DIR": str(tmp_path), "OTEL_SDK_DISABLED": ""})
        assert result.returncode == 0, result.stderr
        [task] = _task_spans(tmp_path / "traces.jsonl")
        return (int(task["endTimeUnixNano"]) - int(task["startTimeUnixNano"])) * 1e-9

    def test_native_program(self, tmp_path):
        from machine_load import busy_slack

        # busy_slack() is extra seconds (0 on a quiet machine), not a factor; the launcher's
        # set-up is made 1 s slower, so half a second tells it apart.
        assert self._booked(tmp_path, _SLOW_SETUP, "true") < 0.5 + busy_slack()
        sleep = self._booked(tmp_path / "sleep", _SLOW_SETUP, "sleep", "0.5")
        assert 0.5 <= sleep < 1.0 + busy_slack()

    def test_python_program(self, tmp_path):
        booked = self._booked(tmp_path, _SLOW_LOOK, sys.executable, "-c", "pass")
        assert booked < _LOOK  # its own start-up counts; the launcher's look does not


class TestHelpLayout:
    """--help: descriptions wrapped like the rest (no line past 100 columns), and every
    simulate option with a default shows it."""

    @pytest.mark.parametrize("command", sorted(COMMANDS))
    def test_wrapped(self, command):
        text = cli(command, "--help").stdout
        long = [line for line in text.splitlines() if len(line) > 100]
        assert long == [], long

    def test_simulate_defaults(self):
        from agent_latency.simulator._cli import build_parser

        text = cli("simulate", "--help").stdout
        for action in build_parser()._actions:
            if action.option_strings and action.default not in (None, False, [],
                                                               argparse.SUPPRESS):
                help_text = " ".join(text.split(action.option_strings[-1], 1)[1].split())
                shown = (format(action.default, "g") if isinstance(action.default, float)
                         else str(action.default))
                assert f"(default {shown})" in help_text, action.option_strings
