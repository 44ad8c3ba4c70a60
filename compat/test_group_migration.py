"""KIP-848 online migration (group.consumer.migration.policy, Kafka's default bidirectional) on
Samsa and Apache Kafka 4.3.1.

- Java kafka-clients 4.x (compat/jvm/harness/clients-4/MigrationHarness.java): a rolling upgrade of
  a group of three classic members, replaced one at a time by group.protocol=consumer members (the
  first converts the classic group to a consumer group), then a rolling downgrade back (the last
  consumer-protocol member leaving converts it back to a classic group); after each step the
  group's type, its members' protocols and the assignment, and at the end every record read once
  and committed.
- confluent-kafka (librdkafka): a mixed group, two classic members joined by a consumer-protocol
  one (upgrade), which then leaves (downgrade); after each step the same observations.
- Raw requests: a static classic member joining in place of the group's only (consumer-protocol)
  member converts the group back to a classic group, keeping that member's assignment.
"""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from typing import Any

import pytest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.types import GroupId
from kio.static.primitive import i32Timedelta

from compat.jvm import run_main
from protocol.consumer_protocol import read_assignment
from protocol.errors import ErrorCode
from tests.support import fidelity
from tests.support.consumer_protocol import describe, heartbeat, join
from tests.support.raw_client import RawClient


def _java(target: Any) -> list[dict]:
    return run_main("clients-4", "MigrationHarness", target.bootstrap_servers, "j4-migration", timeout=240)[1:]


@pytest.mark.compat(client="java 4.x", scenario="KIP-848 online migration: rolling upgrade and downgrade")
def test_java_rolling_upgrade_and_downgrade(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("java-clients-4-group-migration", _java)}
    assert [obs[s]["type"] for s in ("classic", "upgrade-1", "upgrade-3", "downgrade-2", "downgrade-3")] == [
        "Classic", "Consumer", "Consumer", "Consumer", "Classic"]  # fmt: skip
    assert obs["upgrade-1"]["members"] == ["classic", "classic", "consumer"]
    assert obs["downgrade-2"]["members"] == ["classic", "classic", "consumer"]
    for step in ("classic", "upgrade-3", "downgrade-3"):
        assert obs[step]["assignment"] == [[0, 1], [2, 3], [4, 5]]
    assert obs["consumed"] == {"step": "consumed", "produced": 84, "read": 84, "readTwice": 0,
                               "committedOffsetSum": 84}  # fmt: skip


def _confluent(target: Any) -> list[dict]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = target.bootstrap_servers
    topic, group = "rdk-migration-t", "rdk-migration-g"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, 4, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bs})
    reads: dict[tuple[int, int], int] = {}

    def produce() -> None:
        for p in range(4):
            producer.produce(topic, b"r", partition=p)
        producer.flush(30)

    def consumer(protocol: str) -> Any:
        config = {"bootstrap.servers": bs, "group.id": group, "group.protocol": protocol,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"}  # fmt: skip
        if protocol == "classic":
            config |= {"partition.assignment.strategy": "range", "heartbeat.interval.ms": 500,
                       "session.timeout.ms": 10_000}  # fmt: skip
        else:
            config["group.remote.assignor"] = "range"
        c = Consumer(config)
        c.subscribe([topic])
        return c

    def poll(c: Any) -> None:
        records = [m for m in c.consume(10, 0.05) if m.error() is None]
        for m in records:
            reads[(m.partition(), m.offset())] = reads.get((m.partition(), m.offset()), 0) + 1
        if records:
            c.commit(asynchronous=False)

    def settle(step: str, members: list[Any]) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for c in members:
                poll(c)
            got = [sorted(tp.partition for tp in c.assignment()) for c in members]
            if sum(len(a) for a in got) != 4 or len({p for a in got for p in a}) != 4:
                continue
            d = admin.describe_consumer_groups([group])[group].result(30)
            if d.state.name == "STABLE" and len(d.members) == len(members):
                return {"step": step, "type": d.type.name, "members": len(d.members), "assignment": sorted(got)}
        raise AssertionError(f"{group} did not settle at {step}")

    obs: list[dict] = []
    members = [consumer("classic"), consumer("classic")]
    try:
        produce()
        obs.append(settle("classic", members))
        produce()
        members.append(consumer("consumer"))
        obs.append(settle("upgraded", members))
        produce()
        leaving = members.pop()
        poll(leaving)
        leaving.close()
        obs.append(settle("downgraded", members))
        deadline = time.monotonic() + 60  # the last records
        while len(reads) < 12 and time.monotonic() < deadline:
            for c in members:
                poll(c)
    finally:
        for c in members:
            c.close()
    committed = admin.list_consumer_group_offsets([_offsets_request(group)])[group].result(30)
    obs.append({"step": "consumed", "read": len(reads), "readTwice": sum(1 for n in reads.values() if n > 1),
                "committedOffsetSum": sum(tp.offset for tp in committed.topic_partitions)})  # fmt: skip
    return obs


def _offsets_request(group: str) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)


