"""Java kafka-clients 3.9 and 4.x against Samsa and Apache Kafka: compat/jvm/harness/Harness.java.

The "clients" script: the producer with default settings (idempotent, acks=all) writes keys,
values, headers and explicit and producer-clock timestamps to two partitions and auto-creates a
topic; a consumer with assign reads them back, checks positions, beginning/end offsets,
offsetsForTimes and seek; position validation through OffsetForLeaderEpoch v3+ is exercised by
seeking with a leader epoch past the epoch's end (default reset: moves to the end; reset none:
LogTruncationException with the divergent offset); groups commit, fetch, subscribe, resume and are
described, listed and deleted through the AdminClient.

The "admin" script: describeCluster, createTopics (and its errors), describeTopics, listTopics,
describeConfigs, incrementalAlterConfigs, createPartitions, listOffsets by spec, deleteRecords,
deleteTopics.
"""

from __future__ import annotations

import pytest

from compat.jvm import CLIENT_CLASSPATHS, run_harness

VERSIONS = {"clients-3.9": "java 3.9", "clients-4": "java 4.x"}


def by_step(obs: list[dict], step: str) -> list[dict]:
    return [o for o in obs if o["step"] == step]


def one(obs: list[dict], step: str) -> dict:
    found = by_step(obs, step)
    assert len(found) == 1, (step, found)
    return found[0]


def _prefix(cp: str, scenario: str) -> str:
    return f"{'j39' if cp == 'clients-3.9' else 'j4'}-{scenario}"


def _run(cp: str, scenario: str):
    def run(target):
        lines = run_harness(cp, target.bootstrap_servers, scenario, _prefix(cp, scenario))
        return lines[1:]  # drop "start" (the client version, same on both targets)

    return run


def _params(scenario: str) -> list:
    return [pytest.param(cp, marks=pytest.mark.compat(client=VERSIONS[cp], scenario=scenario), id=cp) for cp in CLIENT_CLASSPATHS]


@pytest.mark.parametrize("cp", _params("produce, consume, position validation, groups"))
def test_clients(cp, differential):
    obs = differential(f"java-{cp}-clients", _run(cp, "clients"))
    topic = _prefix(cp, "clients") + "-data"
    produced = by_step(obs, "produced")
    assert [(p["partition"], p["offset"]) for p in produced] == [(0, i) for i in range(5)] + [(1, i) for i in range(3)]
    assert produced[0]["timestamp"] == 1_700_000_000_000 and produced[3]["timestamp"] == "now"
    consumed = by_step(obs, "consumed")
    assert len(consumed) == 8
    assert consumed[0]["headers"] == [["h1", "a"], ["h2", None], ["h1", "b"]]
    assert consumed[1]["key"] is None and consumed[2]["value"] is None
    assert {c["timestampType"] for c in consumed} == {"CreateTime"}
    assert one(obs, "produced-auto") == {"step": "produced-auto", "partition": 0, "offset": 0}
    assert one(obs, "endOffsets")["offsets"] == {f"{topic}-0": 5, f"{topic}-1": 3}
    assert one(obs, "offsetsForTimes-none")["result"] == {f"{topic}-0": None}
    assert one(obs, "offsetsForTimes-between")["result"][f"{topic}-0"].startswith("2@")
    assert one(obs, "seek")["offsets"] == [3, 4]
    assert one(obs, "validate-default")["position"] == 5
    v = one(obs, "validate-none")
    assert v["error"] == "LogTruncationException" and v["divergent"][f"{topic}-0"].startswith("5 ")
    assert one(obs, "out-of-range-none")["error"].startswith("OffsetOutOfRangeException")
    assert one(obs, "committed")["result"][f"{topic}-0"].startswith("3 'meta-3'")
    assert one(obs, "subscribed")["records"] == 8
    assert one(obs, "resubscribed")["records"] == 0
    assert one(obs, "admin-describe-group")["state"].upper() == "EMPTY"
    assert one(obs, "admin-delete-group")["again"] == "GroupIdNotFoundException"


@pytest.mark.parametrize("cp", _params("AdminClient"))
def test_admin(cp, differential):
    obs = differential(f"java-{cp}-admin", _run(cp, "admin"))
    assert one(obs, "describeCluster")["nodes"] == ["1@127.0.0.1"]
    assert one(obs, "createTopics")["error"] == "InvalidPartitionsException"
    assert one(obs, "createTopics-rf")["error"] == "InvalidReplicationFactorException"
    assert one(obs, "createTopics-name")["error"] == "InvalidTopicException"
    assert one(obs, "describeTopics-unknown")["error"] == "UnknownTopicOrPartitionException"
    assert len(one(obs, "createPartitions")["partitions"]) == 5
    lo = {o["spec"]: o["offset"] for o in by_step(obs, "listOffsets")}
    assert lo == {"earliest": 0, "latest": 4, "maxTimestamp": 2, "ts-4000": 0, "ts-1000": 0, "ts-future": -1}
    assert one(obs, "deleteRecords")["lowWatermark"] == 2
    assert one(obs, "listOffsets-after-delete")["earliest"] == 2
    assert one(obs, "deleteTopics-again")["error"] == "UnknownTopicOrPartitionException"
