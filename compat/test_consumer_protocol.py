"""KIP-848 consumer groups (group.protocol=consumer) on Samsa and Apache Kafka 4.3.1.

- Java kafka-clients 3.9 (ConsumerGroupHeartbeat v0, ConsumerGroupDescribe v0) and 4.x (v1):
  compat/jvm/harness/ConsumerProtocolHarness.java: three members subscribed by topic names settle
  with each server assignor and one leaves (the range assignor's assignment compared whole, the
  uniform assignor's balance), commit, and a member subscribed by regular expression (4.x: the
  broker evaluates it) resumes at the committed offsets; the AdminClient describes and lists.
- confluent-kafka (librdkafka) with group.protocol=consumer: the same rebalances and resume.
- Bad input as raw requests: Kafka's validation messages, FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID,
  a consumer heartbeat on a classic group Kafka does not convert (another protocol type),
  static members (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, the -2 temporary leave),
  UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, OffsetCommit/OffsetFetch v9 member epochs
  (STALE_MEMBER_EPOCH; older epochs per partition: test_consumer_protocol_epochs.py) and
  ConsumerGroupDescribe of a classic group.
- kafka-consumer-groups.sh on a group a console consumer with group.protocol=consumer left: list by
  type, describe (offsets, state, members), reset-offsets, delete.
"""

from __future__ import annotations

import datetime
import re
import time
import uuid
from typing import Any

import pytest
from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest as ClassicHeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.leave_group.v5.request import LeaveGroupRequest, MemberIdentity
from kio.schema.offset_commit.v8.request import OffsetCommitRequest as OffsetCommitRequestV8
from kio.schema.offset_commit.v8.request import OffsetCommitRequestPartition as PartitionV8
from kio.schema.offset_commit.v8.request import OffsetCommitRequestTopic as TopicV8
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_fetch.v9.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.schema.txn_offset_commit.v5.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from compat.jvm import CLIENT_CLASSPATHS, run_main, run_tool
from compat.test_cli_tools import _norm
from protocol.errors import ErrorCode
from tests.support import fidelity
from tests.support import txn_requests as txn
from tests.support.consumer_protocol import GROUP, describe, heartbeat, join
from tests.support.raw_client import RawClient

VERSIONS = {"clients-3.9": "java 3.9", "clients-4": "java 4.x"}


def _prefix(cp: str) -> str:
    return f"{'j39' if cp == 'clients-3.9' else 'j4'}-kip848"


def _java(cp: str) -> Any:
    def run(target: Any) -> list[dict]:
        lines = run_main(cp, "ConsumerProtocolHarness", target.bootstrap_servers, _prefix(cp), timeout=240)
        return lines[1:]  # drop "start" (the client version, same on both targets)

    return run


@pytest.mark.parametrize(
    "cp",
    [
        pytest.param(cp, marks=pytest.mark.compat(client=VERSIONS[cp], scenario="KIP-848 consumer groups"), id=cp)
        for cp in CLIENT_CLASSPATHS
    ],
)
def test_java_consumer_protocol(cp: str, differential: Any) -> None:
    obs = differential(f"java-{cp}-consumer-protocol", _java(cp))
    steps = {o["step"]: o for o in obs if o["step"] not in ("describe", "three-members", "member-left")}
    three = [o for o in obs if o["step"] == "three-members"]
    assert [o["sizes"] for o in three] == [[3, 3, 3], [3, 3, 3]]
    assert three[0]["assignment"] == [["a-0", "a-1", "b-0"], ["a-2", "a-3", "b-1"], ["a-4", "a-5", "b-2"]]
    left = [o for o in obs if o["step"] == "member-left"]
    assert left[0]["assignment"] == [["a-0", "a-1", "a-2", "b-0", "b-1"], ["a-3", "a-4", "a-5", "b-2"]]
    assert left[1]["sizes"] == [4, 5]
    assert steps["committed"]["records"] == 6 and steps["committed"]["offsetSum"] == 6
    assert steps["resumed"]["records"] == 0 and steps["resumed"]["positionSum"] == 6
    assert steps["listed"]["groups"] == ["-g-range", "-g-resume", "-g-uniform"]


# -- confluent-kafka -------------------------------------------------------------------------------


