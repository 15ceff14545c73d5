"""Task metrics for long tasks: buckets up to an hour and more, the wall-time histogram and
its opt-in, bounded task-name label."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

import agent_latency
from agent_latency import BudgetSpanProcessor, semconv
from agent_latency.configure import _metric_task_names


def _points(reader: InMemoryMetricReader, name: str) -> list:
    data = reader.get_metrics_data()
    return [point for rm in (data.resource_metrics if data else ())
            for sm in rm.scope_metrics for metric in sm.metrics if metric.name == name
            for point in metric.data.data_points]


class TestBuckets:
    """Task duration and wall-time histograms resolve tasks of an hour."""

    def test_bounds_double_past_an_hour(self):
        bounds = semconv.TASK_DURATION_BUCKETS
        assert bounds[:len(semconv.DURATION_BUCKETS)] == semconv.DURATION_BUCKETS
        assert bounds[-2] < 3600 < bounds[-1]
        assert all(b == pytest.approx(a * 2) for a, b in pairwise(bounds))

    def test_both_task_histograms_use_them(self, otel):
        with agent_latency.task("fix-bug"):
            pass
        for name in (semconv.METRIC_TASK_DURATION, semconv.METRIC_TASK_WALL_TIME):
            points = otel.metric_points(name)
            assert points, name
            assert list(points[0].explicit_bounds) == list(semconv.TASK_DURATION_BUCKETS)


class TestWallTime:
    """One wall-time point per finished task, without the task name unless asked."""

    def test_one_point_per_task_no_name(self, otel):
        with agent_latency.task("a"):
            pass
        with agent_latency.task("b"):
            pass
        (point,) = otel.metric_points(semconv.METRIC_TASK_WALL_TIME)
        assert point.count == 2
        assert dict(point.attributes or {}) == {}


@pytest.fixture
def named() -> Iterator[tuple[TracerProvider, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    processor = BudgetSpanProcessor(meters, task_names=2)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    yield provider, reader
    processor.shutdown()
    provider.shutdown()
    meters.shutdown()


class TestTaskNameLabel:
    """With names enabled, the first N distinct names label the metric; later ones share
    ``_other``."""

    def test_cap(self, named):
        provider, reader = named
        tracer = provider.get_tracer("t")
        for name in ("a", "b", "a", "c", "d"):
            with tracer.start_as_current_span("invoke_agent " + name,
                                              attributes={semconv.TASK_NAME: name}):
                pass
        counts = {p.attributes[semconv.TASK_NAME]: p.count
                  for p in _points(reader, semconv.METRIC_TASK_WALL_TIME)}
        assert counts == {"a": 2, "b": 1, semconv.TASK_NAME_OVERFLOW: 2}

    def test_environment(self, monkeypatch):
        monkeypatch.delenv(semconv.ENV_METRIC_TASK_NAMES, raising=False)
        monkeypatch.setenv(semconv.ENV_METRIC_TASK_NAMES_LIMIT, "7")
        assert _metric_task_names() == 0
        monkeypatch.setenv(semconv.ENV_METRIC_TASK_NAMES, "true")
        assert _metric_task_names() == 7
        monkeypatch.delenv(semconv.ENV_METRIC_TASK_NAMES_LIMIT)
        assert _metric_task_names() == semconv.DEFAULT_METRIC_TASK_NAMES_LIMIT
