"""docker/ read as Docker and Grafana would (no Docker engine here): the compose file's YAML, its
Prometheus config and alert rules (checked by Debian's promtool), and the Grafana dashboard, whose
every query must be valid PromQL over names a Samsa broker serves."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from broker.server import Broker
from broker.testing.loop_thread import LoopThread
from tests.unit.test_metrics import broker, exported_names  # noqa: F401 - the fixture

DOCKER = Path(__file__).resolve().parents[2] / "docker"
METRICS_PORT = "9404"
NAME = re.compile(r"\b((?:kafka|process)_[a-z0-9_]+|up)\b")


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _promtool(*args: str) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed (tests/run.sh installs Debian's prometheus)"
    done = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def _brokers(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items() if name.startswith("samsa-")}


def test_every_broker_serves_metrics_and_prometheus_scrapes_them_all() -> None:
    compose = _load(DOCKER / "compose.yaml")
    brokers = _brokers(compose)
    assert len(brokers) == 3
    for service in brokers.values():
        assert f"metrics.prometheus.port={METRICS_PORT}" in service["command"]
    config = _load(DOCKER / "prometheus" / "prometheus.yml")
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert sorted(targets) == sorted(f"{name}:{METRICS_PORT}" for name in brokers)
    assert "9404" in (DOCKER / "Dockerfile").read_text()
    volumes = compose["services"]["prometheus"]["volumes"]
    assert "./prometheus:/etc/prometheus:ro" in volumes
    assert config["rule_files"] == ["/etc/prometheus/alerts.yml"]
    grafana = compose["services"]["grafana"]["volumes"]
    for mount in grafana:
        assert (DOCKER / mount.split(":")[0]).is_dir(), mount


def test_prometheus_config_and_alerts_pass_promtool(tmp_path: Path) -> None:
    config = _load(DOCKER / "prometheus" / "prometheus.yml")
    config["rule_files"] = [str(DOCKER / "prometheus" / "alerts.yml")]  # where compose mounts it
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))
    _promtool("check", "config", str(local))


def _dashboard() -> dict[str, Any]:
    return json.loads((DOCKER / "grafana" / "dashboards" / "kafka.json").read_text())


def _expressions() -> list[str]:
    return [t["expr"] for p in _dashboard()["panels"] for t in p.get("targets", [])]


def test_dashboard_uses_the_provisioned_datasource_and_valid_promql(tmp_path: Path) -> None:
    datasources = _load(DOCKER / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")["datasources"]
    uids = {d["uid"] for d in datasources}
    dashboard = _dashboard()
    used = {p["datasource"]["uid"] for p in dashboard["panels"] if "datasource" in p}
    used |= {v["datasource"]["uid"] for v in dashboard["templating"]["list"]}
    assert used == uids
    provider = _load(DOCKER / "grafana" / "provisioning" / "dashboards" / "samsa.yaml")["providers"][0]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr{i}", "expr": e.replace("$instance", ".*")} for i, e in enumerate(_expressions())
    ]}]}  # fmt: skip
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules))
    _promtool("check", "rules", str(path))


def test_dashboard_and_alerts_use_only_names_samsa_serves(broker: tuple[Broker, LoopThread, int]) -> None:  # noqa: F811
    b, loop, _ = broker
    served = exported_names(b, loop) | {"up", "process_cpu_seconds_total", "process_resident_memory_bytes"}
    alerts = _load(DOCKER / "prometheus" / "alerts.yml")
    expressions = _expressions() + [r["expr"] for g in alerts["groups"] for r in g["rules"]]
    used = {name for e in expressions for name in NAME.findall(e)}
    assert len(used) > 20
    assert sorted(used - served) == []
