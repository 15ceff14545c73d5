"""Every command example in README.md, docs/*.md and each subcommand's ``--help`` runs as
written, and succeeds.

The examples are read from the text itself: the command lines of the fenced blocks (``sh``
blocks, and ``agent-latency …`` lines of plain blocks; shown output is not a command) and
the ``examples:`` section of ``agent-latency --help`` and of each ``agent-latency COMMAND
--help``.  Each runs in a sandbox directory, in its document's order, with what a user
would have around it:

* the simulator (scripted coding turns) as the LLM, ``OPENAI_BASE_URL`` pointing at it;
* ``my_agent.py`` / ``agent.py``: the demo agent (the openai SDK, streamed calls, a
  ``run_shell`` tool), the user's program of the examples;
* README.md and each guide start from an empty directory (the demo, then ``report``, as a
  new user goes); the reference examples (docs/report.md and ``--help``) run where runs of
  the task and service names they use are stored — renamed copies of a real run of the
  agent — and a real Jaeger (``make servers``) holds some, for the ``jaeger+http://``
  examples and the OTLP endpoints, its addresses put in for the documented ones.

Ports the examples name (8000, 4317, 4318, 16686) are replaced by free ones.  Commands a
test cannot run are checked instead, and the test states how many of each kind it saw: an
install (the extras named exist), a ``make`` target (it exists), the Compose stack (its
file exists), and other programs (aider, mini-swe-agent, a Gemini agent of the user's:
``tests/acceptance`` runs the agents under ``agent-latency run``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_latency.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Documents whose examples run where the reference runs are stored (the others start empty).
REFERENCE = {"docs/report.md", "--help"}
_FENCE = re.compile(r"^\s*```(\S*)\s*$")
_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")
#: First words of a command line (after VAR=value assignments).
_PROGRAMS = {"agent-latency", "python", "pip", "make", "docker", "my-agent",
             "my-gemini-agent", ".venv/bin/python", "…"}
#: Programs the examples start that a test does not run, and why.
EXTERNAL = {
    "aider": "aider against a model: tests/acceptance runs it under agent-latency run",
    "mini-swe-agent": "mini-swe-agent against a model: tests/acceptance runs it",
    "my-gemini-agent": "the user's own Gemini agent: tests/simulator covers the Gemini API",
}
#: The free ports put in for the ports the examples name.
_NAMED_PORTS = ("8000", "4317", "4318", "16686")


@dataclass(frozen=True)
class Example:
    """One command line and where it is written (``README.md:15``, ``demo --help``)."""

    where: str
    line: str

    @property
    def document(self) -> str:
        return self.where.rsplit(":", 1)[0] if ":" in self.where else "--help"


def document_examples() -> list[Example]:
    """The command lines of README.md's and docs/*.md's fenced blocks, in order."""
    found = []
    for path in DOCUMENTS:
        name = str(path.relative_to(ROOT))
        language: str | None = None
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            fence = _FENCE.match(raw)
            if fence:
                language = (fence.group(1) or "plain") if language is None else None
                continue
            if language not in ("sh", "plain"):
                continue
            line = raw.strip()
            words = _words(line)
            if not words or line.startswith("#"):
                continue
            if language == "plain" and (raw[:1].isspace() or words[0] not in _PROGRAMS
                                        or (words[0] == "agent-latency"
                                        and (len(words) < 2 or words[1] not in COMMANDS))):
                continue  # output shown or a diagram (indented), not a command
            found.append(Example(f"{name}:{number}", line))
    return found


def _words(line: str) -> list[str]:
    """The line's words after its VAR=value assignments (none when it is no command)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return []
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)
    return words


def help_examples() -> list[Example]:
    """The ``examples:`` lines of ``agent-latency --help`` and each command's ``--help``."""
    found = []
    for command in ["", *COMMANDS]:
        result = subprocess.run([sys.executable, "-m", "agent_latency",
                                 *([command] if command else []), "--help"],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        section = result.stdout.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0]
        found += [Example(f"{command or 'agent-latency'} --help", line.strip())
                  for line in section.splitlines() if line.startswith("  agent-latency ")]
    return found


# -- the sandboxes -------------------------------------------------------------------------
def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}


