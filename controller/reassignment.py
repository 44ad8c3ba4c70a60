"""Partition reassignment rules (AlterPartitionReassignments, ListPartitionReassignments): pure
functions of a partition's registration, as Kafka's controller applies them
(ReplicationControlManager.alterPartitionReassignments, PartitionReassignmentReplicas,
PartitionReassignmentRevert, PartitionChangeBuilder). Nothing here does I/O; the controllers write
what these return (compare-and-set), and tests/unit/test_reassignment.py checks every rule.

A partition's reassignment, states and transitions:

    STABLE      --Alter with target replicas (`start`)--> REASSIGNING: replicas = target followed
                  by the current replicas not in it, adding = target - current, removing = current
                  - target (both ascending, as Kafka's); ISR and leader unchanged. The replicas
                  being added get a log and fetch from the leader; the leader adds each to the
                  ISR once it has caught up (its ordinary ISR expansion).
    REASSIGNING --the ISR without the removing replicas holds every remaining replica
                  (`complete`)--> STABLE: replicas = target, ISR less the removing replicas; a
                  leader being removed hands leadership to the first target replica in that ISR
                  that may lead (no such replica: wait); the leader epoch is bumped when replicas
                  leave. The removed replicas see themselves out of the replica set and delete
                  their logs. A `start` that can complete at once (a reordering, a shrink whose
                  ISR is ready) does so in the same write, as Kafka's builder does.
    REASSIGNING --Alter with other target replicas--> REASSIGNING toward them, computed from the
                  current (merged) replicas, as Kafka computes it.
    REASSIGNING --Alter with null replicas (`revert`: cancel)--> STABLE: replicas = the original
                  ones (replicas - adding), ISR less the adding replicas (when that leaves none:
                  the first original replica, an unclean election, refused unless the topic
                  allows one), a leader that was being added hands over to the first original
                  replica in the ISR that may lead.
    STABLE      --cancel--> NO_REASSIGNMENT_IN_PROGRESS, nothing changes.

Errors, Kafka's codes and messages: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or partition,
INVALID_REPLICA_ASSIGNMENT for an empty, duplicated or unregistered replica list,
INVALID_REPLICATION_FACTOR when `allow_replication_factor_change` is false and the target's size
differs from the replica count the partition is headed for (KIP-860).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet

from controller.model import ClusterImage, PartitionRegistration
from protocol.errors import ErrorCode, KafkaError
from protocol.types import NO_BROKER, BrokerId, LeaderEpoch

ReassignmentResults = list[tuple[str, list[tuple[int, KafkaError | None]]]]
"""Per topic, in request order: (partition, error or None), AlterPartitionReassignments' answer."""
Requested = Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]]
"""Per topic: (partition, target replicas, or None to cancel), as the request names them."""
Change = tuple[str, int, PartitionRegistration, PartitionRegistration]
"""(topic, partition, current registration, new registration) to write."""


def validate_target(target: Sequence[int], registered: AbstractSet[BrokerId]) -> None:
    """Kafka's validateManualPartitionAssignment: raises INVALID_REPLICA_ASSIGNMENT."""
    if not target:
        raise KafkaError(
            ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for b in sorted(target):
        if b not in registered:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {b}, but no such broker is registered.",
            )
        if b == previous:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {b} more than once.",
            )
        previous = b


def _target_size(reg: PartitionRegistration) -> int:
    return len(reg.replicas) - len(reg.removing_replicas)


def start(
    reg: PartitionRegistration, target: Sequence[BrokerId], may_lead: AbstractSet[BrokerId]
) -> PartitionRegistration | None:
    """The registration that moves `reg` toward `target` (completed at once when it can be), or
    None when nothing changes. `partition_epoch` stays (the CAS expectation)."""
    removing = sorted(set(reg.replicas) - set(target))
    adding = sorted(set(target) - set(reg.replicas))
    moving = PartitionRegistration(
        (*target, *removing), reg.isr, reg.leader, reg.leader_epoch, reg.partition_epoch, tuple(adding), tuple(removing)
    )
    new = complete(moving, may_lead) or moving
    return None if new == reg else new