def _confluent(target: Any) -> list[dict]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = target.bootstrap_servers
    prefix = "rdk-kip848"
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(f"{prefix}-a", 6, 1), NewTopic(f"{prefix}-b", 3, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": bs})
    for p in range(6):
        producer.produce(f"{prefix}-a", b"r", partition=p)
    producer.flush(30)

    def consumer(group: str, assignor: str) -> Any:
        return Consumer({
            "bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
            "group.remote.assignor": assignor, "enable.auto.commit": False, "auto.offset.reset": "earliest",
        })  # fmt: skip

    def names(c: Any) -> list[str]:
        return sorted(f"{tp.topic[len(prefix) + 1:]}-{tp.partition}" for tp in c.assignment())

    def settle(group: str, members: list[Any], total: int) -> list[list[str]]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for c in members:
                c.poll(0.1)
            got = [names(c) for c in members]
            if sum(len(a) for a in got) == total and len({p for a in got for p in a}) == total:
                d = admin.describe_consumer_groups([group])[group].result(30)
                if d.state.name == "STABLE" and len(d.members) == len(members):
                    return sorted(got)
        raise AssertionError(f"{group} did not settle")

    obs: list[dict] = []
    for assignor in ("range", "uniform"):
        group = f"{prefix}-g-{assignor}"
        members = [consumer(group, assignor) for _ in range(3)]
        try:
            for c in members:
                c.subscribe([f"{prefix}-a", f"{prefix}-b"])
            three = settle(group, members, 9)
            obs.append({"step": "three-members", "assignor": assignor, "sizes": sorted(len(a) for a in three),
                        "assignment": three if assignor == "range" else "balanced"})  # fmt: skip
            d = admin.describe_consumer_groups([group])[group].result(30)
            obs.append({"step": "describe", "type": d.type.name, "assignor": d.partition_assignor,
                        "members": len(d.members)})  # fmt: skip
            members.pop().close()
            two = settle(group, members, 9)
            obs.append({"step": "member-left", "assignor": assignor, "sizes": sorted(len(a) for a in two),
                        "assignment": two if assignor == "range" else "balanced"})  # fmt: skip
        finally:
            for c in members:
                c.close()
    group = f"{prefix}-g-resume"
    c = consumer(group, "uniform")
    c.subscribe([f"{prefix}-a"])
    read, deadline = 0, time.monotonic() + 60
    while read < 6 and time.monotonic() < deadline:
        read += len([m for m in c.consume(10, 0.1) if m.error() is None])
    c.commit(asynchronous=False)
    obs.append({"step": "committed", "records": read,
                "offsets": sorted(tp.offset for tp in c.committed(c.assignment(), 30))})  # fmt: skip
    c.close()
    c = consumer(group, "uniform")
    c.subscribe([f"^{prefix}-[a]$"])  # librdkafka sends a "^"-regex to the broker (KIP-848)
    deadline, n = time.monotonic() + 60, 0
    while len(c.assignment()) < 6 and time.monotonic() < deadline:
        n += len([m for m in c.consume(10, 0.1) if m.error() is None])
    n += len([m for m in c.consume(10, 0.5) if m.error() is None])
    obs.append({"step": "resumed", "assignment": names(c), "records": n})
    c.close()
    return obs


@pytest.mark.compat(client="confluent-kafka", scenario="KIP-848 consumer groups")
def test_confluent_consumer_protocol(differential: Any) -> None:
    obs = differential("confluent-consumer-protocol", _confluent)
    steps = [o for o in obs if o["step"] == "three-members"]
    assert steps[0]["assignment"] == [["a-0", "a-1", "b-0"], ["a-2", "a-3", "b-1"], ["a-4", "a-5", "b-2"]]
    assert obs[-1] == {"step": "resumed", "assignment": [f"a-{p}" for p in range(6)], "records": 0}


# -- bad input, raw ---------------------------------------------------------------------------------

TOPIC = "raw-kip848"
def _obs(step: str, answer: Any, *, message: bool = False) -> dict[str, Any]:
    o: dict[str, Any] = {"step": step, "error": ErrorCode(answer.error_code).name}
    if answer.error_code == 0:
        o["epoch"] = int(answer.member_epoch)
        if answer.assignment is not None:
            o["partitions"] = sorted(int(p) for t in answer.assignment.topic_partitions for p in t.partitions)
    if message:
        o["message"] = answer.error_message
    return o


def _commit(client: RawClient, member_id: str, epoch: int, *, version: int = 9) -> str:
    partition = {"partition_index": i32(0), "committed_offset": i64(1), "committed_leader_epoch": i32(-1),
                 "committed_metadata": ""}  # fmt: skip
    if version == 9:
        request: Any = OffsetCommitRequest(
            group_id=GroupId(GROUP), generation_id_or_member_epoch=i32(epoch), member_id=member_id,
            group_instance_id=None,
            topics=(OffsetCommitRequestTopic(name=TopicName(TOPIC),
                                             partitions=(OffsetCommitRequestPartition(**partition),)),),
        )  # fmt: skip
    else:
        request = OffsetCommitRequestV8(
            group_id=GroupId(GROUP), generation_id_or_member_epoch=i32(epoch), member_id=member_id,
            group_instance_id=None,
            topics=(TopicV8(name=TopicName(TOPIC), partitions=(PartitionV8(**partition),)),),
        )  # fmt: skip
    answer = client.request(request)
    return ErrorCode(answer.topics[0].partitions[0].error_code).name


def _fetch(client: RawClient, member_id: str | None, epoch: int) -> str:
    answer = client.request(OffsetFetchRequest(
        groups=(OffsetFetchRequestGroup(group_id=GroupId(GROUP), member_id=member_id, member_epoch=i32(epoch),
                                        topics=(OffsetFetchRequestTopics(name=TopicName(TOPIC),
                                                                         partition_indexes=(i32(0),)),)),),
        require_stable=False,
    ))  # fmt: skip
    return ErrorCode(answer.groups[0].error_code).name


TXN_ID = "raw-kip848-txn"
ASSIGNMENT_INTERVAL_S = 1.0
"""group.consumer.assignment.interval.ms: Kafka 4.3's default, and Samsa's."""


def _txn_commit(client: RawClient, pid: int, epoch: int, member_id: str = "", generation: int = -1) -> str:
    """TxnOffsetCommit v5 (transactions v2: no AddOffsetsToTxn first) to GROUP."""
    answer = txn.retry(lambda: client.request(TxnOffsetCommitRequest(
        transactional_id=TransactionalId(TXN_ID), group_id=GroupId(GROUP), producer_id=ProducerId(pid),
        producer_epoch=i16(epoch), generation_id=i32(generation), member_id=member_id,
        topics=(TxnOffsetCommitRequestTopic(name=TopicName(TOPIC), partitions=(
            TxnOffsetCommitRequestPartition(partition_index=i32(1), committed_offset=i64(1), committed_metadata=""),)),),
    )), lambda r: r.topics[0].partitions[0].error_code)  # fmt: skip
    return ErrorCode(answer.topics[0].partitions[0].error_code).name


def _bad_input(target: Any) -> list[dict[str, Any]]:
    port = int(target.bootstrap_servers.rsplit(":", 1)[1])
    obs: list[dict[str, Any]] = []
    with RawClient(port, timeout=30) as client:
        fidelity.create_topic(client, TOPIC, partitions=2)
        deadline = time.monotonic() + 60
        while True:
            found = client.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(GROUP,))).coordinators[0]
            if found.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        m1, m2, m3 = (uuid.uuid4().hex[:22] for _ in range(3))
        obs.append(_obs("v1-empty-member-id", join(client, "", topics=(TOPIC,)), message=True))
        obs.append(_obs("no-rebalance-timeout", heartbeat(client, m1, 0, topics=(TOPIC,), owned=()), message=True))
        obs.append(_obs("join-owning", heartbeat(client, m1, 0, topics=(TOPIC,), rebalance_ms=30_000,
                                           owned=(TopicPartitions(topic_id=uuid.uuid4(), partitions=(i32(0),)),)),
                        message=True))  # fmt: skip
        obs.append(_obs("no-subscription", join(client, m1), message=True))
        obs.append(_obs("epoch-below-minus-2", heartbeat(client, m1, -3), message=True))
        obs.append(_obs("static-leave-without-instance", heartbeat(client, m1, -2), message=True))
        obs.append(_obs("unknown-assignor", join(client, m1, topics=(TOPIC,), assignor="sticky"), message=True))
        obs.append(_obs("invalid-regex", join(client, m1, regex="(")))
        obs.append(_obs("join", join(client, m1, topics=(TOPIC,))))
        # the LeaveGroup case's group (below) gets its first member now as well: both groups
        # compute their first target assignment here
        leaving = "raw-kip848-leave"
        m4, m5 = (uuid.uuid4().hex[:22] for _ in range(2))
        obs.append(_obs("leave-group-join-dynamic", join(client, m4, group=leaving, topics=(TOPIC,))))
        first_targets = time.monotonic()
        obs.append(_obs("greater-epoch", heartbeat(client, m1, 5)))
        obs.append(_obs("unknown-member", heartbeat(client, m2, 1)))
        obs.append(_obs("heartbeat", heartbeat(client, m1, 1)))
        obs.append({"step": "commit-stale-epoch", "error": _commit(client, m1, 0)})
        obs.append({"step": "commit-unknown-member", "error": _commit(client, m2, 1)})
        obs.append({"step": "commit-admin-non-empty", "error": _commit(client, "", -1)})
        obs.append({"step": "commit-v8", "error": _commit(client, m1, 1, version=8)})
        obs.append({"step": "commit", "error": _commit(client, m1, 1)})
        obs.append({"step": "fetch-stale-epoch", "error": _fetch(client, m1, 0)})
        obs.append({"step": "fetch-unknown-member", "error": _fetch(client, m2, 1)})
        obs.append({"step": "fetch", "error": _fetch(client, m1, 1)})
        obs.append({"step": "fetch-admin", "error": _fetch(client, None, -1)})
        # a transactional producer commits to the non-empty group: without member information
        # (sendOffsetsToTransaction with only the group id) it may; with them they are checked
        txn.find_coordinator(client, TXN_ID)
        pid, producer_epoch = txn.init(client, TXN_ID)
        obs.append({"step": "txn-commit-no-member", "error": _txn_commit(client, pid, producer_epoch)})
        obs.append({"step": "txn-commit-stale-epoch", "error": _txn_commit(client, pid, producer_epoch, m1, 0)})
        obs.append({"step": "txn-commit-unknown-member", "error": _txn_commit(client, pid, producer_epoch, m2, 1)})
        obs.append({"step": "txn-commit", "error": _txn_commit(client, pid, producer_epoch, m1, 1)})
        obs.append({"step": "txn-abort", "error": txn.end(client, TXN_ID, pid, producer_epoch, False, version=5)[0].name})
        described = describe(client, GROUP)
        obs.append({"step": "describe", **described, "members": [e for _, e in described["members"]]})
        # A member joining within group.consumer.assignment.interval.ms (1 s on both) of the last
        # target assignment gets that target's epoch and nothing; past it, a new target (KIP-1263).
        # Which one a step sees must not depend on how fast each broker went through the steps
        # before (issue 16: a loaded Kafka passed the interval where Samsa had not), so the
        # steps that join past the first targets wait for the interval to have passed.
        time.sleep(max(0.0, first_targets + ASSIGNMENT_INTERVAL_S + 0.2 - time.monotonic()))
        obs.append(_obs("static-join", join(client, m2, instance_id="i1", topics=(TOPIC,))))
        obs.append(_obs("static-join-unreleased", join(client, m3, instance_id="i1", topics=(TOPIC,))))
        obs.append(_obs("static-temporary-leave", heartbeat(client, m2, -2, instance_id="i1")))
        obs.append(_obs("static-rejoin", join(client, m3, instance_id="i1", topics=(TOPIC,))))
        obs.append(_obs("static-fenced", heartbeat(client, m2, 1, instance_id="i1")))
        obs.append(_obs("leave", heartbeat(client, m1, -1)))
        obs.append(_obs("after-leave", heartbeat(client, m1, 1)))
        obs.append(_obs("static-leave", heartbeat(client, m3, -1, instance_id="i1")))
        described = describe(client, GROUP)
        obs.append({"step": "describe-empty", **described})
        obs.append({"step": "describe-unknown", **describe(client, "raw-kip848-nobody")})
        # a classic group of another protocol type: Kafka's default migration policy does not
        # convert it either, and says why
        other = "raw-kip848-connect"
        obs.append({"step": "classic-join", "error": _classic_join(client, other)})
        obs.append(_obs("consumer-join-classic", join(client, m1, group=other, topics=(TOPIC,)), message=True))
        obs.append(_obs("consumer-heartbeat-classic", heartbeat(client, m1, 1, group=other), message=True))
        # LeaveGroup on a consumer group of its own (an admin's removeMembersFromConsumerGroup):
        # members are fenced whatever their protocol, each identity answered
        obs.append(_obs("leave-group-join-static", join(client, m5, group=leaving, instance_id="i5", topics=(TOPIC,))))
        # classic Heartbeat and SyncGroup on the consumer group: a consumer-protocol member, an
        # unknown one, another member id with a static member's instance id
        for step, member, instance in (("consumer-member", m4, None), ("unknown", m2, None), ("fenced", m4, "i5")):
            beat_sync = _classic_heartbeat_and_sync(client, leaving, member, instance)
            obs.append({"step": f"classic-heartbeat-{step}", **beat_sync})
        identities = ((m4, None), (m2, None), (m2, "i5"), ("", "i5"), ("", "i9"))
        obs.append({"step": "leave-group", "errors": _leave_group(client, leaving, identities)})
        described = describe(client, leaving)
        obs.append({"step": "describe-after-leave-group", **described})
        obs.append(_obs("heartbeat-after-leave-group", heartbeat(client, m4, 1, group=leaving)))
    return obs


