"""OffsetCommit v2-4 retention_time: a commit with an explicit retention expires after it; one with
-1 (what clients send) keeps offsets.retention.minutes."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest
from kio.schema.offset_commit.v2 import request as commit_v2
from kio.static.primitive import i32, i64

from broker.testing import SamsaProcess
from tests.support.raw_client import RawClient

GROUP = "retained"


def _commit(client: RawClient, partition: int, offset: int, retention_ms: int) -> None:
    request = commit_v2.OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=i32(-1),
        member_id="",
        retention_time=datetime.timedelta(milliseconds=retention_ms),
        topics=(
            commit_v2.OffsetCommitRequestTopic(
                name="t",
                partitions=(
                    commit_v2.OffsetCommitRequestPartition(
                        partition_index=i32(partition), committed_offset=i64(offset), committed_metadata=""
                    ),
                ),
            ),
        ),
    )
    response = client.request(request)
    assert [p.error_code.value for t in response.topics for p in t.partitions] == [0]


def test_retention_time_of_v2_commits(tmp_path: Path) -> None:
    broker = SamsaProcess(
        tmp_path / "data",
        {"num.partitions": "2", "offsets.retention.check.interval.ms": "200"},
    ).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        admin.create_topics([NewTopic("t", 2, 1)])
        with RawClient(broker.port) as client:
            deadline = time.monotonic() + 15
            while client.request(FindCoordinatorRequest(key=GROUP)).error_code.value != 0:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            _commit(client, 0, 5, retention_ms=500)
            _commit(client, 1, 7, retention_ms=-1)

        def offsets() -> dict[int, int]:
            return {tp.partition: om.offset for tp, om in admin.list_group_offsets(GROUP).get(GROUP, {}).items()}

        assert offsets() == {0: 5, 1: 7}
        deadline = time.monotonic() + 10
        while offsets() != {1: 7}:
            assert time.monotonic() < deadline, offsets()
            time.sleep(0.2)
        admin.close()
    finally:
        broker.close()
