"""The report commands as a new user meets them after ``agent-latency demo``: the demo's
traces found without a path, a helpful unknown-tool error, ``--service`` with a Jaeger URL,
unknown token counts shown as unknown, and ``compare``'s warnings once, its counts in
words and its first-token row."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from test_cli import write_fleet

from agent_latency import semconv

ROOT = Path(__file__).resolve().parents[2]
#: From write_fleet's 2023 to half an hour ago.
_SHIFT_NS = time.time_ns() - 1_700_000_000 * 10**9 - 30 * 60 * 10**9


def cli(*args: str, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``agent-latency ARGS`` in a fresh interpreter, without the caller's OTLP settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    return subprocess.run([sys.executable, "-m", "agent_latency", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**clean, **(env or {})})


class TestDemoTracesByDefault:
    """No SOURCE and no .agent-latency/traces.jsonl yet: report and whatif read the demo's
    traces and say so; the program's own file, once it exists, wins."""

    @pytest.mark.parametrize("args", [("report", "--json"), ("whatif", "--json",
                                                               "--output-tps", "1000")])
    def test_demo_traces_read_and_named(self, tmp_path, args):
        demo = tmp_path / ".agent-latency" / "demo"
        demo.mkdir(parents=True)
        write_fleet(demo / "traces.jsonl")
        result = cli(*args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        (note,) = result.stderr.splitlines()
        assert "no .agent-latency/traces.jsonl yet" in note
        assert ".agent-latency/demo/traces.jsonl" in note
        rows = json.loads(result.stdout)["tasks"] if args[0] == "report" else \
            result.stdout.splitlines()
        assert len(rows) == 12

    def test_own_traces_win(self, tmp_path):
        demo = tmp_path / ".agent-latency" / "demo"
        demo.mkdir(parents=True)
        write_fleet(demo / "traces.jsonl")
        write_fleet(tmp_path / ".agent-latency" / "traces.jsonl", tasks=3)
        result = cli("report", "--json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        assert len(json.loads(result.stdout)["tasks"]) == 3


class TestUnknownTool:
    """--tool-speedup NAME=K with a tool no task ran: one line naming the tools there are
    and how to write the option for them."""

    def test_the_error_shows_how(self, tmp_path):
        path = tmp_path / "fleet.jsonl"
        write_fleet(path)
        result = cli("whatif", "--tool-speedup", "pytst=2", str(path))
        assert result.returncode == 2
        (line,) = result.stderr.splitlines()
        assert "'pytst', not a tool of the 12 tasks in" in line
        assert "tools seen: grep, pytest (--tool-speedup grep=2 halves grep's time, " \
               "--tool-speedup 2 every tool's)" in line


class TestJaegerService:
    """report's own --help example: a Jaeger URL without ?service= and --service NAME asks
    Jaeger for that service (a real Jaeger, fed over OTLP/HTTP)."""

    def test_service_option_names_the_jaeger_service(self, tmp_path):
        from production._servers import Jaeger
        from production._stack import wait_for

        jaeger = Jaeger(tmp_path)
        try:
            fleet = tmp_path / "fleet.jsonl"
            write_fleet(fleet)
            for line in fleet.read_text().splitlines():
                # Moved to the last hour: Jaeger's query looks back an hour by default.
                line = re.sub(r'"(start|end)TimeUnixNano": "(\d+)"', lambda m: (
                    f'"{m.group(1)}TimeUnixNano": "{int(m.group(2)) + _SHIFT_NS}"'), line)
                request = urllib.request.Request(
                    jaeger.otlp_http + "/v1/traces", data=line.encode(),
                    headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=10) as response:
                    assert response.status == 200
            source = "jaeger+" + jaeger.query.replace("127.0.0.1", "localhost")

            def stored() -> bool:
                result = cli("report", source, "--service", "a", "--json")
                return result.returncode == 0 and len(json.loads(result.stdout)["tasks"]) == 6

            wait_for(stored, 30, "the fleet's service a in Jaeger")
            both = cli("report", source, "--service", "a", "--service", "b", "--json")
            assert both.returncode == 0, both.stderr
            assert len(json.loads(both.stdout)["tasks"]) == 12
            named = cli("report", source + "?service=b", "--json")
            assert len(json.loads(named.stdout)["tasks"]) == 6
        finally:
            jaeger.stop()


# A streamed chat completion without stream_options={"include_usage": True}: the server
# sends no usage, so the call's output token count is not known.
_NO_USAGE_AGENT = textwrap.dedent("""
    import openai
    import agent_latency
    from agent_latency.simulator import Simulator, SimulatorConfig

    agent_latency.instrument()
    with Simulator(SimulatorConfig(output_tps=400.0, default_output_tokens=30)) as sim:
        client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
        with agent_latency.task("no-usage"):
            for _ in client.chat.completions.create(
                    model="sim-model", stream=True,
                    messages=[{"role": "user", "content": "hi"}]):
                pass
""")


@pytest.fixture(scope="module")
def no_usage(tmp_path_factory) -> Path:
    """A trace of one streamed call whose output token count the server never sent."""
    root = tmp_path_factory.mktemp("no-usage")
    (root / "agent.py").write_text(_NO_USAGE_AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
    env[semconv.ENV_PROCESS_TASK] = "false"
    result = subprocess.run([sys.executable, "agent.py"], cwd=root, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    path = root / ".agent-latency" / "traces.jsonl"
    spans = [span for line in path.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"]
             for span in ss["spans"]]
    keys = {a["key"] for span in spans for a in span.get("attributes", ())}
    assert semconv.LLM_TTFT in keys  # streamed, measured
    assert semconv.GEN_AI_USAGE_OUTPUT_TOKENS not in keys  # and no usage came
    return path


class TestUnknownTokens:
    """A call whose output token count is unknown shows "unknown", never 0 tokens or a
    bare dash, in the text and the HTML report and in --json (null)."""

    def test_text(self, no_usage):
        result = cli("report", str(no_usage))
        assert result.returncode == 0, result.stderr
        slowest = result.stdout.split("slowest LLM calls", 1)[1].splitlines()[1]
        assert " 0 out tokens" not in slowest
        assert "unknown out tokens" in slowest
        model = result.stdout.split("per model", 1)[1].splitlines()[2]
        assert model.split()[-2:] == ["unknown", "unknown"], model
        assert "1 of 1 LLM calls reported no token counts" in result.stdout

    def test_json(self, no_usage):
        result = cli("report", "--json", str(no_usage))
        summary = json.loads(result.stdout)["summary"]
        [call] = summary["slowest"]["llm_calls"]
        assert call["output_tokens"] is None
        [model] = summary["by_model"].values()
        assert model["output_tokens"] is None and model["calls_without_usage"] == 1

    def test_html(self, no_usage, tmp_path):
        page = tmp_path / "r.html"
        result = cli("report", str(no_usage), "--html", str(page))
        assert result.returncode == 0, result.stderr
        html = page.read_text()
        models = html.split("<th>output tokens</th></tr>", 1)[1].split("</tr>", 1)[0]
        assert "<td>0</td>" not in models and "unknown" in models
        calls = html.split('<table class="slowest slowest-calls">', 1)[1].split("</table>", 1)[0]
        assert "unknown" in calls and "<td>0</td>" not in calls


class TestCompareWords:
    """compare A B: each warning once (in the table, not again on stderr), "1 run", and a
    first-token row in the text and on the HTML page."""

    def test_once_and_in_words(self, tmp_path):
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        write_fleet(a, tasks=1)  # one "fix" run
        write_fleet(b, tasks=2)  # two "fix" runs
        page = tmp_path / "c.html"
        result = cli("compare", str(a), str(b), "--html", str(page))
        assert result.returncode == 0, result.stderr
        both = result.stdout + result.stderr
        assert both.count("too few runs to say") == 1, both
        assert result.stderr == ""
        assert "task fix: 1 run in A, 2 in B" in result.stdout
        first = next(line for line in result.stdout.splitlines()
                     if line.strip().startswith("first token"))
        assert first.split()[2:4] == ["0.110", "0.115"]  # A's median, B's median (s)
        html = page.read_text()
        assert "(1 run in A, 2 in B)" in html
        assert "<tr><td>first token</td><td>0.110</td><td>0.115</td>" in html
        assert html.count("too few runs to say") == 1

    def test_json_has_the_first_token(self, tmp_path):
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        write_fleet(a, tasks=1)
        write_fleet(b, tasks=2)
        result = cli("compare", str(a), str(b), "--json")
        [task] = json.loads(result.stdout)["tasks"]
        assert task["metrics"]["first_token"]["median_b"] == pytest.approx(0.115)