def _leave_group(client: RawClient, group: str, identities: tuple[tuple[str, str | None], ...]) -> list[str]:
    answer = client.request(LeaveGroupRequest(group_id=GroupId(group), members=tuple(
        MemberIdentity(member_id=m, group_instance_id=i, reason="compat") for m, i in identities)))  # fmt: skip
    return [ErrorCode(answer.error_code).name] + [ErrorCode(m.error_code).name for m in answer.members]


def _classic_heartbeat_and_sync(client: RawClient, group: str, member_id: str, instance: str | None) -> dict[str, str]:
    """Heartbeat v4 and SyncGroup v5 of a classic member at generation 1."""
    beat = client.request(ClassicHeartbeatRequest(
        group_id=GroupId(group), generation_id=i32(1), member_id=member_id, group_instance_id=instance))  # fmt: skip
    sync = client.request(SyncGroupRequest(
        group_id=GroupId(group), generation_id=i32(1), member_id=member_id, group_instance_id=instance,
        protocol_type="consumer", protocol_name="range", assignments=()))  # fmt: skip
    return {"heartbeat": ErrorCode(beat.error_code).name, "sync": ErrorCode(sync.error_code).name}


def _classic_join(client: RawClient, group: str) -> str:
    """A classic member of protocol type "connect" joins `group` (v9: the member id round first)."""
    def request(member_id: str) -> Any:
        return client.request(JoinGroupRequest(
            group_id=GroupId(group), session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), member_id=member_id,
            group_instance_id=None, protocol_type="connect",
            protocols=(JoinGroupRequestProtocol(name="sessioned", metadata=b"\x00"),), reason=None,
        ))  # fmt: skip

    first = request("")
    return ErrorCode(request(first.member_id).error_code).name


