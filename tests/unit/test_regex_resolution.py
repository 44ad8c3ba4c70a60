"""KIP-848 regular expressions resolved off the heartbeat (broker/coordinator/regex_resolution.py),
on an in-memory coordinator partition with a settable clock: when a resolution is due (a new
regular expression, topics created, group.consumer.regex.refresh.interval.ms, never within 10 s),
what it keeps (topics the member's principal may describe), its records and their replay."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

import pytest

from broker.config import BrokerConfig
from broker.coordinator import consumer_records as rec
from broker.coordinator.consumer_groups import ConsumerGroups, HeartbeatRequest
from broker.coordinator.loader import LoadState, decode_chunk
from controller.model import ClusterImage, PartitionRegistration, TopicRegistration
from protocol.errors import ErrorCode
from protocol.records import NewRecord, build_batch
from tests.unit.test_consumer_groups import _Partition, _writer, membership

IDS = {"ra": uuid.UUID(int=1), "rb": uuid.UUID(int=2), "rsecret": uuid.UUID(int=3), "other": uuid.UUID(int=4)}


def _image(*names: str) -> ClusterImage:
    reg = {0: PartitionRegistration.from_json({"replicas": [1], "isr": [1], "leader": 1, "leader_epoch": 0})}
    return ClusterImage(cluster_id="c", controller_id=1, controller_epoch=1, brokers={},  # type: ignore[arg-type]
                        topics={n: TopicRegistration(n, IDS[n], reg) for n in names})  # fmt: skip


def _not_secret(names: Iterable[str]) -> frozenset[str]:
    return frozenset(n for n in names if n != "rsecret")


def _regex_records(written: list[NewRecord]) -> list[tuple[str | None, bytes | None]]:
    keys = [(rec.read_key(r.key), r.value) for r in written if r.key is not None]
    return [(k.member_id, v) for k, v in keys if k is not None and k.type == rec.REGULAR_EXPRESSION]


def test_resolution_timing_authorization_records_and_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_000_000]
    monkeypatch.setattr("broker.clock.now_ms", lambda: now[0])
    image = [_image("ra", "rsecret", "other")]

    async def run() -> None:
        config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "0",
                                                  "group.consumer.regex.refresh.interval.ms": "30000"})  # fmt: skip
        part, written = _Partition(), []
        groups = ConsumerGroups(config, lambda: image[0], lambda _: (ErrorCode.none, part), _writer(written),
                                membership())  # fmt: skip

        async def beat(epoch: int) -> tuple[int, dict]:
            req = HeartbeatRequest("g", "a", epoch) if epoch else HeartbeatRequest(
                "g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="r.*", owned={})
            answer = await groups.heartbeat(req, "c", "/h", _not_secret)
            await asyncio.sleep(0.01)  # the resolution it scheduled runs, its records are written
            return answer.member_epoch, {t: set(ps) for t, ps in (answer.assignment or {}).items()}

        # the join's answer does not wait for the resolution; the next heartbeat gets its topics,
        # without the one the principal may not describe
        assert await beat(0) == (1, {})
        group = part.groups["g"].consumer
        assert group is not None and group.group_epoch == 2
        assert group.resolved_regexes["r.*"].topics == {"ra"}
        assert await beat(1) == (2, {IDS["ra"]: {0}})
        # a topic created: not resolved again within 10 s of the last resolution, then it is
        image[0] = _image("ra", "rb", "rsecret", "other")
        now[0] += 10_000
        assert await beat(2) == (2, {})
        now[0] += 1
        assert await beat(2) == (2, {})  # this one starts the resolution
        assert group.group_epoch == 3
        assert await beat(2) == (3, {IDS["ra"]: {0}, IDS["rb"]: {0}})
        resolved_at = group.resolved_regexes["r.*"].timestamp_ms
        assert resolved_at == now[0]
        # no topic created: resolved again only once group.consumer.regex.refresh.interval.ms passed
        # (the same topics: no epoch bump, a record with the new timestamp)
        now[0] += 30_000
        await beat(3)
        assert group.resolved_regexes["r.*"].timestamp_ms == resolved_at
        now[0] += 1
        records_before = len(_regex_records(written))
        await beat(3)
        assert group.resolved_regexes["r.*"].timestamp_ms == now[0] and group.group_epoch == 3
        assert len(_regex_records(written)) == records_before + 1
        # the records replayed: the same resolution
        state = LoadState()
        state.apply(decode_chunk(build_batch(written), 0))
        restored = groups.restore("g", state.consumer_groups["g"])
        assert restored.resolved_regexes == group.resolved_regexes
        assert restored.subscription_metadata == group.subscription_metadata
        # the last member leaves: the regular expression's tombstone
        assert (await groups.heartbeat(HeartbeatRequest("g", "a", -1), "c", "/h")).error == ErrorCode.none
        await asyncio.sleep(0.01)
        assert _regex_records(written)[-1] == ("r.*", None) and group.resolved_regexes == {}
        groups.close()

    asyncio.run(run())


def test_a_member_changing_to_a_resolved_regex_bumps_the_epoch_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's REGEX_UPDATED_AND_RESOLVED: a regular expression another member's resolution covers
    counts on this heartbeat; a new one only once resolved."""
    now = [1_000_000]
    monkeypatch.setattr("broker.clock.now_ms", lambda: now[0])

    async def run() -> None:
        config, _ = BrokerConfig.from_properties({"group.consumer.assignment.interval.ms": "0"})
        part, written = _Partition(), []
        groups = ConsumerGroups(config, lambda: _image("ra", "rb", "other"), lambda _: (ErrorCode.none, part),
                                _writer(written), membership())  # fmt: skip
        join = HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="ra", owned={})
        await groups.heartbeat(join, "c", "/h")
        await groups.heartbeat(HeartbeatRequest("g", "b", 0, rebalance_timeout_ms=30_000,
                                                subscribed_topic_names=("other",), owned={}), "c", "/h")  # fmt: skip
        await asyncio.sleep(0.01)
        group = part.groups["g"].consumer
        assert group is not None
        epoch = group.group_epoch
        b = await groups.heartbeat(HeartbeatRequest("g", "b", epoch, subscribed_topic_names=(),
                                                    subscribed_topic_regex="ra"), "c", "/h")  # fmt: skip
        assert group.group_epoch == epoch + 1 and b.error == ErrorCode.none
        # a changes to a regular expression nobody subscribed to: the epoch waits for its resolution
        await groups.heartbeat(HeartbeatRequest("g", "a", group.members["a"].member_epoch,
                                                subscribed_topic_regex="rb"), "c", "/h")  # fmt: skip
        assert group.group_epoch == epoch + 1
        now[0] += 10_001  # past the 10 s since the last resolution
        await groups.heartbeat(HeartbeatRequest("g", "a", group.members["a"].member_epoch), "c", "/h")
        await asyncio.sleep(0.01)
        assert group.group_epoch == epoch + 2 and set(group.resolved_regexes) == {"ra", "rb"}
        groups.close()

    asyncio.run(run())