@pytest.mark.compat(client="confluent-kafka", scenario="KIP-848 online migration: a mixed group")
def test_confluent_mixed_group(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("confluent-group-migration", _confluent)}
    assert [obs[s]["type"] for s in ("classic", "upgraded", "downgraded")] == ["CLASSIC", "CONSUMER", "CLASSIC"]
    assert obs["upgraded"]["members"] == 3 and obs["downgraded"]["assignment"] == [[0, 1], [2, 3]]
    assert obs["consumed"] == {"step": "consumed", "read": 12, "readTwice": 0, "committedOffsetSum": 12}


def _static_replacement(target: Any) -> list[dict[str, Any]]:
    topic, group = "raw-migration-t", "raw-migration-g"
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, topic, partitions=2)
        fidelity.await_coordinator(client, group)
        m1 = uuid.uuid4().hex[:22]
        joined = join(client, m1, group=group, instance_id="i1", topics=(topic,))
        obs.append({"step": "consumer-join", "error": ErrorCode(joined.error_code).name,
                    "epoch": int(joined.member_epoch)})  # fmt: skip
        subscription = struct.pack(">hih", 1, 1, len(topic)) + topic.encode() + struct.pack(">ii", -1, 0)
        timeout = i32Timedelta.parse(datetime.timedelta(seconds=30))
        classic = client.request(JoinGroupRequest(
            group_id=GroupId(group), session_timeout=timeout, rebalance_timeout=timeout, member_id="",
            group_instance_id="i1", protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=subscription),), reason=None,
        ))  # fmt: skip
        obs.append({"step": "classic-static-join", "error": ErrorCode(classic.error_code).name,
                    "generation": int(classic.generation_id), "protocolType": classic.protocol_type,
                    "protocol": classic.protocol_name, "leader": classic.leader, "members": len(classic.members)})  # fmt: skip
        synced = client.request(SyncGroupRequest(
            group_id=GroupId(group), generation_id=classic.generation_id, member_id=classic.member_id,
            group_instance_id="i1", protocol_type="consumer", protocol_name="range", assignments=()))  # fmt: skip
        obs.append({"step": "classic-sync", "error": ErrorCode(synced.error_code).name,
                    "partitions": [list(ps) for _, ps in read_assignment(synced.assignment).partitions]})  # fmt: skip
        g = client.request(DescribeGroupsRequest(groups=(GroupId(group),), include_authorized_operations=False)).groups[0]
        obs.append({"step": "describe-groups", "error": ErrorCode(g.error_code).name, "state": g.group_state,
                    "protocolType": g.protocol_type, "protocol": g.protocol_data, "members": len(g.members)})  # fmt: skip
        beat = heartbeat(client, m1, int(joined.member_epoch), group=group, instance_id="i1")
        obs.append({"step": "old-member-heartbeat", "error": ErrorCode(beat.error_code).name,
                    "message": beat.error_message})  # fmt: skip
        described = describe(client, group)
        obs.append({"step": "consumer-group-describe", "error": described["error"], "message": described["message"]})
        # a consumer-protocol member with the instance id upgrades the group again and replaces the
        # classic member at once (no UNRELEASED_INSTANCE_ID: it does not wait for a leave)
        back = join(client, uuid.uuid4().hex[:22], group=group, instance_id="i1", topics=(topic,))
        partitions = [] if back.assignment is None else [int(p) for t in back.assignment.topic_partitions
                                                          for p in t.partitions]  # fmt: skip
        obs.append({"step": "consumer-static-join", "error": ErrorCode(back.error_code).name,
                    "epoch": int(back.member_epoch), "partitions": sorted(partitions)})  # fmt: skip
        described = describe(client, group)
        obs.append({"step": "consumer-group-describe-upgraded", "error": described["error"],
                    "state": described["state"], "epoch": described["epoch"],
                    "members": [epoch for _, epoch in described["members"]]})  # fmt: skip
    return obs


@pytest.mark.compat(client="raw protocol", scenario="KIP-848 online migration: a static classic member replaces the last consumer member")
def test_static_classic_member_downgrades_the_group(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-group-migration-static", _static_replacement)}
    assert obs["classic-static-join"]["error"] == "none"
    assert obs["classic-sync"] == {"step": "classic-sync", "error": "none", "partitions": [[0, 1]]}
    assert obs["describe-groups"]["state"] == "Stable" and obs["describe-groups"]["members"] == 1
    assert obs["old-member-heartbeat"]["error"] == "group_id_not_found"
    assert obs["consumer-static-join"]["error"] == "none"