@pytest.mark.compat(client="raw protocol", scenario="KIP-848 bad input: validation, epochs, static members, offsets")
def test_consumer_protocol_bad_input(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("raw-consumer-protocol-errors", _bad_input)}
    assert obs["greater-epoch"]["error"] == "fenced_member_epoch"
    assert obs["unknown-member"]["error"] == "unknown_member_id"
    assert obs["commit-stale-epoch"]["error"] == "stale_member_epoch"
    assert obs["txn-commit-no-member"]["error"] == "none"
    assert obs["txn-commit-unknown-member"]["error"] == "unknown_member_id"
    assert obs["txn-commit-stale-epoch"]["error"] == "illegal_generation"
    assert obs["leave-group"]["errors"] == [
        "none", "none", "unknown_member_id", "fenced_instance_id", "none", "unknown_member_id"]
    assert obs["describe-after-leave-group"]["members"] == []
    assert obs["classic-heartbeat-fenced"] == {
        "step": "classic-heartbeat-fenced", "heartbeat": "fenced_instance_id", "sync": "fenced_instance_id"}
    assert obs["static-join-unreleased"]["error"] == "unreleased_instance_id"
    assert obs["static-fenced"]["error"] == "fenced_instance_id"
    assert obs["classic-join"]["error"] == "none"
    assert obs["consumer-join-classic"] == {
        "step": "consumer-join-classic", "error": "group_id_not_found",
        "message": "Cannot upgrade classic group raw-kip848-connect to consumer group because the group does not "
                   "use the consumer embedded protocol.",
    }  # fmt: skip


