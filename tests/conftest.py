"""Shared fixtures: an in-memory OpenTelemetry SDK set as the global providers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from machine_load import SIDE_BY_SIDE_ENV
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from agent_latency import BudgetSpanProcessor, _log, semconv

try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # a venv without it runs no property test
    pass
else:
    # Property tests check what is computed, never how fast: no per-example deadline (the
    # default 200 ms fails a correct example on a loaded machine, where one example can
    # wait that long for a core).  The one place for it: test files set only their own
    # example counts and health checks.
    _hypothesis_settings.register_profile("agent_latency", deadline=None)
    _hypothesis_settings.load_profile("agent_latency")

# The suite calls instrument() in many places: no implicit process task there, so each test's
# span tree is the one it builds (tests/test_process_task.py turns it on in subprocesses).
os.environ[semconv.ENV_PROCESS_TASK] = "false"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quiet-tests", choices=("include", "skip", "only"), default="include",
        help="tests marked quiet: run them with the rest (include), leave them out (skip: "
             "make test's phase on worker processes) or run only them (only: its phase "
             "alone, after); a phase with no test of its own passes")


def pytest_configure(config: pytest.Config) -> None:
    """The side-by-side phase says so to :func:`machine_load.busy_slack`, in this process,
    its xdist workers and every process a test starts."""
    if config.getoption("quiet_tests", "include") == "skip":
        os.environ[SIDE_BY_SIDE_ENV] = "1"


#: Text every test file that marks tests quiet holds: the quiet phase collects only those
#: files (collecting the whole suite imports every SDK it tests: ~20 CPU-s a phase, once per
#: Python), and every other phase checks that no quiet test hides in a file without it.
QUIET_MARK_TEXT = "mark.quiet"


def _says_quiet(path: Path) -> bool | None:
    """Whether the file says :data:`QUIET_MARK_TEXT`; None when it cannot be read."""
    try:
        return QUIET_MARK_TEXT in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``--quiet-tests=only`` leaves out test files that do not say ``mark.quiet``."""
    if (config.getoption("quiet_tests", "include") != "only"
            or collection_path.suffix != ".py" or not collection_path.name.startswith("test_")):
        return None
    # Unreadable: collected as usual, and pytest reports what is wrong with it.
    return True if _says_quiet(collection_path) is False else None


def _check_quiet_files_say_so(items: list[pytest.Item]) -> None:
    """A quiet test whose file lacks :data:`QUIET_MARK_TEXT` (marked through a name imported
    from elsewhere) would run in no phase: a usage error, not a silent gap."""
    said: dict[Path, bool] = {}
    for item in items:
        if item.get_closest_marker("quiet") is None:
            continue
        path = Path(item.path)
        if path not in said:
            said[path] = _says_quiet(path) is not False
        if not said[path]:
            raise pytest.UsageError(
                f"{item.nodeid} is marked quiet but {path.name} never says "
                f"{QUIET_MARK_TEXT!r}: make test's quiet phase would not collect it "
                f"(mark it with pytest.mark.quiet in that file)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--quiet-tests``: make test runs most tests on xdist workers side by side and the
    ones marked ``quiet`` (timing bounds too tight for a machine busy with the suite itself)
    in a serial phase of their own."""
    _rerun_quiet_tests(config, items)
    which = config.getoption("quiet_tests", "include")
    if which != "only":
        _check_quiet_files_say_so(items)
    if which == "include":
        return
    keep, drop = [], []
    for item in items:
        quiet = item.get_closest_marker("quiet") is not None
        (keep if quiet == (which == "only") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


#: How many times a quiet test that failed runs again before its failure stands.
QUIET_RERUNS = 2


def _rerun_quiet_tests(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A quiet test that fails runs again, up to :data:`QUIET_RERUNS` times; each failed try
    is reported (``R`` in the progress line and the short summary, ``N rerun`` in its last
    line), so a rerun is never silent.

    Why: a quiet test's bound is a few milliseconds of wall time, and a shared host stalls a
    process for tens of them now and then whatever the suite does (CI, its quiet phase
    alone: a connect held 32.6 ms for 20 ms injected, a collection of 1.5 M lists taking
    3.9 s that takes 0.13 s here).
    A stall is rare and does not repeat on cue; a wrong figure of ours does, so a real fault
    still fails every try.  Tests not marked quiet are never rerun.
    """
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        if (item.get_closest_marker("quiet") is not None
                and item.get_closest_marker("flaky") is None):
            item.add_marker(pytest.mark.flaky(reruns=QUIET_RERUNS))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # One phase of two may have nothing to run (PYTEST_ARGS="-k ...", or a suite without
    # quiet tests): that phase passes, the other one reports the tests.
    if (exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
            and session.config.getoption("quiet_tests", "include") != "include"):
        session.exitstatus = pytest.ExitCode.OK


@pytest.fixture
def own_suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A suite of its own for tests of this suite's rules: ``pytester`` with this conftest
    and the module it imports (``machine_load``); the test adds its test files."""
    here = Path(__file__).parent
    pytester.makeconftest((here / "conftest.py").read_text())
    pytester.makepyfile(machine_load=(here / "machine_load.py").read_text())
    return pytester


@pytest.fixture(autouse=True)
def no_internal_errors(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Fails a test whose code hit an internal error of ours that the program never saw.

    ``internal_error`` logs once per place per process, so without this a real failure after
    a test that provoked the same place on purpose would pass silently.  A test that arms
    fault injection (``_log.FAULTS``) or is marked ``internal_errors`` expects them.
    """
    seen: list[str] = []

    def observe(where: str) -> None:
        if not _log.FAULTS:  # one raised while faults are armed is the test's own
            seen.append(where)

    _log.on_internal_error = observe
    try:
        yield seen
    finally:
        _log.on_internal_error = None
    if seen and request.node.get_closest_marker("internal_errors") is None:
        pytest.fail(f"internal error(s) of agent-latency in {sorted(set(seen))}: see the log",
                    pytrace=False)


def reset_otel_globals() -> None:
    """Let a test set the global providers again (OpenTelemetry allows it once a process)."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace._PROXY_TRACER_PROVIDER = trace.ProxyTracerProvider()
    from opentelemetry.metrics import _internal as metrics_internal

    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    metrics_internal._PROXY_METER_PROVIDER = metrics_internal._ProxyMeterProvider()


@pytest.fixture
def reset_globals() -> Callable[[], None]:
    """``reset_otel_globals`` for tests in folders whose own conftest shadows this one's
    module name (``from conftest import ...`` finds the nearest)."""
    return reset_otel_globals


@dataclass
class Otel:
    """The in-memory SDK a test runs against."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    processor: BudgetSpanProcessor
    provider: TracerProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, f"{name!r}: {[s.name for s in self.spans()]}"
        return found[0]

    def seconds(self, name: str) -> float:
        """The one span ``name``'s duration: what a sleep inside it took on this machine
        (a loaded one may run it many ms long), for bounds that hold however long."""
        span = self.span(name)
        assert span.end_time is not None and span.start_time is not None
        return (span.end_time - span.start_time) / 1e9

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def otel() -> Iterator[Otel]:
    reset_otel_globals()
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    provider = TracerProvider()
    processor = BudgetSpanProcessor(meter_provider)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(meter_provider)
    yield Otel(exporter, reader, processor, provider)
    processor.shutdown()
    provider.shutdown()
    meter_provider.shutdown()
    reset_otel_globals()