def complete(reg: PartitionRegistration, may_lead: AbstractSet[BrokerId]) -> PartitionRegistration | None:
    """The registration that ends `reg`'s reassignment, or None while it cannot end yet (Kafka's
    PartitionReassignmentReplicas.maybeCompleteReassignment and the builder's leader election)."""
    if not reg.reassigning:
        return None
    removing = set(reg.removing_replicas)
    isr = tuple(b for b in reg.isr if b not in removing)
    replicas = tuple(b for b in reg.replicas if b not in removing)
    if not isr or not replicas or not set(replicas) <= set(isr):
        return None
    leader = reg.leader
    if leader not in isr:
        leader = next((b for b in replicas if b in isr and b in may_lead), NO_BROKER)
        if leader == NO_BROKER:
            return None
    bump = leader != reg.leader or bool(removing)
    epoch = LeaderEpoch(reg.leader_epoch + 1) if bump else reg.leader_epoch
    return PartitionRegistration(replicas, isr, leader, epoch, reg.partition_epoch)


def revert(
    reg: PartitionRegistration, name: str, partition: int, may_lead: AbstractSet[BrokerId], unclean_allowed: bool
) -> PartitionRegistration:
    """The registration that cancels `reg`'s reassignment (Kafka's PartitionReassignmentRevert
    and cancelPartitionReassignment); raises NO_REASSIGNMENT_IN_PROGRESS or, for a revert that
    needs an unclean election the topic does not allow, INVALID_REPLICA_ASSIGNMENT."""
    if not reg.reassigning:
        raise KafkaError(ErrorCode.no_reassignment_in_progress)  # Kafka's default message: none on the wire
    adding = set(reg.adding_replicas)
    replicas = tuple(b for b in reg.replicas if b not in adding)
    isr = tuple(b for b in reg.isr if b not in adding)
    if not isr:
        if not unclean_allowed:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"Unable to revert partition assignment for {name}:{partition} because it would require an "
                "unclean leader election.",
            )
        isr = replicas[:1]
    leader = reg.leader
    if leader not in isr:
        leader = next((b for b in replicas if b in isr and b in may_lead), NO_BROKER)
    bump = leader != reg.leader or bool(adding)
    epoch = LeaderEpoch(reg.leader_epoch + 1) if bump else reg.leader_epoch
    return PartitionRegistration(replicas, isr, leader, epoch, reg.partition_epoch)


def plan_alterations(
    image: ClusterImage,
    requested: Requested,
    *,
    may_lead: Callable[[PartitionRegistration], AbstractSet[BrokerId]],
    unclean_allowed: Callable[[str], bool],
    allow_replication_factor_change: bool = True,
) -> tuple[ReassignmentResults, list[Change]]:
    """Every alteration of one AlterPartitionReassignments request: the answer (None where a
    change is to be written, or nothing needed changing) and the changes to write. Each is planned
    from the image; a partition named twice gets the last one, as Kafka's records replay in order."""
    registered = set(image.brokers)
    results: ReassignmentResults = []
    changes: dict[tuple[str, int], Change] = {}
    for name, partitions in requested:
        answers: list[tuple[int, KafkaError | None]] = []
        results.append((name, answers))
        topic = image.topics.get(name)
        for p, target in partitions:
            try:
                if topic is None:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {name}.")
                reg = topic.partitions.get(p)
                if reg is None:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Unable to find partition {name}:{p}.")
                if target is None:
                    new: PartitionRegistration | None = revert(reg, name, p, may_lead(reg), unclean_allowed(name))
                else:
                    validate_target(target, registered)
                    if not allow_replication_factor_change and len(target) != _target_size(reg):
                        raise KafkaError(
                            ErrorCode.invalid_replication_factor,
                            f"The replication factor is changed from {_target_size(reg)} to {len(target)}",
                        )
                    new = start(reg, tuple(BrokerId(b) for b in target), may_lead(reg))
            except KafkaError as e:
                answers.append((p, e))
                continue
            answers.append((p, None))
            changes.pop((name, p), None)
            if new is not None:
                changes[(name, p)] = (name, p, reg, new)
    return results, list(changes.values())


def ongoing(
    image: ClusterImage, topics: Sequence[tuple[str, Sequence[int]]] | None
) -> list[tuple[str, list[tuple[int, PartitionRegistration]]]]:
    """ListPartitionReassignments: the reassigning partitions of the topics and partitions named
    (every topic when None); unknown topics and partitions, and topics with none, left out."""
    if topics is None:
        topics = [(t.name, sorted(t.partitions)) for t in image.topics.values()]
    out = []
    for name, ids in topics:
        topic = image.topics.get(name)
        if topic is None:
            continue
        found = [(p, reg) for p in ids if (reg := topic.partitions.get(p)) is not None and reg.reassigning]
        if found:
            out.append((name, found))
    return out