# -- kafka-consumer-groups.sh -----------------------------------------------------------------------


def _cli_norm(text: str) -> list[str]:
    out = []
    for line in _norm(text):
        line = re.sub(r"\b[A-Za-z0-9_-]{22}\b", "<member>", line)  # member ids (a Uuid's base64)
        line = re.sub(r"/?127\.0\.0\.1(:\d+)?( \(\d+\))?", "<host>", line)
        line = re.sub(r"console-consumer-\d+|consumer-cli-kip848-\d+", "<client>", line)
        out.append(line)
    return out


def _cli(target: Any) -> list[dict]:
    bs = ["--bootstrap-server", target.bootstrap_servers]
    topic, group = "cli-kip848", "cli-kip848"
    run_tool("kafka-topics", *bs, "--create", "--topic", topic, "--partitions", "2")
    run_tool("kafka-console-producer", *bs, "--topic", topic, "--reader-property", "parse.key=true",
             input="".join(f"k{i}\tv{i}\n" for i in range(10)))  # fmt: skip
    run_tool("kafka-console-consumer", *bs, "--topic", topic, "--from-beginning", "--max-messages", "10",
             "--group", group, "--consumer-property", "group.protocol=consumer", "--timeout-ms", "30000")  # fmt: skip
    obs: list[dict] = []
    r = run_tool("kafka-consumer-groups", *bs, "--list", "--type", "consumer")
    obs.append({"step": "list-consumer-type", "out": sorted(line for line in _norm(r.stdout) if line.startswith("cli-kip848"))})
    r = run_tool("kafka-consumer-groups", *bs, "--describe", "--group", group)
    obs.append({"step": "describe", "out": _cli_norm(r.stdout), "err": _norm(r.stderr)})
    r = run_tool("kafka-consumer-groups", *bs, "--describe", "--group", group, "--state")
    obs.append({"step": "describe-state", "out": _cli_norm(r.stdout)})
    r = run_tool("kafka-consumer-groups", *bs, "--describe", "--group", group, "--members")
    obs.append({"step": "describe-members", "out": _cli_norm(r.stdout), "err": _norm(r.stderr)})
    r = run_tool("kafka-consumer-groups", *bs, "--reset-offsets", "--group", group, "--topic", topic,
                 "--to-earliest", "--execute")  # fmt: skip
    obs.append({"step": "reset-execute", "out": _norm(r.stdout)})
    r = run_tool("kafka-consumer-groups", *bs, "--describe", "--group", group, "--offsets")
    obs.append({"step": "describe-after-reset", "out": _cli_norm(r.stdout)})
    r = run_tool("kafka-consumer-groups", *bs, "--delete", "--group", group)
    obs.append({"step": "delete", "out": _norm(r.stdout)})
    return obs


