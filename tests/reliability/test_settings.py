"""Bad settings never crash instrument(): each falls back to its default with one warning."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from agent_latency import _env, _log, semconv

OUR_NUMBERS = [semconv.ENV_MAX_OPEN_TASKS, semconv.ENV_TASK_MAX_AGE]
OUR_FLAGS = [semconv.ENV_SUMMARY, semconv.ENV_PROCESS_TASK, semconv.ENV_PHASE_SPANS,
             semconv.ENV_PROPAGATE, semconv.ENV_CAPTURE_COMMAND, semconv.ENV_RUN_CHILDREN]
SDK_NUMBERS = ["OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_QUEUE_SIZE",
               "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_BSP_EXPORT_TIMEOUT",
               "OTEL_METRIC_EXPORT_INTERVAL", "OTEL_METRIC_EXPORT_TIMEOUT"]
BAD_VALUES = ["", "abc", "nan", "inf", "-inf", "-1", "0", "1e400", "99999999999999999999"]

PROGRAM = """
import logging, subprocess, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
import agent_latency
assert agent_latency.instrument(process_task=True)
with agent_latency.task("t"):
    with agent_latency.tool("x"):
        pass
    subprocess.run([sys.executable, "-c", "pass"])
print("ran")
"""


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_log, "_said", set())


class TestNumbers:
    """Our numeric settings: out-of-range, non-finite and non-numeric values keep the default."""

    @pytest.mark.parametrize("raw", BAD_VALUES)
    def test_bad_value_keeps_default_with_one_warning(
            self, raw: str, monkeypatch: pytest.MonkeyPatch,
            caplog: pytest.LogCaptureFixture) -> None:
        monkeypatch.setenv("X_NUMBER", raw)
        with caplog.at_level(logging.WARNING, logger="agent_latency"):
            assert _env.env_int("X_NUMBER", 7, maximum=10**8) == 7
            assert _env.env_int("X_NUMBER", 7, maximum=10**8) == 7
            assert _env.env_number("X_NUMBER", 2.5, maximum=1e9) == 2.5
        expected = 0 if raw == "" else 1  # empty is "not set"
        assert len([r for r in caplog.records if "X_NUMBER" in r.getMessage()]) == expected

    def test_good_values_are_read(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("X_NUMBER", " 1e4 ")
        assert _env.env_int("X_NUMBER", 7) == 10_000
        monkeypatch.setenv("X_NUMBER", "2.5")
        assert _env.env_number("X_NUMBER", 1.0) == 2.5
        assert _env.env_int("X_NUMBER", 7) == 7  # not whole

    @pytest.mark.parametrize("raw", ["0", "-1", "abc", "nan", "inf", "1e400"])
    def test_sdk_batch_settings_are_valid_for_the_sdk(
            self, raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        for name in SDK_NUMBERS:
            monkeypatch.setenv(name, raw)
        settings = _env.batch_span_settings()
        assert settings == {"max_queue_size": 2048, "schedule_delay_millis": 5000,
                            "max_export_batch_size": 512, "export_timeout_millis": 30000}
        BatchSpanProcessor(InMemorySpanExporter(), **settings).shutdown()
        assert _env.metric_reader_settings() == {"export_interval_millis": 60000.0,
                                                 "export_timeout_millis": 30000.0}

    def test_batch_above_queue_is_clamped(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
        monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512")
        settings = _env.batch_span_settings()
        assert settings["max_export_batch_size"] == 100


class TestInstrumentSurvivesEveryBadValue:
    """instrument() with every setting of ours and the SDK's batching ones set to a bad value."""

    @pytest.mark.parametrize("raw", BAD_VALUES)
    def test_program_runs_and_exits_zero(self, raw: str, tmp_path: os.PathLike[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENT_LAT"))}
        for name in [*OUR_NUMBERS, *OUR_FLAGS, *SDK_NUMBERS,
                     semconv.ENV_CAPTURE_MESSAGE_CONTENT]:
            env[name] = raw
        env[semconv.ENV_OUTPUT_DIR] = str(tmp_path)
        env["OTEL_METRICS_EXPORTER"] = "console"
        proc = subprocess.run([sys.executable, "-c", PROGRAM], check=False, env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "ran" in proc.stdout
        assert "Traceback" not in proc.stderr, proc.stderr
        if raw:
            for name in [*OUR_NUMBERS, *SDK_NUMBERS]:
                if raw == "abc" or name not in proc.stderr:
                    assert proc.stderr.count(f"{name}=") <= 1, proc.stderr
            assert f"{semconv.ENV_MAX_OPEN_TASKS}=" in proc.stderr
