"""A fleet of agent processes, as coding agents run one process per task: each process
instruments itself, runs its task (a streamed LLM call, then a tool), and exits, which is
when it exports its spans and metrics (to where the ``OTEL_*`` variables say).  With
``SECONDS`` above 0 each one stays, running a task after another until that many seconds
have passed: a long-lived agent, exporting every ``OTEL_METRIC_EXPORT_INTERVAL``.

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:PORT \\
    python fleet_agent.py BASE_URL PREFILL_TPS MODEL OUT PROCESSES AT_ONCE SECONDS

The processes are forked from this one after it imported the SDKs (on a loaded 2-core
machine the imports alone take seconds, which would be most of the test's time): each child
is a process of its own, with its own resource (``service.instance.id``), that calls
``instrument()``, runs, and ends through its exit hooks (``atexit``: the flush).  At most
``AT_ONCE`` live at a time.  OUT gets one JSON line per task (its trace id, the first-token
time the agent saw), then one with every process's lifetime.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import pkgutil
import sys
import time
import traceback

import openai
from opentelemetry import trace

import agent_latency

SDK_MODULES = ("opentelemetry.sdk.metrics", "opentelemetry.sdk.trace",
               "opentelemetry.exporter.otlp.proto.http.metric_exporter",
               "opentelemetry.exporter.otlp.proto.http.trace_exporter")
PROMPT = "Fix the failing test in tests/test_parser.py. " * 45  # ~500 input tokens


def one_task(base_url: str, prefill_tps: float, model: str) -> dict[str, object]:
    with agent_latency.task("fix-tests"):
        context = trace.get_current_span().get_span_context()
        with openai.OpenAI(base_url=base_url + "/v1", api_key="sk-test",
                           max_retries=0) as client:
            started = time.perf_counter()
            first = None
            for chunk in client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": PROMPT}],
                    stream=True, stream_options={"include_usage": True},
                    extra_body={"simulator": {"prefill_tps": prefill_tps,
                                              "output_tokens": 8}}):
                if first is None and chunk.choices and chunk.choices[0].delta.content:
                    first = time.perf_counter() - started
        with agent_latency.tool("run_tests"):
            time.sleep(0.02)
    return {"trace_id": f"{context.trace_id:032x}", "first_token_s": first}


def agent(base_url: str, prefill_tps: float, model: str, out: str, seconds: float) -> int:
    """One agent process's whole life."""
    agent_latency.instrument()
    deadline = time.monotonic() + seconds
    while True:
        line = json.dumps(one_task(base_url, prefill_tps, model)) + "\n"
        # One write per line, appended: the processes share the file.
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, line.encode())
        os.close(fd)
        if time.monotonic() >= deadline:
            return 0


def child(base_url: str, prefill_tps: float, model: str, out: str, seconds: float) -> None:
    """A forked agent process, ended as the interpreter ends a program: its exit hooks run
    (agent-latency's flush among them), then the process is gone.  The interpreter's
    teardown of every module imported before the fork is skipped: seconds of CPU on a
    loaded machine, and nothing any exporter sees."""
    code = 1
    try:
        code = agent(base_url, prefill_tps, model, out, seconds)
    except BaseException:  # noqa: BLE001 - reported, then the exit code says it
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()
        os._exit(code)


def warm_imports() -> None:
    """What a child's instrument() and first call would import or compute, done once here:
    our modules, the SDK parts and exporters instrument() builds from the OTEL_* variables,
    the OpenAI client's resources (loaded on first use) and platform headers."""
    for name in SDK_MODULES:
        importlib.import_module(name)
    for module in pkgutil.walk_packages(agent_latency.__path__, "agent_latency."):
        if module.name.endswith("__main__"):
            continue  # runs the command line
        try:
            importlib.import_module(module.name)
        except Exception:  # noqa: BLE001, S112 - an optional integration's package is absent
            continue
    client = openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    client.chat.completions.with_raw_response  # noqa: B018 - loads the resource modules
    # The platform headers (cached per process; `uname -p` run as a child process): the
    # fork of a process this size is slow on a loaded machine and would be in every
    # child's first first-token time.
    client.platform_headers()
    client.close()


def main() -> int:
    base_url, prefill_tps, model, out = (sys.argv[1], float(sys.argv[2]), sys.argv[3],
                                         sys.argv[4])
    warm_imports()
    processes, at_once, seconds = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
    started: dict[int, float] = {}
    lifetimes, failed = [], 0
    while processes or started:
        if processes and len(started) < at_once:
            pid = os.fork()
            if pid == 0:
                child(base_url, prefill_tps, model, out, seconds)
            started[pid] = time.monotonic()
            processes -= 1
            continue
        pid, status = os.wait()
        lifetimes.append(time.monotonic() - started.pop(pid))
        failed += os.waitstatus_to_exitcode(status) != 0
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (json.dumps({"lifetimes": lifetimes, "failed": failed}) + "\n").encode())
    os.close(fd)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
