"""Partition reassignment rules (controller/reassignment.py), against Kafka's
PartitionReassignmentReplicas / PartitionReassignmentRevert / alterPartitionReassignments."""

from __future__ import annotations

import uuid
from types import MappingProxyType

import pytest

from controller.model import BrokerRegistration, ClusterImage, PartitionRegistration, TopicRegistration
from controller.reassignment import complete, ongoing, plan_alterations, revert, start
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_BROKER, BrokerId, ControllerEpoch, LeaderEpoch

B = BrokerId


def reg(replicas, isr, leader, epoch=5, adding=(), removing=()) -> PartitionRegistration:
    return PartitionRegistration(
        tuple(map(B, replicas)), tuple(map(B, isr)), B(leader), LeaderEpoch(epoch), 7,
        tuple(map(B, adding)), tuple(map(B, removing)),
    )


ALL = frozenset(map(B, (1, 2, 3, 4)))


def image(partitions: dict[int, PartitionRegistration], brokers=(1, 2, 3, 4)) -> ClusterImage:
    topic = TopicRegistration("t", uuid.uuid4(), MappingProxyType(partitions))
    return ClusterImage(
        "c", B(1), ControllerEpoch(1),
        MappingProxyType({B(b): BrokerRegistration(B(b), ()) for b in brokers}),
        MappingProxyType({"t": topic}),
    )


def test_start_merges_target_first_and_lists_adding_and_removing_ascending() -> None:
    new = start(reg([1, 2], [1, 2], 1), tuple(map(B, (3, 2))), ALL)
    assert new == reg([3, 2, 1], [1, 2], 1, adding=[3], removing=[1])


def test_start_of_the_same_replicas_changes_nothing_and_a_reordering_completes_at_once() -> None:
    assert start(reg([1, 2], [1, 2], 1), (B(1), B(2)), ALL) is None
    assert start(reg([1, 2], [1, 2], 1), (B(2), B(1)), ALL) == reg([2, 1], [1, 2], 1)


def test_a_shrink_whose_isr_is_ready_completes_at_once_moving_leadership() -> None:
    new = start(reg([1, 2, 3], [1, 2, 3], 1), (B(2), B(3)), ALL)
    assert new == reg([2, 3], [2, 3], 2, epoch=6)


def test_complete_waits_until_every_target_replica_is_in_the_isr() -> None:
    moving = reg([2, 3, 1], [1, 2], 1, adding=[3], removing=[1])
    assert complete(moving, ALL) is None
    caught_up = reg([2, 3, 1], [1, 2, 3], 1, adding=[3], removing=[1])
    assert complete(caught_up, ALL) == reg([2, 3], [2, 3], 2, epoch=6)


def test_complete_keeps_a_leader_that_stays_and_bumps_the_epoch_only_when_replicas_leave() -> None:
    grow = reg([1, 2, 3], [1, 2, 3], 1, adding=[3])
    assert complete(grow, ALL) == reg([1, 2, 3], [1, 2, 3], 1, epoch=5)
    shrink = reg([2, 3, 1], [1, 2, 3], 2, adding=[3], removing=[1])
    assert complete(shrink, ALL) == reg([2, 3], [2, 3], 2, epoch=6)


def test_complete_waits_while_no_target_replica_may_lead() -> None:
    caught_up = reg([2, 3, 1], [1, 2, 3], 1, adding=[3], removing=[1])
    assert complete(caught_up, frozenset({B(1)})) is None
    assert complete(caught_up, frozenset({B(3)})) == reg([2, 3], [2, 3], 3, epoch=6)


def test_revert_drops_the_adding_replicas() -> None:
    moving = reg([2, 3, 1], [1, 2, 3], 1, adding=[3], removing=[1])
    assert revert(moving, "t", 0, ALL, False) == reg([2, 1], [1, 2], 1, epoch=6)


def test_revert_moves_leadership_off_an_adding_replica() -> None:
    moving = reg([3, 1], [1, 3], 3, adding=[3], removing=[1])
    assert revert(moving, "t", 0, ALL, False) == reg([1], [1], 1, epoch=6)


def test_revert_needing_an_unclean_election_is_refused_unless_allowed() -> None:
    moving = reg([3, 1], [3], 3, adding=[3], removing=[1])
    with pytest.raises(KafkaError) as e:
        revert(moving, "t", 0, ALL, False)
    assert e.value.code == ErrorCode.invalid_replica_assignment
    assert e.value.message == (
        "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
    )
    assert revert(moving, "t", 0, ALL, True) == reg([1], [1], 1, epoch=6)


def test_revert_of_nothing_is_no_reassignment_in_progress() -> None:
    with pytest.raises(KafkaError) as e:
        revert(reg([1, 2], [1, 2], 1), "t", 0, ALL, False)
    assert e.value.code == ErrorCode.no_reassignment_in_progress


