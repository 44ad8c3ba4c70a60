"""Share-group state (KIP-932) checked by Apache Kafka 4.3.1's own share-coordinator classes
(compat/jvm/harness/kafka/ShareState.java):

- `__share_group_state` records written by broker/share/state_records.py read back by Kafka's
  generated ShareSnapshot/ShareUpdate classes, every field and no byte left over;
- broker/share/share_state.combine_state_batches, which merges written state batches over the
  stored ones, gives Kafka's PersisterStateBatchCombiner's answer on 400 seeded random cases
  (overlapping, contiguous and nested batches in every state and count) and Kafka's edge cases.
"""

from __future__ import annotations

import random
import uuid

from broker.share.in_flight import PersisterStateBatch, RecordState
from broker.share.share_state import combine_state_batches
from broker.share.state_records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    ShareSnapshotValue,
    ShareStateKey,
    ShareUpdateValue,
    key_bytes,
    snapshot_value_bytes,
    update_value_bytes,
)
from compat.jvm import run_main

STATES = (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _text(batches: list[PersisterStateBatch]) -> str:
    return ",".join(
        f"{b.first_offset}-{b.last_offset}-{int(b.delivery_state)}-{b.delivery_count}" for b in batches
    )


def _random_batches(rng: random.Random) -> list[PersisterStateBatch]:
    out = []
    for _ in range(rng.randint(0, 5)):
        first = rng.randint(0, 30)
        out.append(
            PersisterStateBatch(first, first + rng.randint(0, 8), rng.choice(STATES), rng.randint(1, 4))
        )
    return out


def _cases() -> list[tuple[int, list[PersisterStateBatch], list[PersisterStateBatch]]]:
    b = PersisterStateBatch
    A, K, X = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
    cases = [
        (-1, [], []),
        (-1, [b(0, 9, A, 1)], [b(0, 9, K, 1)]),  # same range: the later state wins
        (-1, [b(0, 9, A, 2)], [b(3, 5, K, 1)]),  # a lower count inside: ignored
        (-1, [b(0, 9, A, 1)], [b(3, 5, X, 1)]),  # a higher state inside: split around it
        (5, [b(0, 9, A, 1)], [b(10, 12, A, 1)]),  # pruned below the start offset, joined
        (-1, [b(0, 4, A, 1), b(5, 9, A, 1)], []),  # contiguous, same info: joined
        (-1, [b(0, 4, A, 1)], [b(0, 4, A, 1)]),  # duplicates collapse
    ]
    rng = random.Random(932)
    for _ in range(400):
        cases.append((rng.choice((-1, -1, rng.randint(0, 20))), _random_batches(rng), _random_batches(rng)))
    return cases


def test_state_batch_combination_matches_kafka() -> None:
    cases = _cases()
    lines = run_main("kafka", "ShareState", *(f"combine={s};{_text(a)};{_text(n)}" for s, a, n in cases))
    kafka = [line["result"] for line in lines if line["step"] == "combine"]
    assert len(kafka) == len(cases)
    mismatches = [
        (f"{s};{_text(a)};{_text(n)}", want, got)
        for (s, a, n), want in zip(cases, kafka, strict=True)
        if (got := _text(combine_state_batches(a, n, s))) != want
    ]
    assert not mismatches, mismatches[:5]


def test_share_state_records_read_by_kafka() -> None:
    t = uuid.UUID(int=5)
    batches = (
        PersisterStateBatch(10, 14, RecordState.AVAILABLE, 2),
        PersisterStateBatch(15, 15, RecordState.ARCHIVED, 5),
    )
    records = {
        "ShareSnapshotKey": key_bytes(ShareStateKey(SHARE_SNAPSHOT, "g", t, 2)),
        "ShareUpdateKey": key_bytes(ShareStateKey(SHARE_UPDATE, "g", t, 2)),
        "ShareSnapshotValue": snapshot_value_bytes(ShareSnapshotValue(3, 1, 7, 10, 1_700_000_000_000, 1_700_000_000_500, batches, 1)),
        "ShareUpdateValue": update_value_bytes(ShareUpdateValue(3, 7, -1, batches[:1])),
    }  # fmt: skip
    lines = run_main("kafka", "ShareState", *(f"{k}={v.hex()}" for k, v in records.items()))
    got = {line["step"]: line for line in lines if line["step"] != "end"}
    assert all(line["left"] == 0 for line in got.values()), got
    tid = "AAAAAAAAAAAAAAAAAAAABQ"
    assert got["ShareSnapshotKey"]["version"] == 0 and got["ShareUpdateKey"]["version"] == 1
    assert got["ShareSnapshotKey"]["read"] == f"ShareSnapshotKey(groupId='g', topicId={tid}, partition=2)"
    assert got["ShareSnapshotValue"]["read"] == (
        "ShareSnapshotValue(snapshotEpoch=3, stateEpoch=1, leaderEpoch=7, startOffset=10, deliveryCompleteCount=1, "
        "createTimestamp=1700000000000, writeTimestamp=1700000000500, stateBatches=["
        "StateBatch(firstOffset=10, lastOffset=14, deliveryState=0, deliveryCount=2), "
        "StateBatch(firstOffset=15, lastOffset=15, deliveryState=4, deliveryCount=5)])"
    )
    assert got["ShareUpdateValue"]["read"] == (
        "ShareUpdateValue(snapshotEpoch=3, leaderEpoch=7, startOffset=-1, deliveryCompleteCount=-1, "
        "stateBatches=[StateBatch(firstOffset=10, lastOffset=14, deliveryState=0, deliveryCount=2)])"
    )