@dataclass
class World:
    """What the examples run against: the simulator, Jaeger (or None), the free ports put
    in for the named ones, and the reference runs' directory."""

    simulator: str
    jaeger_query: str | None
    jaeger_otlp_http: str | None
    jaeger_otlp_grpc: str | None
    ports: dict[str, str]
    store: Path
    tmp: Path

    def env(self) -> dict[str, str]:
        return {**_clean_env(), "OPENAI_BASE_URL": self.simulator + "/v1",
                "OPENAI_API_KEY": "sk-simulator"}

    def rewrite(self, line: str) -> str:
        """The line with the test's addresses for the ones it names."""
        if self.jaeger_query:
            line = re.sub(r"(localhost|jaeger|127\.0\.0\.1):16686",
                          self.jaeger_query.split("://", 1)[1], line)
        if self.jaeger_otlp_http:
            line = line.replace("http://127.0.0.1:4318", self.jaeger_otlp_http)
        if self.jaeger_otlp_grpc:
            line = line.replace("http://127.0.0.1:4317", "http://" + self.jaeger_otlp_grpc)
        line = line.replace("http://127.0.0.1:8000", self.simulator)
        for port, free in self.ports.items():
            line = re.sub(rf"(?<=[:= ]){port}\b", free, line)
        return line


def _free_port() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _agent_source() -> str:
    return (ROOT / "examples" / "demo_agent.py").read_text()


def _spans(lines: list[str]) -> Iterator[dict]:
    for line in lines:
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                yield from ss["spans"]


def renamed_runs(lines: list[str], task: str, service: str, runs: int,
                 ago_s: float = 600.0) -> list[str]:
    """``runs`` copies of a recorded run (OTLP/JSON lines), each with a trace id of its own,
    its task named ``task``, its service ``service``, started ``ago_s`` seconds ago or
    later."""
    first = min(int(s["startTimeUnixNano"]) for s in _spans(lines))
    out = []
    for run in range(runs):
        trace_id = secrets.token_hex(16)
        shift = time.time_ns() - int(ago_s * 1e9) + run * 10**9 - first
        for line in lines:
            doc = json.loads(line)
            for rs in doc["resourceSpans"]:
                rs["resource"]["attributes"] = [
                    a for a in rs["resource"].get("attributes", ())
                    if a["key"] != "service.name"] + [
                    {"key": "service.name", "value": {"stringValue": service}}]
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        span["traceId"] = trace_id
                        for key in ("startTimeUnixNano", "endTimeUnixNano"):
                            span[key] = str(int(span[key]) + shift)
                        for a in span.get("attributes", ()):
                            if a["key"] == "agent_latency.task.name" and \
                                    a["value"].get("stringValue") == "demo":
                                a["value"]["stringValue"] = task
                                span["name"] = f"invoke_agent {task}"
            out.append(json.dumps(doc))
    return out


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.writelines(line + "\n" for line in lines)


