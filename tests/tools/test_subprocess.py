"""Process spans: one per process, from spawn to exit, whatever API started and waited it."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import time

import pytest
from opentelemetry.trace import StatusCode

import agent_latency
from agent_latency import semconv
from agent_latency.instrumentation.tools import subprocess as sp_instr


def tool_spans(otel):
    return [s for s in otel.spans() if s.name.startswith("execute_tool")]

PY = sys.executable
pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX process semantics")


def _exited(pid: int, timeout: float = 10.0) -> None:
    """Wait until the child ``pid`` has exited, leaving it for its owner to reap
    (``WNOWAIT``): a loaded machine may start and run even ``true`` late."""
    deadline = time.monotonic() + timeout
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        assert time.monotonic() < deadline, f"child {pid} still running"
        time.sleep(0.01)


def _only(otel):
    spans = tool_spans(otel)
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def test_run_is_one_span_with_pid_exit_code_and_task(subprocess_spans):
    otel = subprocess_spans
    with agent_latency.task("t"):
        done = subprocess.run(["true"], capture_output=True)
    assert done.returncode == 0
    span = _only(otel)
    assert span.name == "execute_tool true"
    a = span.attributes
    assert a[semconv.GEN_AI_TOOL_NAME] == "true"
    assert a[semconv.COMPONENT] == semconv.TOOL_EXECUTION
    assert a[semconv.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert a[semconv.GEN_AI_TOOL_TYPE] == "extension"
    assert a[semconv.TOOL_EXIT_CODE] == 0
    assert isinstance(a[semconv.TOOL_PID], int) and a[semconv.TOOL_PID] > 0
    assert semconv.TOOL_EXECUTABLE not in a  # same as the tool name
    assert semconv.TOOL_COMMAND not in a
    assert span.status.status_code == StatusCode.UNSET
    task = otel.span("invoke_agent t")
    assert span.parent.span_id == task.context.span_id
    assert task.attributes[semconv.budget_count("tool_calls")] == 1
    assert task.attributes[semconv.budget_busy(semconv.TOOL_EXECUTION)] > 0


@pytest.mark.parametrize("call", [
    lambda: subprocess.call([PY, "-c", "pass"]),
    lambda: subprocess.check_call([PY, "-c", "pass"]),
    lambda: subprocess.check_output([PY, "-c", "pass"]),
    lambda: subprocess.run([PY, "-c", "pass"], check=True),
    lambda: subprocess.getoutput(f"{PY} -c pass"),
])
def test_every_api_is_exactly_one_span(subprocess_spans, call):
    call()
    span = _only(subprocess_spans)
    assert span.attributes[semconv.TOOL_EXIT_CODE] == 0


def test_nonzero_exit_is_error_and_same_exception(subprocess_spans):
    with pytest.raises(subprocess.CalledProcessError) as info:
        subprocess.check_call([PY, "-c", "import sys; sys.exit(3)"])
    assert info.value.returncode == 3
    span = _only(subprocess_spans)
    assert span.attributes[semconv.TOOL_EXIT_CODE] == 3
    assert span.attributes[semconv.ERROR_TYPE] == "exit_code"
    assert span.status.status_code == StatusCode.ERROR


def test_spawn_failure_is_error_span_and_same_exception(subprocess_spans):
    with pytest.raises(FileNotFoundError) as info:
        subprocess.run(["/nonexistent/tool-xyz", "a"])
    assert info.value.filename == "/nonexistent/tool-xyz"
    span = _only(subprocess_spans)
    assert span.name == "execute_tool tool-xyz"
    assert span.attributes[semconv.ERROR_TYPE] == "FileNotFoundError"
    assert span.status.status_code == StatusCode.ERROR


def test_timeout_kills_and_ends_span_as_timeout(subprocess_spans):
    with pytest.raises(subprocess.TimeoutExpired) as info:
        subprocess.run([PY, "-c", "import time; time.sleep(30)"], timeout=0.3)
    assert info.value.timeout == pytest.approx(0.3, abs=0.01)
    span = _only(subprocess_spans)
    a = span.attributes
    assert a[semconv.TOOL_EXIT_CODE] == -signal.SIGKILL
    assert a[semconv.TOOL_SIGNAL] == "SIGKILL"
    assert a[semconv.TOOL_TIMED_OUT] is True
    assert a[semconv.ERROR_TYPE] == "timeout"
    assert span.status.status_code == StatusCode.ERROR
    assert (span.end_time - span.start_time) / 1e9 < 10


def test_killed_process(subprocess_spans):
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(30)"])
    proc.terminate()
    assert proc.wait() == -signal.SIGTERM
    span = _only(subprocess_spans)
    assert span.attributes[semconv.TOOL_SIGNAL] == "SIGTERM"
    assert span.attributes[semconv.ERROR_TYPE] == "SIGTERM"
    assert semconv.TOOL_TIMED_OUT not in span.attributes


def test_crashing_tool(subprocess_spans):
    proc = subprocess.run([PY, "-c", "import os; os.abort()"], stderr=subprocess.DEVNULL)
    assert proc.returncode == -signal.SIGABRT
    span = _only(subprocess_spans)
    assert span.attributes[semconv.TOOL_SIGNAL] == "SIGABRT"
    assert span.status.status_code == StatusCode.ERROR


def test_poll_loop_and_context_exit(subprocess_spans):
    with subprocess.Popen([PY, "-c", "import time; time.sleep(0.2)"]) as proc:
        while proc.poll() is None:
            time.sleep(0.02)
    assert proc.returncode == 0
    span = _only(subprocess_spans)
    assert 0.15 < (span.end_time - span.start_time) / 1e9 < 10


def test_wait_with_timeout_then_natural_exit_is_not_timeout(subprocess_spans):
    proc = subprocess.Popen([PY, "-c", "import time; time.sleep(0.3)"])
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.01)
    assert proc.wait() == 0
    span = _only(subprocess_spans)
    assert semconv.TOOL_TIMED_OUT not in span.attributes
    assert span.status.status_code == StatusCode.UNSET


def test_never_waited_ends_at_gc(subprocess_spans):
    proc = subprocess.Popen(["true"])
    pid = proc.pid
    _exited(pid)
    del proc
    gc.collect()
    span = _only(subprocess_spans)
    assert span.attributes[semconv.TOOL_PID] == pid
    assert span.attributes[semconv.TOOL_EXIT_CODE] == 0


def test_never_waited_at_exit_sweep_does_not_reap(subprocess_spans):
    done = subprocess.Popen(["true"])
    running = subprocess.Popen([PY, "-c", "import time; time.sleep(30)"])
    _exited(done.pid)
    assert sp_instr.finish_unwaited() == 2
    spans = {s.attributes[semconv.TOOL_PID]: s for s in tool_spans(subprocess_spans)}
    assert spans[done.pid].attributes[semconv.TOOL_EXIT_CODE] == 0
    assert spans[running.pid].attributes[semconv.TOOL_RUNNING_AT_EXIT] is True
    # The program still reaps its own children, with the same results.
    assert done.wait() == 0
    running.kill()
    assert running.wait() == -signal.SIGKILL
    assert len(tool_spans(subprocess_spans)) == 2


def test_os_system(subprocess_spans):
    status = os.system("exit 4")
    assert os.waitstatus_to_exitcode(status) == 4
    status = os.system("true")
    assert status == 0
    spans = tool_spans(subprocess_spans)
    assert [s.attributes[semconv.TOOL_EXIT_CODE] for s in spans] == [4, 0]
    assert spans[1].name == "execute_tool true"
    assert spans[0].attributes[semconv.TOOL_SOURCE] == "os.system"


def test_os_system_propagates_traceparent(subprocess_spans, tmp_path):
    out = tmp_path / "tp"
    with agent_latency.task("t"):
        os.system(f"echo $TRACEPARENT > {out}")
    span = _only(subprocess_spans)
    assert out.read_text().strip() == _traceparent(span)
    assert "TRACEPARENT" not in os.environ


def test_child_env_gets_traceparent_and_parent_env_untouched(subprocess_spans):
    before = dict(os.environ)
    user_env = {"PATH": os.environ["PATH"], "FOO": "bar", "TRACEPARENT": "stale"}
    user_copy = dict(user_env)
    with agent_latency.task("t"):
        out = subprocess.check_output(
            [PY, "-c", "import os; print(os.environ.get('TRACEPARENT'), os.environ['FOO'])"],
            env=user_env, text=True)
        inherited = subprocess.check_output(
            [PY, "-c", "import os; print(os.environ.get('TRACEPARENT'), 'HOME' in os.environ)"],
            text=True)
    spans = tool_spans(subprocess_spans)
    tp0, foo = out.split()
    sc = spans[0].context
    assert tp0 == f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}" and foo == "bar"
    tp1, home = inherited.split()
    assert tp1.split("-")[2] == f"{spans[1].context.span_id:016x}"
    assert home == str("HOME" in os.environ)
    assert user_env == user_copy
    assert dict(os.environ) == before


def test_capture_command_opt_in(otel, monkeypatch):
    monkeypatch.setenv(semconv.ENV_CAPTURE_COMMAND, "true")
    instrumentor = sp_instr.SubprocessInstrumentor()
    instrumentor.instrument()
    try:
        subprocess.run(["true", "--secret=x y"])
        subprocess.run("true hello", shell=True)
    finally:
        instrumentor.uninstrument()
    spans = tool_spans(otel)
    assert spans[0].attributes[semconv.TOOL_COMMAND] == "true '--secret=x y'"
    assert spans[1].attributes[semconv.TOOL_COMMAND] == "true hello"


def test_names():
    d = sp_instr.describe
    assert d(["/usr/bin/git", "status"], None, False)[0] == "git"
    assert d("pytest -q", None, True)[:2] == ("pytest", "/bin/sh")
    assert d(["bash", "-lc", "FOO=1 pytest -q"], None, False)[0] == "pytest"
    assert d([PY, "-m", "pytest"], None, False)[0] == "pytest"
    assert d([b"/bin/ls"], None, False)[0] == "ls"
    assert d(["x"], "/usr/bin/env", False)[:2] == ("x", "/usr/bin/env")
    assert d("cd /tmp && make", None, True)[0] == "cd"
    assert d(iter(["x"]), None, False)[0] == "process"  # never consumes an iterator


def test_iterator_args_still_work(subprocess_spans):
    assert subprocess.run(iter(["true"])).returncode == 0
    assert len(tool_spans(subprocess_spans)) == 1


async def test_asyncio_subprocesses(subprocess_spans):
    with agent_latency.task("t"):
        proc = await asyncio.create_subprocess_exec(PY, "-c", "import sys; sys.exit(2)")
        assert await proc.wait() == 2
        proc = await asyncio.create_subprocess_shell("echo hi", stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        assert out == b"hi\n" and proc.returncode == 0
    await asyncio.sleep(0)
    spans = tool_spans(subprocess_spans)
    assert [s.attributes[semconv.TOOL_EXIT_CODE] for s in spans] == [2, 0]
    assert spans[1].name == "execute_tool echo"
    task = subprocess_spans.span("invoke_agent t")
    assert all(s.parent.span_id == task.context.span_id for s in spans)


def test_thread_pool_calls_land_in_their_task(subprocess_spans):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        with agent_latency.task("t"):
            list(pool.map(lambda _: subprocess.run(["true"]), range(3)))
    task = subprocess_spans.span("invoke_agent t")
    spans = tool_spans(subprocess_spans)
    assert len(spans) == 3
    assert all(s.parent.span_id == task.context.span_id for s in spans)
    assert task.attributes[semconv.budget_count("tool_calls")] == 3


async def test_to_thread_and_threads_land_in_their_task(subprocess_spans):
    import threading

    with agent_latency.task("t"):
        await asyncio.to_thread(subprocess.run, ["true"])
        await asyncio.get_running_loop().run_in_executor(None, subprocess.run, ["true"])
        t = threading.Thread(target=subprocess.run, args=(["true"],))
        t.start()
        t.join()
    task = subprocess_spans.span("invoke_agent t")
    spans = tool_spans(subprocess_spans)
    assert len(spans) == 3
    assert all(s.parent.span_id == task.context.span_id for s in spans)


def test_suppressed_internal_spawns_make_no_span(subprocess_spans):
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    with suppress_instrumentation():
        subprocess.run(["true"])
        os.system("true")
    assert tool_spans(subprocess_spans) == []


def test_uninstrument_restores(otel):
    instrumentor = sp_instr.SubprocessInstrumentor()
    instrumentor.instrument()
    proc = subprocess.Popen(["true"])
    instrumentor.uninstrument()
    assert "returncode" not in subprocess.Popen.__dict__
    assert proc.wait() == 0
    subprocess.run(["true"])
    assert not hasattr(os.system, "__wrapped__")
    assert len(tool_spans(otel)) == 0 or all(
        s.attributes.get(semconv.TOOL_PID) == proc.pid for s in tool_spans(otel))


_PRINT_CONTEXT = ("import os; e = open('/proc/self/environ', 'rb').read().split(b'\\0'); "
                  "print(os.environ.get('TRACEPARENT'), "
                  "sum(x.startswith(b'TRACEPARENT=') for x in e), os.environ.get('FOO'))")


def _traceparent(span):
    sc = span.context
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}"


@pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="needs /proc")
class TestTraceContextInTheChildEnvironment:
    """Every spawn path hands the child exactly one TRACEPARENT naming its own span."""

    def _run(self, **popen):
        out = subprocess.run([PY, "-c", _PRINT_CONTEXT], capture_output=True, text=True,
                             check=True, **popen).stdout.split()
        return out[0], int(out[1]), out[2]

    def test_fork_exec_path_inherited_and_given_env(self, subprocess_spans, monkeypatch):
        monkeypatch.setenv("FOO", "inherited")
        monkeypatch.setenv("TRACEPARENT", "00-" + "1" * 32 + "-" + "2" * 16 + "-01")
        with agent_latency.task("t"):
            inherited = self._run()
            given = self._run(env={**os.environ, "FOO": "given"})
        first, second = tool_spans(subprocess_spans)
        assert inherited == (_traceparent(first), 1, "inherited")
        assert given == (_traceparent(second), 1, "given")
        assert os.environ["TRACEPARENT"] == "00-" + "1" * 32 + "-" + "2" * 16 + "-01"

    @pytest.mark.skipif(not getattr(subprocess, "_USE_POSIX_SPAWN", False),
                        reason="posix_spawn is not used for subprocess here")
    def test_posix_spawn_path(self, subprocess_spans, monkeypatch):
        monkeypatch.setenv("FOO", "inherited")
        with agent_latency.task("t"):
            # An absolute executable and close_fds=False make Popen use os.posix_spawn.
            inherited = self._run(close_fds=False)
            given = self._run(close_fds=False, env={"FOO": "given", "TRACEPARENT": "stale"})
        first, second = tool_spans(subprocess_spans)
        assert inherited == (_traceparent(first), 1, "inherited")
        assert given == (_traceparent(second), 1, "given")

    def test_environment_copy_where_fork_exec_cannot_be_hooked(self, otel, monkeypatch):
        # Python 3.10 calls _posixsubprocess.fork_exec directly: a copy of the environment.
        monkeypatch.delattr(subprocess, "_fork_exec", raising=False)
        monkeypatch.setenv("FOO", "inherited")
        instrumentor = sp_instr.SubprocessInstrumentor()
        instrumentor.instrument()
        try:
            assert not instrumentor._hooked
            monkeypatch.undo()  # Popen needs its _fork_exec back; our hook was never put in
            monkeypatch.setenv("FOO", "inherited")
            with agent_latency.task("t"):
                inherited = self._run()
        finally:
            instrumentor.uninstrument()
        assert inherited == (_traceparent(_only(otel)), 1, "inherited")

    def test_threads_each_get_their_own_span(self, subprocess_spans):
        from concurrent.futures import ThreadPoolExecutor

        with agent_latency.task("t"), ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(lambda _: self._run()[0], range(16)))
        spans = tool_spans(subprocess_spans)
        assert sorted(seen) == sorted(_traceparent(s) for s in spans)
        assert len(set(seen)) == 16

    def test_uninstrument_restores_fork_exec(self, otel):
        real = getattr(subprocess, "_fork_exec", None)
        instrumentor = sp_instr.SubprocessInstrumentor()
        instrumentor.instrument()
        try:
            if real is not None:
                assert subprocess._fork_exec is not real
        finally:
            instrumentor.uninstrument()
        assert getattr(subprocess, "_fork_exec", None) is real
        assert subprocess.run([PY, "-c", "pass"]).returncode == 0

    def test_propagation_off_leaves_the_environment_alone(self, otel, monkeypatch):
        monkeypatch.setenv(semconv.ENV_PROPAGATE, "false")
        instrumentor = sp_instr.SubprocessInstrumentor()
        instrumentor.instrument()
        try:
            with agent_latency.task("t"):
                traceparent, count, _ = self._run()
        finally:
            instrumentor.uninstrument()
        assert (traceparent, count) == ("None", 0)


class TestLibraryProbes:
    """Processes the runtime or an SDK starts for itself are not tools."""

    def test_platform_probe_is_not_a_tool(self, subprocess_spans):
        import platform

        probe = getattr(platform, "_Processor", None)
        if probe is None or not hasattr(probe, "from_subprocess"):
            pytest.skip("this Python's platform module does not spawn uname")
        with agent_latency.task("t"):
            probe.from_subprocess()
            subprocess.run(["true"])
        assert [s.name for s in tool_spans(subprocess_spans)] == ["execute_tool true"]
        task = subprocess_spans.span("invoke_agent t")
        assert task.attributes[semconv.budget_count("tool_calls")] == 1

    def test_process_started_by_an_import_is_not_a_tool(self, subprocess_spans, tmp_path,
                                                        monkeypatch):
        (tmp_path / "probing_library.py").write_text(
            "import subprocess\nVERSION = subprocess.run(['true']).returncode\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        import probing_library  # noqa: F401 - like GitPython running `git version`

        subprocess.run(["true"])
        assert len(tool_spans(subprocess_spans)) == 1

    def test_process_started_while_an_llm_call_is_sent_is_not_a_tool(self, subprocess_spans):
        from agent_latency.instrumentation.net import CURRENT

        token = CURRENT.set(object())
        try:
            subprocess.run(["true"])
        finally:
            CURRENT.reset(token)
        assert tool_spans(subprocess_spans) == []
