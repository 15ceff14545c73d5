"""The committed dashboard JSON is exactly what deploy/grafana/generate.py makes."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType

import pytest

from ._stack import DEPLOY

GENERATOR = DEPLOY / "grafana" / "generate.py"


@pytest.fixture(scope="module")
def generate() -> ModuleType:
    pytest.importorskip("grafana_foundation_sdk")
    spec = importlib.util.spec_from_file_location("agent_latency_dashboards", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class TestGeneratedDashboards:
    """Committed JSON equals the generator's output; panels are wired to the data sources."""

    def test_committed_json_is_the_generators_output(self, generate):
        for name, make in generate.DASHBOARDS.items():
            committed = (generate.OUT_DIR / name).read_text()
            assert committed == generate.render(make()), (
                f"{name} is stale: run python deploy/grafana/generate.py")

    def test_check_mode(self, generate, capsys):
        assert generate.main(["--check"]) == 0

    def test_every_dashboard_file_has_a_generator(self, generate):
        assert {p.name for p in generate.OUT_DIR.glob("*.json")} == set(generate.DASHBOARDS)

    def test_panels_query_prometheus_and_histograms_show_exemplars(self, generate):
        board = json.loads((generate.OUT_DIR / "agent-latency-overview.json").read_text())
        assert board["uid"] == "agent-latency-overview"
        panels = [p for p in board["panels"] if p["type"] != "row"]
        titles = {p["title"] for p in panels}
        for needed in ("Task wall time by component (mean per task)",
                       "Task wall time by component (share)",
                       "Time to first token p50 / p95 / p99", "Output tokens/s (mean per call)",
                       "Prefill tokens/s (mean per call)", "Network overhead share of task time",
                       "New connections per task", "Tool time by tool (seconds per second)",
                       "LLM error ratio"):
            assert needed in titles
        for panel in panels:
            assert panel["datasource"] == {"type": "prometheus", "uid": "prometheus"}
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "prometheus"
                if "histogram_quantile" in target["expr"]:
                    assert target.get("exemplar") is True, panel["title"]

    def test_datasource_uids_match_the_provisioning(self):
        import yaml

        provisioned = yaml.safe_load(
            (DEPLOY / "grafana" / "provisioning" / "datasources" / "datasources.yml")
            .read_text())
        uids = {d["uid"] for d in provisioned["datasources"]}
        assert {"prometheus", "tempo", "jaeger"} <= uids
        prometheus = next(d for d in provisioned["datasources"] if d["uid"] == "prometheus")
        destinations = prometheus["jsonData"]["exemplarTraceIdDestinations"]
        assert {d.get("datasourceUid") for d in destinations} >= {"tempo"}
        assert any("16686" in d.get("url", "") for d in destinations)
