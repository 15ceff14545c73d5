"""The alert rules pass `promtool check rules` and their unit tests (`promtool test rules`),
with the promtool of the Prometheus release the stack pins (`make servers`)."""

from __future__ import annotations

import subprocess

import yaml

from ._servers import server_binary
from ._stack import (
    DEPLOY,
    RULES,
    RULES_DIR,
    THRESHOLDS,
    fast_rules,
    threshold_overrides,
)

UNIT_TESTS = DEPLOY / "prometheus" / "tests" / "agent-latency-test.yml"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = server_binary("promtool")
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120,
                          check=False, cwd=DEPLOY / "prometheus")


class TestPromtool:
    """promtool accepts every rules file and every alert has a passing unit test."""

    def test_check_rules(self):
        files = sorted(str(p) for p in RULES_DIR.glob("*.yml"))
        assert len(files) == 2
        out = _promtool("check", "rules", *files)
        assert out.returncode == 0, out.stdout + out.stderr

    def test_unit_tests_pass(self):
        out = _promtool("test", "rules", str(UNIT_TESTS))
        assert out.returncode == 0, out.stdout + out.stderr
        assert "SUCCESS" in out.stdout

    def test_every_alert_has_a_unit_test(self):
        alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"]
                  for rule in group["rules"] if "alert" in rule}
        tested = {case["alertname"] for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]
                  for case in test.get("alert_rule_test", [])
                  if case.get("exp_alerts")}
        assert alerts == tested


class TestFastRules:
    """The end-to-end test's fast copy changes only windows, holds and intervals."""

    def test_fast_copy_is_valid_and_short(self, tmp_path):
        fast = tmp_path / "fast.yml"
        fast.write_text(fast_rules(RULES.read_text()))
        thresholds = tmp_path / "thresholds.yml"
        thresholds.write_text(threshold_overrides(
            THRESHOLDS.read_text(), {"agent_latency:threshold:ttft_p95_seconds": 1.0}))
        out = _promtool("check", "rules", str(fast), str(thresholds))
        assert out.returncode == 0, out.stdout + out.stderr
        text = fast.read_text()
        assert "[5m]" not in text and "[10s]" in text
        rules = [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
        assert {r["for"] for r in rules if "for" in r} == {"2s"}
        assert "vector(1.0)" in thresholds.read_text()
