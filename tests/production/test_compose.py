"""docker-compose.yml: valid for Compose, images pinned, ports on loopback, configs wired."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ._stack import DEPLOY, REPO, require

COMPOSE = REPO / "docker-compose.yml"
# An exact version tag: digits and dots, an optional leading v and pre-release suffix.
EXACT_TAG = re.compile(r"^v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.]+)?$")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The file as Compose itself resolves it (`docker-compose config`, no engine needed)."""
    binary = require("docker-compose")["docker-compose"]
    out = subprocess.run([binary, "-f", str(COMPOSE), "config", "--format", "json"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


class TestCompose:
    """The stack file is valid, pinned, loopback-only and healthy-checked."""

    def test_config_quiet_passes(self):
        binary = require("docker-compose")["docker-compose"]
        out = subprocess.run([binary, "-f", str(COMPOSE), "config", "-q"],
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr

    def test_the_services(self, compose):
        assert set(compose["services"]) == {"otel-collector", "jaeger", "tempo", "prometheus",
                                            "alertmanager", "grafana"}

    def test_every_image_has_an_exact_tag(self, compose):
        for name, service in compose["services"].items():
            image = service["image"]
            assert "@" not in image or image.split("@")[1].startswith("sha256:"), image
            repo, _, tag = image.partition("@")[0].rpartition(":")
            assert repo and "/" not in tag, (name, image)
            assert tag != "latest" and EXACT_TAG.match(tag), (name, image)

    def test_every_published_port_is_loopback(self, compose):
        published = 0
        for name, service in compose["services"].items():
            for port in service.get("ports", []):
                assert port.get("host_ip") == "127.0.0.1", (name, port)
                published += 1
        assert published >= 7

    def test_every_service_has_a_health_check(self, compose):
        for name, service in compose["services"].items():
            test = service.get("healthcheck", {}).get("test")
            assert test and test[0] in ("CMD", "CMD-SHELL"), name

    def test_mounted_config_files_exist(self, compose):
        for name, service in compose["services"].items():
            for volume in service.get("volumes", []):
                if volume["type"] == "bind":  # Compose resolves it to an absolute path
                    assert Path(volume["source"]).exists(), (name, volume)


class TestCollectorConfig:
    """The Collector's pipelines use only components the file defines."""

    def test_pipelines_are_wired(self):
        config = yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text())
        pipelines = config["service"]["pipelines"]
        for kind in ("receivers", "processors", "exporters"):
            used = {c for p in pipelines.values() for c in p.get(kind, [])}
            assert used <= set(config[kind]), kind
        assert set(config["service"]["extensions"]) <= set(config["extensions"])
        assert "tail_sampling" in pipelines["traces"]["processors"]
        assert pipelines["traces"]["exporters"] == ["otlp_grpc/jaeger", "otlp_grpc/tempo"]
        assert pipelines["metrics"]["exporters"] == ["prometheus"]

    def test_otlp_grpc_and_http(self):
        config = yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text())
        protocols = config["receivers"]["otlp"]["protocols"]
        assert protocols["grpc"]["endpoint"].endswith(":4317")
        assert protocols["http"]["endpoint"].endswith(":4318")

    def test_tail_sampling_decides_after_the_root_span(self):
        """Whole tasks: decided a little after the task span arrives, with a decision wait
        long enough for an hour-long task (tests/production/test_jaeger.py runs it)."""
        config = yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text())
        sampling = config["processors"]["tail_sampling"]
        policies = {p["type"] for p in sampling["policies"]}
        assert {"status_code", "latency", "probabilistic"} <= policies
        assert sampling["decision_wait"] == "1h"
        assert sampling["decision_wait_after_root_received"] == "10s"
        latency = next(p for p in sampling["policies"] if p["type"] == "latency")
        assert latency["latency"]["threshold_ms"] < 3600 * 1000
