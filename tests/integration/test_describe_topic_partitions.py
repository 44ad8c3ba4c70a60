"""DescribeTopicPartitions v0 on the wire: topic order, unknown topics, paging with cursors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.static.primitive import i32

from broker.testing import SamsaProcess
from tests.support.raw_client import RawClient

UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaProcess]:
    b = SamsaProcess(tmp_path_factory.mktemp("dtp") / "data").start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    admin.create_topics([NewTopic("b-three", 3, 1), NewTopic("a-two", 2, 1)])
    admin.close()
    yield b
    b.close()


def _describe(broker: SamsaProcess, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):  # type: ignore[no-untyped-def]
    with RawClient(broker.port) as client:
        return client.request(
            DescribeTopicPartitionsRequest(
                topics=tuple(TopicRequest(name=n) for n in names),
                response_partition_limit=i32(limit),
                cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=i32(cursor[1])),
            )
        )


def _pages(response) -> list[tuple[str, list[int]]]:  # type: ignore[no-untyped-def]
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def test_topics_in_name_order_with_partitions(broker: SamsaProcess) -> None:
    response = _describe(broker, ["b-three", "a-two", "missing"])
    assert _pages(response) == [("a-two", [0, 1]), ("b-three", [0, 1, 2]), ("missing", [])]
    errors = {t.name: t.error_code.value for t in response.topics}
    assert errors == {"a-two": 0, "b-three": 0, "missing": UNKNOWN_TOPIC_OR_PARTITION}
    two = response.topics[0]
    assert two.topic_id.int != 0 and not two.is_internal
    p = two.partitions[0]
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) == (0, 0, (0,), (0,))
    assert p.eligible_leader_replicas == () and p.last_known_elr == ()
    assert response.next_cursor is None


def test_paging_with_cursor(broker: SamsaProcess) -> None:
    first = _describe(broker, ["a-two", "b-three"], limit=3)
    assert _pages(first) == [("a-two", [0, 1]), ("b-three", [0])]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("b-three", 1)
    second = _describe(broker, ["a-two", "b-three"], limit=3, cursor=("b-three", 1))
    assert _pages(second) == [("b-three", [1, 2])]
    assert second.next_cursor is None
    exact = _describe(broker, ["a-two", "b-three"], limit=2)
    assert _pages(exact) == [("a-two", [0, 1])]
    assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == ("b-three", 0)


def test_all_topics_when_none_named_and_cursor_must_be_requested(broker: SamsaProcess) -> None:
    names = [t.name for t in _describe(broker, []).topics]
    assert names == sorted(names) and {"a-two", "b-three"} <= set(names)
    bad = _describe(broker, ["a-two"], cursor=("b-three", 0))
    assert [t.error_code.value for t in bad.topics] == [INVALID_REQUEST]
