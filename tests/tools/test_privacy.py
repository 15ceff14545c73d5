"""No content by default: command lines are named by their program only (shell quoting
understood), and error messages of tools, processes, tasks and LLM calls reach a span only
with their capture switch on (the exception type always)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from opentelemetry.trace import StatusCode

import agent_latency
from agent_latency import semconv
from agent_latency.instrumentation.tools import subprocess as sp_instr

SECRET = "CANARY-privacy-5f3a"
pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX process semantics")


def _everything(span) -> str:  # type: ignore[no-untyped-def]
    """Every string a span would export: name, attributes, status, events."""
    parts = [span.name, repr(dict(span.attributes or {})), str(span.status.description)]
    for event in span.events:
        parts += [event.name, repr(dict(event.attributes or {}))]
    return "\n".join(parts)


@pytest.fixture
def instrumented(otel):  # type: ignore[no-untyped-def]
    """The subprocess instrumentation on the in-memory SDK (switches read at instrument())."""
    instrumentor = sp_instr.SubprocessInstrumentor()
    started = []

    def start() -> None:
        instrumentor.instrument()
        started.append(True)

    yield otel, start
    if started:
        instrumentor.uninstrument()


class TestProgramNames:
    """A command line is split with the shell's rules; only the program's base name stays."""

    @pytest.mark.parametrize("command,name", [
        (f'AUTH="Bearer {SECRET}" true', "true"),
        (f"AUTH='Bearer {SECRET}' TOKEN={SECRET} /usr/bin/curl -s x", "curl"),
        (f"env -u HOME KEY={SECRET} make test", "make"),
        (f"sudo -u root env A={SECRET} pytest -q", "pytest"),
        ("nice -n 5 nohup exec ls -la", "ls"),
        (f'echo "unclosed {SECRET}', "sh"),
        (f"A\\ B={SECRET} ls", "sh"),  # not an assignment: the shell runs "A B=..."
        ("", "sh"),
        (f"X={SECRET}", "sh"),
        ("FOO=1 pytest -q", "pytest"),
        ("cd /tmp && make", "cd"),
    ])
    def test_first_word(self, command, name) -> None:
        assert sp_instr._first_word(command) == name

    def test_argv_wrappers(self) -> None:
        assert sp_instr.describe(["env", f"TOKEN={SECRET}", "/usr/bin/make", "all"], None,
                                 False)[0] == "make"
        assert sp_instr.describe(["sudo", "-u", "bob", "git", "push"], None, False)[0] == "git"

    def test_os_system_span_has_no_secret(self, instrumented) -> None:
        otel, start = instrumented
        start()
        os.system(f'AUTH="Bearer {SECRET}" true')
        subprocess.run(f"TOKEN='{SECRET}' true --flag", shell=True)
        subprocess.run(["bash", "-c", f'AUTH="x {SECRET}" true'])
        spans = [s for s in otel.spans() if s.name.startswith("execute_tool")]
        assert [s.name for s in spans] == ["execute_tool true"] * 3
        for span in spans:
            assert SECRET not in _everything(span)


class TestErrorMessages:
    """Exception messages (status, ``exception.message``, stack trace) only with capture."""

    def _failing_tool_run(self, otel) -> tuple:  # type: ignore[no-untyped-def]
        with pytest.raises(subprocess.CalledProcessError):
            with agent_latency.task("t"), agent_latency.tool("runner"):
                subprocess.run([sys.executable, "-c", "raise SystemExit(3)",
                                f"--token={SECRET}"], check=True)
        spans = {s.name: s for s in otel.spans()}
        return spans["execute_tool runner"], spans["invoke_agent t"]

    def test_off_by_default(self, instrumented, monkeypatch) -> None:
        monkeypatch.delenv(semconv.ENV_CAPTURE_COMMAND, raising=False)
        otel, start = instrumented
        start()
        tool_span, task_span = self._failing_tool_run(otel)
        for span in (tool_span, task_span):
            assert span.status.status_code is StatusCode.ERROR
            assert span.attributes[semconv.ERROR_TYPE] == "CalledProcessError"
            assert SECRET not in _everything(span)
            (event,) = [e for e in span.events if e.name == "exception"]
            assert event.attributes["exception.type"] == "CalledProcessError"
            assert "exception.message" not in event.attributes
            assert "exception.stacktrace" not in event.attributes
        for span in otel.spans():
            assert SECRET not in _everything(span), span.name

    def test_on_with_command_capture(self, instrumented, monkeypatch) -> None:
        monkeypatch.setenv(semconv.ENV_CAPTURE_COMMAND, "true")
        otel, start = instrumented
        start()
        tool_span, _ = self._failing_tool_run(otel)
        assert SECRET in tool_span.status.description
        (event,) = [e for e in tool_span.events if e.name == "exception"]
        assert SECRET in event.attributes["exception.message"]
        assert "Traceback" in event.attributes["exception.stacktrace"]

    def test_spawn_failure(self, instrumented, monkeypatch) -> None:
        monkeypatch.delenv(semconv.ENV_CAPTURE_COMMAND, raising=False)
        otel, start = instrumented
        start()
        with pytest.raises(OSError):
            subprocess.run([f"/nonexistent/{SECRET}/prog", "x"])
        (span,) = [s for s in otel.spans() if s.name.startswith("execute_tool")]
        assert span.attributes[semconv.ERROR_TYPE] == "FileNotFoundError"
        assert span.status.description == "FileNotFoundError"
        assert SECRET not in span.status.description

    def test_task_message(self, otel, monkeypatch) -> None:
        monkeypatch.delenv(semconv.ENV_CAPTURE_COMMAND, raising=False)
        with pytest.raises(RuntimeError), agent_latency.task("t"):
            raise RuntimeError(f"failed with key {SECRET}")
        (span,) = otel.spans()
        assert SECRET not in _everything(span)
        assert span.status.description == "RuntimeError"


class TestLLMErrors:
    """An SDK error's message (prompt text, a URL with credentials) follows content capture."""

    @pytest.fixture
    def openai_setup(self, otel, monkeypatch):  # type: ignore[no-untyped-def]
        """``start(capture)``: the content switch set, then the instrumented SDK and a
        simulator (the switch is read when the instrumentation is set up)."""
        openai = pytest.importorskip("openai")
        from agent_latency.instrumentation.llm.openai import OpenAIInstrumentor
        from agent_latency.simulator import Simulator, SimulatorConfig

        sim = Simulator(SimulatorConfig(prefill_tps=1e6, output_tps=1e5)).start()
        instrumentor = OpenAIInstrumentor()

        def start(capture: bool):  # type: ignore[no-untyped-def]
            monkeypatch.setenv(semconv.ENV_CAPTURE_MESSAGE_CONTENT, str(capture).lower())
            instrumentor.instrument()
            return openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-x", max_retries=0)

        try:
            yield otel, start, openai
        finally:
            instrumentor.uninstrument()
            sim.stop()

    def _call(self, client, openai) -> None:  # type: ignore[no-untyped-def]
        # a 400 whose message quotes the bad value back, as real APIs quote prompt text
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}],
                extra_body={"simulator": {"fault": f"{SECRET}"}})

    def test_off_by_default(self, openai_setup) -> None:
        otel, start, openai = openai_setup
        self._call(start(False), openai)
        (span,) = [s for s in otel.spans() if s.name.startswith("chat")]
        assert span.attributes[semconv.ERROR_TYPE] == "BadRequestError"
        assert span.status.description == "BadRequestError"
        assert SECRET not in _everything(span)

    def test_on_with_content_capture(self, openai_setup) -> None:
        otel, start, openai = openai_setup
        self._call(start(True), openai)
        (span,) = [s for s in otel.spans() if s.name.startswith("chat")]
        assert SECRET in span.status.description
        (event,) = [e for e in span.events if e.name == "exception"]
        assert SECRET in event.attributes["exception.message"]
