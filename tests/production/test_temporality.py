"""The temporality of the metrics an agent sends over OTLP: deltas unless the user says
otherwise, so the Collector can add up a fleet of processes (docs/production.md, "Fleet
metrics"); the agent's own Prometheus endpoint stays cumulative, as a pull endpoint must."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality
from opentelemetry.sdk.metrics import MeterProvider

from agent_latency import _exporters

DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


class _Receiver:
    """An OTLP/HTTP metrics endpoint keeping every request it gets."""

    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                outer.requests.append(ExportMetricsServiceRequest.FromString(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def temporalities(self) -> dict[str, int]:
        """Metric name → the temporality it arrived with."""
        found = {}
        for request in self.requests:
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        kind = metric.WhichOneof("data")
                        if kind in ("sum", "histogram"):
                            found[metric.name] = getattr(metric, kind).aggregation_temporality
        return found


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Receiver]:
    endpoint = _Receiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.url)
    for name in (_exporters.TEMPORALITY_VARIABLE, "OTEL_EXPORTER_OTLP_PROTOCOL",
                 "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    yield endpoint
    endpoint.server.shutdown()
    endpoint.server.server_close()


def _send(receiver: _Receiver) -> dict[str, int]:
    """A histogram, a counter and an up-down counter, through the readers agent-latency
    builds for ``otlp``, to the receiver."""
    provider = MeterProvider(metric_readers=_exporters.metric_readers(["otlp"]))
    meter = provider.get_meter("test")
    meter.create_histogram("h").record(1.0)
    meter.create_counter("c").add(1)
    meter.create_up_down_counter("u").add(1)
    provider.shutdown()  # the last export, as at a process's exit
    return receiver.temporalities()


class TestOtlpTemporality:
    """OTLP metrics leave the agent as deltas by default; the standard variable wins."""

    def test_deltas_by_default(self, receiver: _Receiver):
        # A delta of an up-down counter adds up to nothing: it stays cumulative.
        assert _send(receiver) == {"h": DELTA, "c": DELTA, "u": CUMULATIVE}

    @pytest.mark.parametrize("choice", ["cumulative", "CUMULATIVE"])
    def test_the_variable_wins(self, receiver: _Receiver, monkeypatch: pytest.MonkeyPatch,
                               choice: str):
        monkeypatch.setenv(_exporters.TEMPORALITY_VARIABLE, choice)
        assert _send(receiver) == {"h": CUMULATIVE, "c": CUMULATIVE, "u": CUMULATIVE}
