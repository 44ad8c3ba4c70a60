"""Checks and replica assignments for new topics and partitions, given the registered brokers
(pure; used by the ZooKeeper controller, where any broker may create a topic)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.model import BrokerRegistration, NewTopic, PartitionRegistration
from controller.placement import assign_replicas, topic_name_error
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_BROKER, BrokerId, LeaderEpoch


def check_assignments(
    brokers: Mapping[BrokerId, BrokerRegistration],
    assignments: Mapping[int, Sequence[BrokerId]],
    first: int,
    count: int,
) -> None:
    if sorted(assignments) != list(range(first, first + count)):
        raise KafkaError(ErrorCode.invalid_replica_assignment, "Partitions must be consecutive.")
    if len({len(r) for r in assignments.values()}) != 1:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment,
            "All partitions should have the same number of replicas.",
        )
    for replicas in assignments.values():
        if len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.invalid_replica_assignment, "Duplicate replica assignment.")
        unknown = [b for b in replicas if b not in brokers]
        if unknown:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment, f"Unknown broker(s) {unknown} in assignment."
            )


def _assign(
    brokers: Mapping[BrokerId, BrokerRegistration], count: int, rf: int, first_partition: int
) -> dict[int, tuple[BrokerId, ...]]:
    if rf <= 0:
        raise KafkaError(
            ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0."
        )
    ids = sorted(brokers)
    if rf > len(ids):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {rf} time(s): The target replication factor of "
            f"{rf} cannot be reached because only {len(ids)} broker(s) are registered.",
        )
    racks = {b: brokers[b].rack for b in ids}
    return assign_replicas(ids, racks, count, rf, first_partition=first_partition)


def plan_topic(
    brokers: Mapping[BrokerId, BrokerRegistration], topic: NewTopic
) -> dict[int, tuple[BrokerId, ...]]:
    """Replica assignments of a new topic (explicit ones checked, or spread, rack-aware)."""
    error = topic_name_error(topic.name)
    if error:
        raise KafkaError(ErrorCode.invalid_topic_exception, error)
    if topic.assignments:
        assignments = {p: tuple(r) for p, r in topic.assignments.items()}
        check_assignments(brokers, assignments, 0, len(assignments))
        return assignments
    if topic.num_partitions <= 0:
        raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
    return _assign(brokers, topic.num_partitions, topic.replication_factor, 0)


def plan_new_partitions(
    brokers: Mapping[BrokerId, BrokerRegistration],
    current: Mapping[int, tuple[BrokerId, ...]],
    total_count: int,
    assignments: Sequence[Sequence[BrokerId]] | None,
) -> dict[int, tuple[BrokerId, ...]]:
    count = len(current)
    if total_count < count:
        raise KafkaError(
            ErrorCode.invalid_partitions,
            f"Topic currently has {count} partitions, which is higher than the requested "
            f"{total_count}.",
        )
    if total_count == count:
        raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {count} partitions.")
    added = total_count - count
    if assignments is not None:
        if len(assignments) != added:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Increasing the number of partitions by {added} but {len(assignments)} "
                "assignments provided.",
            )
        planned = {count + i: tuple(r) for i, r in enumerate(assignments)}
        check_assignments(brokers, planned, count, added)
        return planned
    rf = len(next(iter(current.values()))) if current else 1
    return _assign(brokers, added, rf, count)


def initial_state(replicas: tuple[BrokerId, ...], live: set[BrokerId]) -> PartitionRegistration:
    """A new partition: the first live replica leads, the live replicas are the ISR."""
    isr = tuple(b for b in replicas if b in live)
    leader = isr[0] if isr else NO_BROKER
    return PartitionRegistration(replicas, isr or replicas, leader, LeaderEpoch(0))
