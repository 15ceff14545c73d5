"""The servers `make servers` builds: the releases docker-compose.yml pins, the Collector with
exactly the components its configuration uses, and each deployed configuration accepted by
the server that runs it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from ._servers import COLLECTOR_CONFIG, JAEGER_CONFIG, PINS, server_binary
from ._stack import DEPLOY, REPO

MANIFEST = DEPLOY / "otel-collector" / "builder-config.yaml"
OTELCOL = DEPLOY / "otel-collector" / "otelcol"
SERVERS = DEPLOY / "servers"
# Jaeger tags each release twice, v1.x for the Go module and v2.y for Jaeger v2.
JAEGER_MODULE_VERSION = {"2.13.0": "v1.76.0"}
# The Collector's stable modules (component, confmap, …) are numbered v1.x beside v0.x.
COLLECTOR_STABLE_VERSION = {"0.161.0": "v1.67.0"}


def _run(*argv: str) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def _requires(go_mod: Path) -> dict[str, str]:
    return dict(re.findall(r"^\s*(?:require\s+)?(\S+)\s+(v\S+)(?:\s+//.*)?$",
                           go_mod.read_text(), re.M))


def _images() -> dict[str, str]:
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    return {name: service["image"] for name, service in services.items()}


class TestPins:
    """docker-compose.yml, the Go modules and the built binaries name the same releases."""

    def test_compose_images(self):
        images = _images()
        assert images["otel-collector"] == (
            f"otel/opentelemetry-collector-contrib:{PINS['otelcol']}")
        assert images["jaeger"] == f"jaegertracing/jaeger:{PINS['jaeger']}"
        assert images["prometheus"] == f"prom/prometheus:v{PINS['prometheus']}"
        assert images["alertmanager"] == f"prom/alertmanager:v{PINS['alertmanager']}"

    def test_go_modules(self):
        major, minor, patch = PINS["prometheus"].split(".")
        assert _requires(SERVERS / "prometheus" / "go.mod")[
            "github.com/prometheus/prometheus"] == f"v0.{major}{int(minor):02d}.{patch}"
        assert _requires(SERVERS / "alertmanager" / "go.mod")[
            "github.com/prometheus/alertmanager"] == f"v{PINS['alertmanager']}"
        assert _requires(SERVERS / "jaeger" / "go.mod")[
            "github.com/jaegertracing/jaeger"] == JAEGER_MODULE_VERSION[PINS["jaeger"]]

    def test_every_collector_module_at_one_release(self):
        release = f"v{PINS['otelcol']}"
        allowed = {release, COLLECTOR_STABLE_VERSION[PINS["otelcol"]]}
        manifest = yaml.safe_load(MANIFEST.read_text())
        gomods = [entry["gomod"] for kind in ("extensions", "receivers", "processors",
                                              "exporters", "providers")
                  for entry in manifest[kind]]
        assert {g.split()[1] for g in gomods} <= allowed
        assert manifest["dist"]["version"] == PINS["otelcol"]
        requires = _requires(OTELCOL / "go.mod")
        ours = {m: v for m, v in requires.items()
                if m.startswith(("go.opentelemetry.io/collector",
                                 "github.com/open-telemetry/opentelemetry-collector-contrib"))}
        for module, version in (g.split() for g in gomods):
            assert requires[module] == version, module
        contrib = {v for m, v in ours.items() if "collector-contrib" in m}
        assert contrib == {release}, contrib

    @pytest.mark.parametrize(("binary", "pin"), [
        ("otelcol-agent-latency", "otelcol"), ("prometheus", "prometheus"),
        ("promtool", "prometheus"), ("alertmanager", "alertmanager"),
        ("amtool", "alertmanager")])
    def test_binaries_report_the_pinned_release(self, binary, pin):
        out = _run(server_binary(binary), "--version")
        assert re.search(rf"\bversion {re.escape(PINS[pin])}\b", out), out


class TestCollectorComponents:
    """The built Collector has exactly the components config.yaml uses, from the manifest."""

    def test_components_are_the_configs(self):
        built = yaml.safe_load(_run(server_binary("otelcol-agent-latency"), "components"))
        config = yaml.safe_load(COLLECTOR_CONFIG.read_text())
        for kind in ("receivers", "processors", "exporters", "extensions"):
            have = {c["name"] for c in built.get(kind) or ()}
            used = {name.partition("/")[0] for name in config[kind]}
            assert have == used, kind
        modules = {c["module"] for kind in ("receivers", "processors", "exporters",
                                            "extensions") for c in built.get(kind) or ()}
        manifest = yaml.safe_load(MANIFEST.read_text())
        listed = {entry["gomod"] for kind in ("extensions", "receivers", "processors",
                                              "exporters") for entry in manifest[kind]}
        assert modules == listed

    def test_generated_sources_name_the_manifests_modules(self):
        components = (OTELCOL / "components.go").read_text()
        manifest = yaml.safe_load(MANIFEST.read_text())
        for kind in ("extensions", "receivers", "processors", "exporters"):
            for entry in manifest[kind]:
                assert f'"{entry["gomod"]}"' in components, entry


class TestConfigsLoad:
    """Each deployed configuration is accepted by the release that runs it."""

    def test_collector_validates_its_config(self):
        _run(server_binary("otelcol-agent-latency"), "validate",
             f"--config={COLLECTOR_CONFIG}")

    def test_jaeger_validates_its_config(self):
        _run(server_binary("jaeger"), "validate", f"--config={JAEGER_CONFIG}")

    def test_promtool_check_config(self):
        _run(server_binary("promtool"), "check", "config", "--syntax-only",
             str(DEPLOY / "prometheus" / "prometheus.yml"))

    def test_amtool_check_config(self):
        _run(server_binary("amtool"), "check-config",
             str(DEPLOY / "alertmanager" / "alertmanager.yml"))
