"""Groups seen from tools: kcat in group mode (-G), admin clients (ListGroups, DescribeGroups,
DeleteGroups, OffsetFetch, OffsetDelete), the Kafka error codes of bad group requests on the wire,
and thousands of commits that survive a restart."""

from __future__ import annotations

import datetime
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition as KTopicPartition
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest as FindCoordinatorV0
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as FindCoordinatorV4
from kio.schema.join_group.v5 import request as join_v5
from kio.schema.leave_group.v0.request import LeaveGroupRequest as LeaveGroupV0
from kio.schema.offset_commit.v8 import request as commit_v8
from kio.schema.offset_commit.v9 import request as commit_v9
from kio.schema.offset_delete.v0 import request as delete_v0
from kio.schema.offset_fetch.v1 import request as fetch_v1
from kio.schema.offset_fetch.v8 import request as fetch_v8
from kio.static.primitive import i8, i32, i64

from broker.testing import SamsaProcess
from tests.support.clients import kafka_python_await_topics
from tests.support.raw_client import RawClient

# Kafka error codes (the numbers are the contract)
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
INVALID_GROUP_ID = 24
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68

TOPIC = "events"
PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaProcess]:
    b = SamsaProcess(
        tmp_path_factory.mktemp("groups-admin") / "data",
        {"group.initial.rebalance.delay.ms": "0", "offset.metadata.max.bytes": "100", "num.partitions": "1"},
    ).start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
    for i in range(30):
        producer.send(TOPIC, f"v{i}".encode(), partition=i % PARTITIONS)
    producer.flush(30)
    producer.close()
    yield b
    b.close()


