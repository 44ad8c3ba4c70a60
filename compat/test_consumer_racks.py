"""KIP-848 consumer groups whose members and brokers have racks, on Samsa and Apache Kafka 4.3.1.

A broker with `broker.rack=r1` on each side (this module's own targets) and three confluent-kafka
(librdkafka) consumers with `group.protocol=consumer` and `client.rack` r1, r2 and r9 (a rack no
replica is in). Kafka 4.3.1's server assignors do not read racks (its `range` and `uniform`
assignment is the same with or without them; racks only enter the topic metadata hash, whose
change bumps the group epoch): the range assignor's assignment is compared whole, the uniform
assignor's balance, and ConsumerGroupDescribe reports each member's rack id.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.types import GroupId

from broker.testing import SamsaProcess
from compat.conftest import SAMSA_SETTINGS, TARGETS, Targets
from compat.kafka import KafkaJarProcess
from protocol.errors import ErrorCode
from tests.support.raw_client import RawClient

RACKS = ("r1", "r2", "r9")


def _start_samsa(directory: Path) -> SamsaProcess:
    return SamsaProcess(directory, {**SAMSA_SETTINGS, "broker.rack": "r1"}).start()


def _start_kafka(directory: Path) -> KafkaJarProcess:
    kafka = KafkaJarProcess({"broker.rack": "r1"}, data_dir=directory)
    kafka.name = "kafka-rack"
    return kafka.start()


@pytest.fixture(params=TARGETS)
def kafka_target(request: pytest.FixtureRequest, targets: Targets) -> Any:
    """This module's targets: a Samsa and a Kafka whose broker is in rack r1."""
    targets.register("samsa-rack", _start_samsa)
    targets.register("kafka-rack", _start_kafka)
    return targets.get(f"{request.param}-rack")


def _racks(target: Any) -> list[dict]:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = target.bootstrap_servers
    prefix = "rdk-racks"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(f"{prefix}-a", 6, 1)]).values():
        f.result(30)
    port = int(bs.rsplit(":", 1)[1])

    def names(c: Any) -> list[str]:
        return sorted(f"{tp.topic[len(prefix) + 1:]}-{tp.partition}" for tp in c.assignment())

    obs: list[dict] = []
    for assignor in ("range", "uniform"):
        group = f"{prefix}-g-{assignor}"
        members = [
            Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                      "group.remote.assignor": assignor, "client.rack": rack, "enable.auto.commit": False})
            for rack in RACKS
        ]  # fmt: skip
        try:
            for c in members:
                c.subscribe([f"{prefix}-a"])
            deadline, got = time.monotonic() + 60, [[] for _ in members]
            while time.monotonic() < deadline:
                for c in members:
                    c.poll(0.1)
                got = [names(c) for c in members]
                if sorted(p for a in got for p in a) == sorted(f"a-{p}" for p in range(6)) and all(got):
                    break
            with RawClient(port, timeout=30) as client:
                d = client.request(ConsumerGroupDescribeRequest(group_ids=(GroupId(group),),
                                                                include_authorized_operations=False)).groups[0]
            obs.append({
                "step": "three-members", "assignor": assignor, "sizes": sorted(len(a) for a in got),
                "assignment": sorted(got) if assignor == "range" else "balanced",
                "describe": ErrorCode(d.error_code).name, "state": d.group_state,
                "racks": sorted(str(m.rack_id) for m in d.members),
            })  # fmt: skip
        finally:
            for c in members:
                c.close()
    return obs


@pytest.mark.compat(client="confluent-kafka", scenario="KIP-848 consumer groups with racks")
def test_confluent_consumer_racks(differential: Any) -> None:
    obs = differential("confluent-consumer-racks", _racks)
    assert [o["sizes"] for o in obs] == [[2, 2, 2], [2, 2, 2]]
    assert obs[0]["assignment"] == [["a-0", "a-1"], ["a-2", "a-3"], ["a-4", "a-5"]]
    assert all(o["racks"] == list(RACKS) and o["describe"] == "none" for o in obs)