def test_plan_answers_kafka_errors() -> None:
    im = image({0: reg([1, 2], [1, 2], 1)})
    results, changes = plan_alterations(
        im,
        [
            ("t", [(0, []), (1, [1]), (0, [1, 1]), (0, [1, 9]), (0, None), (0, [2, 3])]),
            ("nope", [(0, [1])]),
        ],
        may_lead=lambda _r: ALL,
        unclean_allowed=lambda _n: False,
    )
    answers = {t: [(p, None if e is None else (e.code, e.message)) for p, e in ps] for t, ps in results}
    assert answers["t"] == [
        (0, (ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list.")),
        (1, (ErrorCode.unknown_topic_or_partition, "Unable to find partition t:1.")),
        (0, (ErrorCode.invalid_replica_assignment, "The manual partition assignment includes the broker 1 more than once.")),
        (0, (ErrorCode.invalid_replica_assignment,
             "The manual partition assignment includes broker 9, but no such broker is registered.")),
        (0, (ErrorCode.no_reassignment_in_progress, "no_reassignment_in_progress")),
        (0, None),
    ]
    assert answers["nope"] == [(0, (ErrorCode.unknown_topic_or_partition, "Unable to find a topic named nope."))]
    assert [(t, p, new) for t, p, _, new in changes] == [("t", 0, reg([2, 3, 1], [1, 2], 1, adding=[3], removing=[1]))]


def test_plan_refuses_a_replication_factor_change_when_not_allowed() -> None:
    im = image({0: reg([2, 3, 1], [1, 2], 1, adding=[3], removing=[1])})
    results, changes = plan_alterations(
        im, [("t", [(0, [1, 2, 3]), (0, [4, 3])])], may_lead=lambda _r: ALL, unclean_allowed=lambda _n: False,
        allow_replication_factor_change=False,
    )
    [(_, [(_, first), (_, second)])] = results
    assert first is not None and first.code == ErrorCode.invalid_replication_factor
    assert first.message == "The replication factor is changed from 2 to 3"
    assert second is None and len(changes) == 1


def test_ongoing_lists_only_reassigning_partitions_of_known_topics() -> None:
    moving = reg([2, 3, 1], [1, 2], 1, adding=[3], removing=[1])
    im = image({0: reg([1, 2], [1, 2], 1), 1: moving})
    assert ongoing(im, None) == [("t", [(1, moving)])]
    assert ongoing(im, [("t", [0, 1, 5]), ("nope", [0])]) == [("t", [(1, moving)])]
    assert ongoing(im, [("t", [0])]) == []


def test_leader_none_is_replaced_on_completion() -> None:
    offline = reg([2, 3, 1], [2, 3], NO_BROKER, adding=[3], removing=[1])
    assert complete(offline, ALL) == reg([2, 3], [2, 3], 2, epoch=6)


def test_the_topic_znode_keeps_reassignments_as_kafka_writes_them() -> None:
    import json

    from controller import zk_layout as L

    topic_id = uuid.uuid4()
    data = L.encode_topic(topic_id, {0: (B(2), B(3), B(1)), 1: (B(1), B(2))}, {0: ((B(3),), (B(1),)), 1: ((), ())})
    doc = json.loads(data)
    assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"]) == (
        {"0": [2, 3, 1], "1": [1, 2]}, {"0": [3]}, {"0": [1]})
    assert L.decode_topic(data) == (topic_id, {0: (2, 3, 1), 1: (1, 2)})
    assert L.decode_reassigning(data) == {0: ((3,), (1,))}
    assert L.decode_reassigning(L.encode_topic(topic_id, {0: (B(1),)})) == {}
    state = L.decode_state(L.encode_state(reg([1, 2], [1, 2], 1), 3), 7)
    assert state.registration((B(2), B(3), B(1)), ((B(3),), (B(1),))) == reg([2, 3, 1], [1, 2], 1, adding=[3], removing=[1])


def test_a_partition_named_twice_gets_the_last_target() -> None:
    im = image({0: reg([1, 2], [1, 2], 1)})
    results, changes = plan_alterations(
        im, [("t", [(0, [2, 3]), (0, [3, 4]), (0, [1, 2])])], may_lead=lambda _r: ALL, unclean_allowed=lambda _n: False
    )
    assert [e for _, ps in results for _, e in ps] == [None, None, None]
    assert changes == []  # the last names the current replicas: nothing to write
    _, changes = plan_alterations(
        im, [("t", [(0, [2, 3]), (0, [3, 4])])], may_lead=lambda _r: ALL, unclean_allowed=lambda _n: False
    )
    assert [new for _, _, _, new in changes] == [reg([3, 4, 1, 2], [1, 2], 1, adding=[3, 4], removing=[1, 2])]