@pytest.fixture
def admin(broker: SamsaProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield a
    a.close()


def coordinator_client(broker: SamsaProcess, group: str) -> RawClient:
    """A raw connection to the group's coordinator (this single broker), once it is ready."""
    client = RawClient(broker.port)
    deadline = time.monotonic() + 15
    while True:
        resp = client.request(FindCoordinatorV0(key=group))
        if resp.error_code.value == NONE:
            assert int(resp.port) == broker.port
            return client
        assert time.monotonic() < deadline, f"no coordinator: {resp}"
        time.sleep(0.1)


def group_offsets(admin: KafkaAdminClient, group: str) -> dict[int, int]:
    return {tp.partition: om.offset for tp, om in admin.list_group_offsets(group).get(group, {}).items()}


# -- kcat ----------------------------------------------------------------------------------------


def test_kcat_group_mode_commits_offsets_visible_through_offset_fetch(broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    out = subprocess.run(
        [
            "kcat", "-b", broker.bootstrap_servers, "-G", "kcat-group", TOPIC,
            "-o", "beginning", "-e", "-q", "-f", "%p:%o\n",
            "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
        ],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen = {tuple(map(int, line.split(":"))) for line in out.stdout.split()}
    assert seen == {(p, o) for p in range(PARTITIONS) for o in range(10)}
    assert group_offsets(admin, "kcat-group") == {p: 10 for p in range(PARTITIONS)}
    listed = {g["group_id"]: g for g in admin.list_groups()}
    assert listed["kcat-group"]["group_state"] == "Empty"
    assert listed["kcat-group"]["protocol_type"] == "consumer"


# -- admin clients -------------------------------------------------------------------------------


def test_list_describe_delete_groups(broker: SamsaProcess, admin: KafkaAdminClient) -> None:
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=broker.bootstrap_servers, group_id="admin-group",
        client_id="admin-test-consumer", auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    try:
        kafka_python_await_topics(consumer, TOPIC)
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < PARTITIONS:
            consumer.poll(timeout_ms=200)
            assert time.monotonic() < deadline, "consumer never got its partitions"
        consumer.commit({KTopicPartition(TOPIC, 0): _offset_and_metadata(4, "note")})

        described = admin.describe_groups(["admin-group"])["admin-group"]
        assert described["group_state"] == "Stable"
        assert described["protocol_type"] == "consumer"
        (member,) = described["members"]
        assert member["client_id"] == "admin-test-consumer"
        assert member["client_host"] == "/127.0.0.1"
        assert {p for a in member["member_assignment"]["assigned_partitions"] for p in a["partitions"]} == {0, 1, 2}
        assert any(g["group_id"] == "admin-group" and g["group_state"] == "Stable" for g in admin.list_groups())

        # the librdkafka admin client lists it too, with the state filter
        rd = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        result = rd.list_consumer_groups(request_timeout=10).result()
        assert "admin-group" in {g.group_id for g in result.valid}

        assert admin.delete_groups(["admin-group"])["admin-group"] != "OK"  # NON_EMPTY_GROUP
        offsets = admin.list_group_offsets("admin-group")["admin-group"]
        assert offsets[KTopicPartition(TOPIC, 0)].offset == 4
        assert offsets[KTopicPartition(TOPIC, 0)].metadata == "note"
    finally:
        consumer.close()
    assert admin.describe_groups(["admin-group"])["admin-group"]["group_state"] == "Empty"
    assert admin.delete_groups(["admin-group"])["admin-group"] == "OK"
    assert group_offsets(admin, "admin-group") == {}
    assert "admin-group" not in {g["group_id"] for g in admin.list_groups()}
    assert admin.describe_groups(["admin-group"])["admin-group"]["group_state"] == "Dead"


# AclOperation codes
READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS = 3, 6, 8, 10, 11


def test_describe_groups_authorized_operations(broker: SamsaProcess) -> None:
    """With no authorizer every group operation is allowed, and Kafka 4.x has five of them (the
    franz-go version sweep in compat/ found Samsa reporting only READ, DELETE and DESCRIBE)."""
    with coordinator_client(broker, "ops-group") as c:
        assert _errors(c.request(_commit_v8("ops-group", -1, "", [(TOPIC, 0, 1, None)]))) == {(TOPIC, 0): NONE}
        asked = c.request(DescribeGroupsV5(groups=("ops-group",), include_authorized_operations=True))  # type: ignore[arg-type]
        (group,) = asked.groups
        assert (group.error_code.value, group.group_state) == (NONE, "Empty")
        ops = int(group.authorized_operations)
        assert {op for op in range(32) if ops & (1 << op)} == {READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS}
        not_asked = c.request(DescribeGroupsV5(groups=("ops-group",), include_authorized_operations=False))  # type: ignore[arg-type]
        assert int(not_asked.groups[0].authorized_operations) == -2147483648  # AUTHORIZED_OPERATIONS_OMITTED


def _offset_and_metadata(offset: int, metadata: str) -> Any:
    from kafka.structs import OffsetAndMetadata

    try:
        return OffsetAndMetadata(offset, metadata, -1)
    except TypeError:
        return OffsetAndMetadata(offset, metadata)


# -- the wire ------------------------------------------------------------------------------------


def _commit_v8(group: str, generation: int, member: str, partitions: list[tuple[str, int, int, str | None]]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for topic, p, offset, metadata in partitions:
        by_topic.setdefault(topic, []).append(
            commit_v8.OffsetCommitRequestPartition(
                partition_index=i32(p), committed_offset=i64(offset), committed_leader_epoch=i32(-1), committed_metadata=metadata
            )
        )
    return commit_v8.OffsetCommitRequest(
        group_id=group,  # type: ignore[arg-type]
        generation_id_or_member_epoch=i32(generation),
        member_id=member,
        group_instance_id=None,
        topics=tuple(commit_v8.OffsetCommitRequestTopic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),  # type: ignore[arg-type]
    )


def _errors(resp: Any) -> dict[tuple[str, int], int]:
    return {(t.name, int(p.partition_index)): p.error_code.value for t in resp.topics for p in t.partitions}


def test_offset_commit_errors(broker: SamsaProcess) -> None:
    with coordinator_client(broker, "wire-group") as c:
        resp = c.request(
            _commit_v8("wire-group", -1, "", [(TOPIC, 0, 5, "ok"), (TOPIC, 9, 1, None), ("no-such-topic", 0, 1, None), (TOPIC, 1, 7, "x" * 101)])
        )
        assert _errors(resp) == {
            (TOPIC, 0): NONE,
            (TOPIC, 9): UNKNOWN_TOPIC_OR_PARTITION,
            ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
            (TOPIC, 1): OFFSET_METADATA_TOO_LARGE,
        }
        assert set(_errors(c.request(_commit_v8("", -1, "", [(TOPIC, 0, 1, None)]))).values()) == {INVALID_GROUP_ID}
        assert set(_errors(c.request(_commit_v8("x" * 40000, -1, "", [(TOPIC, 0, 1, None)]))).values()) == {INVALID_GROUP_ID}
        # a generation for a group that does not exist: ILLEGAL_GENERATION, v9 GROUP_ID_NOT_FOUND
        assert set(_errors(c.request(_commit_v8("never-joined", 3, "m", [(TOPIC, 0, 1, None)]))).values()) == {ILLEGAL_GENERATION}
        v9 = commit_v9.OffsetCommitRequest(
            group_id="never-joined",  # type: ignore[arg-type]
            generation_id_or_member_epoch=i32(3), member_id="m", group_instance_id=None,
            topics=(commit_v9.OffsetCommitRequestTopic(name=TOPIC, partitions=(commit_v9.OffsetCommitRequestPartition(  # type: ignore[arg-type]
                partition_index=i32(0), committed_offset=i64(1), committed_leader_epoch=i32(-1), committed_metadata=None),)),),
        )  # fmt: skip
        assert set(_errors(c.request(v9)).values()) == {GROUP_ID_NOT_FOUND}

        # v1 OffsetFetch (kafka-python 2.0.2's version) and the v8 multi-group form
        v1 = c.request(fetch_v1.OffsetFetchRequest(group_id="wire-group", topics=(fetch_v1.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(i32(0), i32(2))),)))  # type: ignore[arg-type]
        assert [(int(p.partition_index), int(p.committed_offset), p.metadata) for p in v1.topics[0].partitions] == [(0, 5, "ok"), (2, -1, "")]
        v8 = c.request(
            fetch_v8.OffsetFetchRequest(
                groups=(
                    fetch_v8.OffsetFetchRequestGroup(group_id="wire-group", topics=None),  # type: ignore[arg-type]
                    fetch_v8.OffsetFetchRequestGroup(group_id="", topics=None),  # type: ignore[arg-type]
                ),
                require_stable=True,
            )
        )
        first, second = v8.groups
        assert first.error_code.value == NONE
        assert [(t.name, int(p.partition_index), int(p.committed_offset)) for t in first.topics for p in t.partitions] == [(TOPIC, 0, 5)]
        assert second.error_code.value == INVALID_GROUP_ID

        deleted = c.request(delete_v0.OffsetDeleteRequest(group_id="wire-group", topics=(delete_v0.OffsetDeleteRequestTopic(name=TOPIC, partitions=(delete_v0.OffsetDeleteRequestPartition(partition_index=i32(0)),)),)))  # type: ignore[arg-type]
        assert deleted.error_code.value == NONE and deleted.topics[0].partitions[0].error_code.value == NONE
        missing = c.request(delete_v0.OffsetDeleteRequest(group_id="nobody", topics=()))  # type: ignore[arg-type]
        assert missing.error_code.value == GROUP_ID_NOT_FOUND


def test_join_and_leave_errors(broker: SamsaProcess) -> None:
    def join(group: str, session_ms: int, member_id: str = "") -> Any:
        return join_v5.JoinGroupRequest(
            group_id=group,  # type: ignore[arg-type]
            session_timeout=datetime.timedelta(milliseconds=session_ms),
            rebalance_timeout=datetime.timedelta(milliseconds=10000),
            member_id=member_id, group_instance_id=None, protocol_type="consumer",
            protocols=(join_v5.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00"),),
        )  # fmt: skip

    with coordinator_client(broker, "join-errors") as c:
        assert c.request(join("", 10000)).error_code.value == INVALID_GROUP_ID
        assert c.request(join("join-errors", 10)).error_code.value == INVALID_SESSION_TIMEOUT
        assert c.request(join("join-errors", 10000, "who-am-i")).error_code.value == UNKNOWN_MEMBER_ID
        assert c.request(LeaveGroupV0(group_id="join-errors", member_id="who-am-i")).error_code.value == UNKNOWN_MEMBER_ID
        # FindCoordinator v4: a batch of keys, each answered on its own; key type 1 is a transaction's
        found = c.request(FindCoordinatorV4(key_type=i8(0), coordinator_keys=("a", "b")))
        assert [(x.key, x.error_code.value, int(x.port)) for x in found.coordinators] == [("a", NONE, broker.port), ("b", NONE, broker.port)]
        txn = c.request(FindCoordinatorV4(key_type=i8(1), coordinator_keys=("tx",)))
        assert [(x.key, x.error_code.value, int(x.port)) for x in txn.coordinators] == [("tx", NONE, broker.port)]


def test_thousands_of_commits_and_a_restart(tmp_path: Path) -> None:
    broker = SamsaProcess(tmp_path / "data", {"num.partitions": "1", "offsets.topic.num.partitions": "5"}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        admin.create_topics([NewTopic("many", 2, 1)])
        admin.close()
        with coordinator_client(broker, "busy") as c:
            for i in range(3000):
                resp = c.request(_commit_v8("busy", -1, "", [("many", 0, i, f"m{i}"), ("many", 1, 2 * i, None)]))
                assert set(_errors(resp).values()) == {NONE}
        broker.kill()
        broker.start()
        with coordinator_client(broker, "busy") as c:
            deadline = time.monotonic() + 30
            while True:
                resp = c.request(fetch_v1.OffsetFetchRequest(group_id="busy", topics=(fetch_v1.OffsetFetchRequestTopic(name="many", partition_indexes=(i32(0), i32(1))),)))  # type: ignore[arg-type]
                parts = resp.topics[0].partitions
                if parts[0].error_code.value == NONE:
                    break
                assert time.monotonic() < deadline, f"coordinator never loaded: {resp}"
                time.sleep(0.1)
            assert [(int(p.committed_offset), p.metadata) for p in parts] == [(2999, "m2999"), (5998, "")]
        assert "groups loaded" in broker.read_log()
    finally:
        broker.close()
