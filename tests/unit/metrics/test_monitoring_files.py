"""deploy/monitoring: promtool accepts the config and the rules, the rules' unit tests pass,
and the dashboard is valid JSON."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.requires import tool_mark

MONITORING = Path(__file__).resolve().parents[3] / "deploy" / "monitoring"
DASHBOARD = MONITORING / "grafana" / "skiff-cluster.json"
needs_promtool = tool_mark("promtool", "Debian package prometheus (tests/run.sh installs it)")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=MONITORING, capture_output=True,
                          text=True, timeout=60)


@needs_promtool
def test_promtool_check_config_and_rules() -> None:
    out = promtool("check", "config", "prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    out = promtool("check", "rules", "rules/skiff-recording.yml", "rules/skiff-alerts.yml")
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_promtool_test_rules() -> None:
    out = promtool("test", "rules", "tests/skiff-alerts-test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout + out.stderr


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def test_dashboard_is_valid_json_with_queries() -> None:
    """Whether every query returns data is checked against a live cluster in
    tests/integration/test_metrics_prometheus.py."""
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] == "skiff-cluster"
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    exprs = dashboard_exprs()
    assert len(exprs) >= 20
    assert all(t["refId"] for p in doc["panels"] for t in p["targets"])