@pytest.mark.compat(client="kafka-consumer-groups", scenario="KIP-848 group: list by type, describe, reset-offsets, delete")
def test_consumer_groups_tool(differential: Any) -> None:
    obs = {o["step"]: o for o in differential("cli-consumer-protocol", _cli)}
    assert obs["list-consumer-type"]["out"] == ["cli-kip848 Consumer"]
    assert any("successful" in line for line in obs["delete"]["out"])


# -- the group's records, read by Kafka's own classes ----------------------------------------------------


def test_records_read_by_kafka() -> None:
    """consumer_records.py's bytes, parsed by the generated record classes of Kafka 4.3.1's
    group-coordinator jar: every field read back, no byte left over."""
    from broker.coordinator import consumer_records as rec
    from broker.coordinator.consumer_group import (
        ClassicMemberMetadata,
        MemberState,
        ResolvedRegularExpression,
    )

    t = uuid.UUID(int=5)
    records = {
        "ConsumerGroupMetadataKey": rec.key_bytes(rec.ConsumerGroupKey(rec.GROUP_METADATA, "g")),
        "ConsumerGroupMemberMetadataKey": rec.key_bytes(rec.ConsumerGroupKey(rec.MEMBER_METADATA, "g", "m")),
        "ConsumerGroupMetadataValue": rec.group_epoch_value(7),
        "ConsumerGroupMemberMetadataValue": rec.member_metadata_value(
            rec.MemberMetadataValue("i1", None, "cid", "/h", ("a", "b"), "re.*", 30000, "range")),
        "ConsumerGroupMemberMetadataValue#classic": rec.member_metadata_value(  # a classic member (online migration)
            rec.MemberMetadataValue("i1", None, "cid", "/h", ("a",), None, 30000, None,
                                    ClassicMemberMetadata(45000, (("range", b"\x00\x03"), ("cooperative-sticky", b""))))),
        "ConsumerGroupTargetAssignmentMetadataValue": rec.target_metadata_value(rec.TargetMetadataValue(3, 1_700_000_000_000)),
        "ConsumerGroupTargetAssignmentMemberValue": rec.target_member_value({t: frozenset({0, 2})}),
        "ConsumerGroupCurrentMemberAssignmentValue": rec.current_assignment_value(rec.CurrentAssignmentValue(
            4, 3, MemberState.UNREVOKED_PARTITIONS, {t: frozenset({1, 3})}, {t: frozenset({2})},
            {(t, 1): 2, (t, 3): 4, (t, 2): 1})),  # KIP-1251 assignment epochs
        "ConsumerGroupRegularExpressionKey": rec.key_bytes(rec.ConsumerGroupKey(rec.REGULAR_EXPRESSION, "g", "re.*")),
        "ConsumerGroupRegularExpressionValue": rec.regular_expression_value(
            ResolvedRegularExpression(frozenset({"rb", "ra"}), 42, 1_700_000_000_001)),
    }  # fmt: skip
    lines = run_main("kafka", "ConsumerGroupRecords", *(f"{k}={v.hex()}" for k, v in records.items()))
    got = {line["step"]: line for line in lines if line["step"] != "end"}
    assert all(line["left"] == 0 for line in got.values()), got
    tid = "AAAAAAAAAAAAAAAAAAAABQ"
    assert got["ConsumerGroupMetadataKey"]["version"] == 3
    assert got["ConsumerGroupMemberMetadataKey"]["read"] == "ConsumerGroupMemberMetadataKey(groupId='g', memberId='m')"
    assert got["ConsumerGroupMetadataValue"]["read"] == "ConsumerGroupMetadataValue(epoch=7, metadataHash=0)"
    assert got["ConsumerGroupMemberMetadataValue"]["read"] == (
        "ConsumerGroupMemberMetadataValue(instanceId='i1', rackId=null, clientId='cid', clientHost='/h', "
        "subscribedTopicNames=[a, b], subscribedTopicRegex='re.*', rebalanceTimeoutMs=30000, serverAssignor='range', "
        "classicMemberMetadata=null)")  # a consumer-protocol member: null, not missing (Kafka reads that as classic)
    assert got["ConsumerGroupMemberMetadataValue#classic"]["read"].endswith(
        "classicMemberMetadata=ClassicMemberMetadata(sessionTimeoutMs=45000, supportedProtocols=["
        "ClassicProtocol(name='range', metadata=[0, 3]), ClassicProtocol(name='cooperative-sticky', metadata=[])]))")
    assert got["ConsumerGroupTargetAssignmentMetadataValue"]["read"] == (
        "ConsumerGroupTargetAssignmentMetadataValue(assignmentEpoch=3, assignmentTimestamp=1700000000000)")
    assert got["ConsumerGroupTargetAssignmentMemberValue"]["read"] == (
        f"ConsumerGroupTargetAssignmentMemberValue(topicPartitions=[TopicPartition(topicId={tid}, partitions=[0, 2])])")
    assert got["ConsumerGroupCurrentMemberAssignmentValue"]["read"] == (
        "ConsumerGroupCurrentMemberAssignmentValue(memberEpoch=4, previousMemberEpoch=3, state=1, "
        f"assignedPartitions=[TopicPartitions(topicId={tid}, partitions=[1, 3], assignmentEpochs=[2, 4])], "
        f"partitionsPendingRevocation=[TopicPartitions(topicId={tid}, partitions=[2], assignmentEpochs=[1])])")
    assert got["ConsumerGroupRegularExpressionKey"]["version"] == 16
    assert got["ConsumerGroupRegularExpressionKey"]["read"] == (
        "ConsumerGroupRegularExpressionKey(groupId='g', regularExpression='re.*')")
    assert got["ConsumerGroupRegularExpressionValue"]["read"] == (
        "ConsumerGroupRegularExpressionValue(topics=[ra, rb], version=42, timestamp=1700000000001)")
