"""franz-go (Go) and kafkajs (Node) against Samsa and Apache Kafka.

compat/go/main.go (kgo + kadm) and compat/node/scenario.js (kafkajs 2.2.4) run the same three
scenarios and print one JSON object per observation; each scenario runs once per target through
the `differential` fixture, which requires Samsa's output to equal Kafka's. The programs normalise
what differs between any two clusters before printing (broker-assigned timestamps become
"broker-now", cluster and topic ids become booleans, kgo's member id in commit metadata becomes
"<member-id>"); the assertions below check the observations themselves, so a harness that prints
nothing or the wrong thing fails on Kafka too.

franz-go's default producer is idempotent with snappy compression; kafkajs has only gzip built in
(snappy, lz4 and zstd need codec plugins) and no manual partition assignment, so its "consume from
the start" is a fresh group with fromBeginning.

The Go program is built once per session into compat/target/go/ (the `go_binary` fixture of
compat/conftest.py; the module cache and build cache make this quick on a warm machine);
compat/node/node_modules comes from `npm ci` (tests/run.sh,
or the fixture below if it is missing).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from compat.conftest import GO_DIR

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / "node"

FRANZ_VERSION = re.search(r"github.com/twmb/franz-go (v\S+)", (GO_DIR / "go.mod").read_text()).group(1)
KAFKAJS_VERSION = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]["kafkajs"]
CLIENT_NAMES = {"go": f"franz-go {FRANZ_VERSION}", "node": f"kafkajs {KAFKAJS_VERSION}"}
SCENARIOS = {
    "produce-consume": "produce (keys, headers, timestamps, compression), consume from start",
    "group": "consumer group, commits, resume",
    "admin": "list offsets, describe/create/delete topics, metadata",
}
RUN_TIMEOUT = 150  # seconds per scenario run (both programs stop themselves after 90)


@pytest.fixture(scope="session")
def node_script() -> list[str]:
    node = shutil.which("node")
    assert node, "Node.js is not installed"
    if not (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, timeout=600)
    return [node, str(NODE_DIR / "scenario.js")]


def run_program(cmd: list[str], bootstrap: str, scenario: str, prefix: str, *args: str,
                env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Runs one scenario of a client program (`go_binary` or `node_script`; extra arguments after
    the topic prefix; `env` added to its environment: TLS and SASL, see compat/go/security.go) and
    returns its observations; it must exit 0 and end with {"step": "done"}."""
    proc = subprocess.run(
        [*cmd, bootstrap, scenario, prefix, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=RUN_TIMEOUT,
        env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1", **(env or {})},
    )
    assert proc.returncode == 0, f"{cmd[-1]} {scenario} failed ({proc.returncode}): {proc.stderr[-2000:]}"
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert lines and lines[-1] == {"step": "done"}, proc.stdout[-2000:]
    return lines[:-1]


def _params():
    for lang in ("go", "node"):
        for scenario, title in SCENARIOS.items():
            yield pytest.param(
                lang, scenario, marks=pytest.mark.compat(client=CLIENT_NAMES[lang], scenario=title), id=f"{lang}-{scenario}"
            )


@pytest.mark.parametrize(("lang", "scenario"), list(_params()))
def test_go_node_client(lang, scenario, differential, request):
    cmd = [str(request.getfixturevalue("go_binary"))] if lang == "go" else request.getfixturevalue("node_script")
    obs = differential(f"{lang}-{scenario}", lambda target: run_program(cmd, target.bootstrap_servers, scenario, lang))
    CHECKS[(lang, scenario)](obs)


# ------------------------------------------------------------------ what each scenario must show


def steps(obs: list[dict], *names: str) -> list[dict]:
    return [o for o in obs if o["step"] in names]


def _consumed_pc(obs: list[dict], with_type: bool) -> None:
    got = [(o["topic"], o["offset"], o["key"], o["value"], o["valueLen"], o["headers"], o["timestamp"])
           for o in steps(obs, "consumed")]
    pc, lat = got[2:], got[:2]
    assert [g[:2] for g in lat] == [("go-lat" if with_type else "node-lat", 0), (lat[0][0], 1)]
    assert all(g[6] == "broker-now" for g in lat), lat  # LogAppendTime replaces the producer's time
    assert [(g[1], g[2], g[3], g[6]) for g in pc] == [
        (0, "k0", "v0", 1600000000000), (1, None, "v1", 1600000000001), (2, "k2", None, 1599999999995),
        (3, "k3", "abcdefgabcdefgabcdef", 1600000000002), (4, "k4", "v4", 1600000000003)]
    assert pc[0][5] == [["h1", "a"], ["h2", ""]]
    assert pc[3][4] >= 3000
    if with_type:
        assert [o["timestampType"] for o in steps(obs, "consumed")] == [1, 1, 0, 0, 0, 0, 0]
        assert {o["leaderEpoch"] for o in steps(obs, "consumed")} == {0}


def check_go_produce_consume(obs: list[dict]) -> None:
    assert [(o["topic"], o["err"], o["partitions"], o["hasId"]) for o in steps(obs, "create")] == [
        ("go-pc", "", 1, True), ("go-lat", "", 1, True)]
    produced = steps(obs, "produced")
    assert [(o["topic"], o["offset"]) for o in produced] == [("go-pc", i) for i in range(5)] + [("go-lat", 0), ("go-lat", 1)]
    # kgo keeps the producer's timestamp in the produced record (kafkajs reports the log append time)
    assert [o["timestamp"] for o in produced[5:]] == [1600000000000, 1600000000001]
    _consumed_pc(obs, with_type=True)
    assert steps(obs, "consumed")[4]["headers"] == [["h", None]]
    # the default kgo producer: idempotent, snappy batches (the one-record batch stays uncompressed)
    assert {(o["idempotent"], o["producerEpoch"]) for o in steps(obs, "consumed")} == {(True, 0)}
    assert [o["compression"] for o in steps(obs, "consumed")][2:] == [2, 2, 2, 2, 0]


def check_node_produce_consume(obs: list[dict]) -> None:
    assert [(o["topic"], o["created"], o["err"]) for o in steps(obs, "create")] == [
        ("node-pc", True, ""), ("node-lat", True, "")]
    produced = steps(obs, "produced")
    assert [(o["topic"], o["offset"], o["errorCode"]) for o in produced] == (
        [("node-pc", i, 0) for i in range(5)] + [("node-lat", 0, 0), ("node-lat", 1, 0)])
    assert [o["logAppendTime"] for o in produced] == [-1] * 5 + ["broker-now"] * 2
    _consumed_pc(obs, with_type=False)
    assert steps(obs, "consumed")[4]["headers"] == [["h", "x"], ["h", "y"]]


def _check_group(obs: list[dict], lang: str, protocol: str, metadata: Any) -> None:
    topic = f"{lang}-grp"
    consumed = [(o["partition"], o["offset"], o["key"]) for o in steps(obs, "consumed")]
    assert consumed == [(0, 0, "g0"), (0, 1, "g2"), (0, 2, "g4"), (1, 0, "g1"), (1, 1, "g3"), (1, 2, "g5"),
                        (0, 3, "g6"), (1, 3, "g7")]
    active, left = steps(obs, "described-active")[0], steps(obs, "described-left")[0]
    assert (active["state"], active["protocolType"], active["protocol"], active["members"], active["assigned"]) == (
        "Stable", "consumer", protocol, 1, [f"{topic}/0", f"{topic}/1"])
    assert (left["state"], left["members"], left["protocol"]) == ("Empty", 0, "")
    assert [(o["partition"], o["offset"], o["metadata"]) for o in steps(obs, "committed")] == [
        (0, 3, metadata), (1, 3, metadata)]
    assert [(o["partition"], o["offset"]) for o in steps(obs, "committed-again")] == [(0, 4), (1, 4)]


def check_go_group(obs: list[dict]) -> None:
    _check_group(obs, "go", "cooperative-sticky", "kgo-<member-id>")
    assert {o["leaderEpoch"] for o in steps(obs, "committed", "committed-again")} == {0}
    assert {o["err"] for o in steps(obs, "committed", "committed-again", "described-active")} == {""}


def check_node_group(obs: list[dict]) -> None:
    _check_group(obs, "node", "RoundRobinAssigner", None)


def check_go_admin(obs: list[dict]) -> None:
    assert [(o["topic"], o["err"]) for o in steps(obs, "create")] == [
        ("go-adm", ""), ("go-adm", "TOPIC_ALREADY_EXISTS"), ("go-zero", "INVALID_PARTITIONS"),
        ("gobad name!", "INVALID_TOPIC_EXCEPTION"), ("go-doomed", "")]
    listed = {s: [(o["partition"], o["offset"], o["timestamp"], o["err"]) for o in steps(obs, s)]
              for s in ("start", "end", "after-1500", "after-future")}
    assert listed["start"] == [(0, 0, -1, ""), (1, 0, -1, ""), (2, 0, -1, "")]
    assert listed["end"] == [(0, 3, -1, ""), (1, 1, -1, ""), (2, 0, -1, "")]
    assert listed["after-1500"] == [(0, 1, 1600000002000, ""), (1, 1, -1, ""), (2, 0, -1, "")]
    assert listed["after-future"] == [(0, 3, -1, ""), (1, 1, -1, ""), (2, 0, -1, "")]
    adm, missing = steps(obs, "described-topic")
    assert (adm["err"], adm["partitions"], adm["internal"]) == ("", 3, False)
    assert adm["details"][0] == "p0 leader=1 epoch=0 replicas=[1] isr=[1] offline=[] err="
    assert missing["err"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert [(o["topic"], o["err"]) for o in steps(obs, "deleted")] == [
        ("go-doomed", ""), ("go-missing", "UNKNOWN_TOPIC_OR_PARTITION")]
    assert steps(obs, "metadata") == [
        {"step": "metadata", "hasCluster": True, "controller": 1, "brokers": ['1 127.0.0.1 rack=""']}]


def check_node_admin(obs: list[dict]) -> None:
    assert [(o["topic"], o["created"], o["err"]) for o in steps(obs, "create")] == [
        ("node-adm", True, ""), ("node-adm", False, ""), ("nodebad name!", None, "INVALID_TOPIC_EXCEPTION"),
        ("node-doomed", True, "")]
    assert [(o["partition"], o["low"], o["high"]) for o in steps(obs, "offsets")] == [(0, 0, 3), (1, 0, 1), (2, 0, 0)]
    assert [(o["partition"], o["offset"]) for o in steps(obs, "after-1500")] == [(0, 1), (1, 1), (2, 0)]
    assert [(o["partition"], o["offset"]) for o in steps(obs, "after-future")] == [(0, 3), (1, 1), (2, 0)]
    (topic,) = steps(obs, "described-topic")
    assert topic["details"][0] == "p0 err=0 leader=1 replicas=1 isr=1 offline="
    assert steps(obs, "deleted")[0]["stillListed"] is False
    assert steps(obs, "cluster") == [
        {"step": "cluster", "hasClusterId": True, "controller": 1, "brokers": ["1 127.0.0.1"]}]


CHECKS = {
    ("go", "produce-consume"): check_go_produce_consume,
    ("node", "produce-consume"): check_node_produce_consume,
    ("go", "group"): check_go_group,
    ("node", "group"): check_node_group,
    ("go", "admin"): check_go_admin,
    ("node", "admin"): check_node_admin,
}