def _start_jaeger(tmp: Path):
    """A real Jaeger from `make servers`, or None where it is not built (the production
    tests' rule: a failure where the servers are promised, AGENT_LATENCY_SERVERS or CI)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from production._servers import Jaeger, servers_dir

    if not (servers_dir() / "jaeger").is_file() and not (
            os.environ.get("CI") or os.environ.get("AGENT_LATENCY_SERVERS")):
        return None
    return Jaeger(tmp)


def _post_otlp(url: str, lines: list[str]) -> None:
    for line in lines:
        request = urllib.request.Request(url + "/v1/traces", data=line.encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200


def _wait_for_services(query: str, services: set[str]) -> None:
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(query + "/api/services", timeout=10) as response:
            if services <= set(json.loads(response.read())["data"] or ()):
                return
        assert time.monotonic() < deadline, f"Jaeger never listed {services}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    from agent_latency.simulator import SimulatorConfig, SimulatorProcess

    tmp = tmp_path_factory.mktemp("examples")
    script = ROOT / "examples" / "scripts" / "coding_agent.json"
    jaeger = _start_jaeger(tmp)
    try:
        with SimulatorProcess(SimulatorConfig(port=0, script=str(script),
                                              prefill_tps=20000, output_tps=1000)) as sim:
            store = tmp / "store"
            store.mkdir()
            (store / "agent.py").write_text(_agent_source())
            (store / "my_agent.py").write_text(_agent_source())
            # One real run of the agent; the stored runs are renamed copies of it.
            seed = tmp / "seed"
            recorded = subprocess.run(
                [sys.executable, str(store / "agent.py")], cwd=store, timeout=300,
                capture_output=True, text=True,
                env={**_clean_env(), "OPENAI_BASE_URL": sim.base_url + "/v1",
                     "OPENAI_API_KEY": "sk-simulator", "AGENT_LATENCY_DIR": str(seed)})
            assert recorded.returncode == 0, recorded.stderr[-3000:]
            run = (seed / "traces.jsonl").read_text().splitlines()
            for path, task, service in (
                    (".agent-latency/traces.jsonl", "fix", "agent"),
                    (".agent-latency/traces.jsonl", "fix-tests", "my-agent"),
                    ("run1/traces.jsonl", "fix-tests", "my-agent"),
                    ("runs/a.jsonl", "fix", "agent"), ("runs/b/traces.jsonl", "fix", "agent"),
                    ("runs/baseline/traces.jsonl", "fix-bug", "agent"),
                    ("runs/persistent-connection/traces.jsonl", "fix-bug", "agent"),
                    ("A/traces.jsonl", "fix-bug", "agent"), ("B/traces.jsonl", "fix-bug", "agent"),
                    ("base.jsonl", "fix-bug", "agent"),
                    ("before/traces.jsonl", "fix-tests", "my-agent"),
                    ("after/traces.jsonl", "fix-tests", "my-agent")):
                _write(store / path, renamed_runs(run, task, service, runs=2))
            if jaeger is not None:
                _post_otlp(jaeger.otlp_http, renamed_runs(run, "fix-bug", "agent", runs=2)
                           + renamed_runs(run, "fix-tests", "my-agent", runs=2))
                _wait_for_services(jaeger.query, {"agent", "my-agent"})
            yield World(
                simulator=sim.base_url, store=store, tmp=tmp,
                jaeger_query=jaeger.query if jaeger else None,
                jaeger_otlp_http=jaeger.otlp_http if jaeger else None,
                jaeger_otlp_grpc=jaeger.otlp_grpc if jaeger else None,
                ports={port: _free_port() for port in _NAMED_PORTS})
    finally:
        if jaeger is not None:
            jaeger.stop()


# -- running one example -------------------------------------------------------------------
@dataclass
class Outcome:
    """How one example went: ``ran`` (exit 0), ``checked`` (a command not run, its target
    checked), or ``not run`` with the reason; ``failed`` with the output when it failed."""

    example: Example
    kind: str
    detail: str = ""
    seconds: float = 0.0


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pyproject_extras() -> set[str]:
    return set(_pyproject()["optional-dependencies"])


def _version() -> str:
    """The version a wheel built from this tree has."""
    return str(_pyproject()["version"])


def check_not_run(example: Example, words: list[str]) -> Outcome | None:
    """The commands a test does not run, checked; None for one to run."""
    program = words[0]
    if program == "pip":
        target = next(w for w in words[2:] if not w.startswith("-"))
        base, _, extras = target.partition("[")
        assert base in (".", f"dist/agent_latency-{_version()}-py3-none-any.whl"), example
        unknown = set(extras.rstrip("]").split(",")) - _pyproject_extras() - {""}
        assert not unknown, f"{example.where}: no such extra {unknown}"
        return Outcome(example, "checked", "an install: its extras exist")
    if program == "make":
        makefile = (ROOT / "Makefile").read_text()
        assert re.search(rf"^{re.escape(words[1])}:", makefile, re.M), example
        return Outcome(example, "checked", f"make {words[1]}: the target exists")
    if program == "docker":
        assert (ROOT / "docker-compose.yml").is_file()
        return Outcome(example, "checked", "the Compose stack: tests/production checks it")
    if program == ".venv/bin/python":
        assert (ROOT / words[-2]).exists() if words[-1] == "-q" else True, example
        return Outcome(example, "checked", "the production tests: this suite runs them")
    for word in words:
        if word in EXTERNAL:
            return Outcome(example, "not run", EXTERNAL[word])
    return None


def run_example(world: World, example: Example, cwd: Path) -> Outcome:
    """Run one example line in ``cwd`` (its ``&&`` parts in turn); its outcome."""
    line = world.rewrite(example.line)
    outcome = check_not_run(example, _words(line))
    if outcome is not None:
        return outcome
    for part in " ".join(shlex.split(line, comments=True)).split(" && "):
        failed = _run_part(world, part, cwd)
        if failed:
            return Outcome(example, "failed", failed)
    return Outcome(example, "ran")


def _run_part(world: World, part: str, cwd: Path) -> str:
    """Run one command; the failure in words ("" when it succeeded)."""
    words = shlex.split(part)
    env = world.env()
    while _ASSIGNMENT.match(words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    stdout_path = None
    if ">" in words:
        at = words.index(">")
        stdout_path, words = cwd / words[at + 1], words[:at]
    if words[0] in ("my-agent", "…"):
        words = ["python", "my_agent.py", *words[1:]]
    if words[0] == "python":
        words[0] = sys.executable
    elif words[0] == "agent-latency":
        words = [sys.executable, "-m", "agent_latency", *words[1:]]
    if "run" in words[3:4]:  # run -- python …: our interpreter
        words = [sys.executable if w == "python" else w for w in words]
    if words[3:4] == ["simulate"]:
        return _run_server(words, env, cwd)
    result = subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=300)
    if stdout_path is not None:
        stdout_path.write_text(result.stdout)
    if result.returncode != 0:
        return f"exit status {result.returncode}: {result.stderr[-2000:]}"
    return ""


def _run_server(words: list[str], env: dict[str, str], cwd: Path) -> str:
    """``agent-latency simulate …``: serves until stopped; it must come up and answer."""
    if "--port" not in words:
        words += ["--port", _free_port()]
    proc = subprocess.Popen(words, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"listening on (http://\S+)", line)
        if not match:
            return f"no 'listening on' line: {line}{proc.stdout.read()[-2000:]}"
        with urllib.request.urlopen(match.group(1) + "/v1/models", timeout=30) as response:
            if response.status != 200:
                return f"/v1/models answered {response.status}"
        proc.send_signal(signal.SIGINT)
        status = proc.wait(timeout=60)
        return "" if status == 0 else f"exit status {status} after SIGINT"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_every_example_runs(world: World, tmp_path: Path):
    from concurrent.futures import ThreadPoolExecutor

    examples = document_examples() + help_examples()
    # Each sandbox's examples in order; the sandboxes side by side.
    groups: dict[Path, list[int]] = {}
    for i, example in enumerate(examples):
        if example.document in REFERENCE:
            cwd = world.store
        else:  # a guide starts as a new user does: an empty directory
            cwd = tmp_path / example.document.replace("/", "_")
            if not cwd.exists():
                cwd.mkdir()
                (cwd / "my_agent.py").write_text(_agent_source())
        groups.setdefault(cwd, []).append(i)
    outcomes: list[Outcome | None] = [None] * len(examples)

    def run_group(cwd: Path, indices: list[int]) -> None:
        for i in indices:
            example = examples[i]
            started = time.monotonic()
            if world.jaeger_query is None and re.search(r":(16686|4317|4318)\b", example.line):
                outcome = Outcome(example, "not run", "Jaeger is not built (make servers)")
            else:
                outcome = run_example(world, example, cwd)
            outcome.seconds = time.monotonic() - started
            outcomes[i] = outcome

    with ThreadPoolExecutor(max_workers=4) as pool:
        for future in [pool.submit(run_group, cwd, indices) for cwd, indices in groups.items()]:
            future.result()
    done = [o for o in outcomes if o is not None]
    counts: dict[str, int] = {}
    for outcome in done:
        counts[outcome.kind] = counts.get(outcome.kind, 0) + 1
    report = [f"{o.kind:>8} {o.seconds:5.1f} s  {o.example.where:<24} {o.example.line}"
              + (f"\n          {o.detail}" if o.detail and o.kind != "ran" else "")
              for o in done]
    print(f"\n{len(done)} examples: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    print("\n".join(report))
    failed = [o for o in done if o.kind == "failed"]
    assert not failed, "\n".join(
        f"{o.example.where}: {o.example.line}\n  {o.detail}" for o in failed)
    assert counts.get("ran", 0) >= 50, counts  # the examples were found and run


def test_the_extractor_sees_commands_not_output():
    found = {e.line for e in document_examples()}
    assert "agent-latency demo" in found
    assert not any(line.startswith(("task ", "agent-latency simulate:")) for line in found)
    assert any(e.where == "demo --help" for e in help_examples())
    assert shutil.which("sh")  # the && examples are split here, as sh would run them
