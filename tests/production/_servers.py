"""The stack's servers as `make servers` builds them from Go modules, run on loopback.

``PINS`` is the one list of the releases: docker-compose.yml's image tags, the Go modules'
versions and the binaries' own ``--version`` must all agree with it (test_pins.py).  Each
server is started with the deployed configuration file, only its addresses rewritten to
127.0.0.1 and free ports (:func:`loopback`).
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ._stack import DEPLOY, REPO, Server, free_port

#: Release of each server: the image tag in docker-compose.yml, and what `make servers` builds.
PINS = {
    "otelcol": "0.161.0",       # otel/opentelemetry-collector-contrib; collector core v1.67.0
    "jaeger": "2.13.0",         # jaegertracing/jaeger; Go module github.com/…/jaeger v1.76.0
    "prometheus": "3.16.0",     # prom/prometheus; Go module github.com/…/prometheus v0.316.0
    "alertmanager": "0.35.0",   # prom/alertmanager
}
#: The binary of each server (and its command-line tool) in the servers directory.
BINARIES = ("otelcol-agent-latency", "jaeger", "prometheus", "promtool", "alertmanager",
            "amtool")
COLLECTOR_CONFIG = DEPLOY / "otel-collector" / "config.yaml"
JAEGER_CONFIG = DEPLOY / "jaeger" / "config.yaml"
_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9_.-]*):(?P<port>\d+)$")


def servers_dir() -> Path:
    """Where `make servers` put the binaries (``AGENT_LATENCY_SERVERS`` overrides)."""
    return Path(os.environ.get("AGENT_LATENCY_SERVERS") or REPO / ".servers" / "bin")


def server_binary(name: str) -> str:
    """A built server's path; fails (or skips, without Go) when `make servers` has not run."""
    path = servers_dir() / name
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    message = f"{path} is missing: run `make servers` (builds the stack's servers with Go)"
    if os.environ.get("CI") or os.environ.get("AGENT_LATENCY_SERVERS"):
        pytest.fail(message)
    pytest.skip(message)


def loopback(config: dict[str, Any], upstreams: dict[str, str] | None = None
             ) -> tuple[dict[str, Any], dict[str, int]]:
    """A copy of a Collector-style configuration listening on 127.0.0.1 only.

    Every ``endpoint: HOST:PORT`` whose host is in ``upstreams`` (``jaeger:4317``) is
    replaced by its value; every other one, and every ``host``/``port`` pair, gets
    127.0.0.1 and a free port.  Returns the copy and the new port of each address, by its
    dotted path (``receivers.otlp.protocols.grpc.endpoint``).
    """
    upstreams = upstreams or {}
    config = copy.deepcopy(config)
    ports: dict[str, int] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}.{i}")
            return
        if not isinstance(node, dict):
            return
        if isinstance(node.get("host"), str) and isinstance(node.get("port"), int):
            node["host"], node["port"] = "127.0.0.1", ports.setdefault(path, free_port())
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "endpoint" and isinstance(value, str):
                if value in upstreams:
                    node[key] = upstreams[value]
                elif _HOST_PORT.match(value):
                    node[key] = f"127.0.0.1:{ports.setdefault(where, free_port())}"
                continue
            walk(value, where)

    walk(config, "")
    return config, ports


def start_collector(tmp: Path, config: dict[str, Any], name: str = "otelcol") -> Server:
    """The Collector built from the builder manifest, with ``config`` (already on loopback),
    ready when its health_check extension answers."""
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = int(config["extensions"]["health_check"]["endpoint"].rpartition(":")[2])
    server = Server(name, [server_binary("otelcol-agent-latency"), f"--config={path}"],
                    port, tmp / f"{name}.log")
    try:
        server.wait_ready("/", timeout=60)
    except BaseException:
        server.stop()
        raise
    return server


class Jaeger:
    """Jaeger v2 with the deployed config on loopback: OTLP gRPC in, the query API out, and
    the UI from ``ui_assets`` (a jaeger-ui build) when given: Jaeger's Go module carries
    none."""

    __slots__ = ("otlp_grpc", "otlp_http", "query", "server")

    def __init__(self, tmp: Path, ui_assets: str | None = None) -> None:
        config, ports = loopback(yaml.safe_load(JAEGER_CONFIG.read_text()))
        if ui_assets:
            config["extensions"]["jaeger_query"]["ui"] = {"assets_path": ui_assets}
        path = tmp / "jaeger.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.otlp_grpc = f"127.0.0.1:{ports['receivers.otlp.protocols.grpc.endpoint']}"
        self.otlp_http = f"http://127.0.0.1:{ports['receivers.otlp.protocols.http.endpoint']}"
        self.query = f"http://127.0.0.1:{ports['extensions.jaeger_query.http.endpoint']}"
        health = ports["extensions.healthcheckv2.http.endpoint"]
        self.server = Server("jaeger", [server_binary("jaeger"), f"--config={path}"], health,
                             tmp / "jaeger.log")
        try:
            self.server.wait_ready("/status", timeout=60)
        except BaseException:
            self.server.stop()
            raise

    def stop(self) -> None:
        self.server.stop()
