"""Partition reassignments of the ZooKeeper controller (AlterPartitionReassignments).

Mixed into `ZooKeeperController` (controller/zookeeper.py). The rules are
controller/reassignment.py's. Only the active controller changes reassignments (NOT_CONTROLLER
elsewhere; the other brokers forward AlterPartitionReassignments to it, broker/handlers/_forward.py). A reassignment's state lives where Kafka's KIP-455 kept it, in the topic znode (the
partition's replicas, the union of old and target while it moves, and its `adding_replicas` and
`removing_replicas`), so a new controller resumes it: `_reconcile` calls `_complete_reassignment`
for every reassigning partition on every image change, which ends it once the new replicas are in
the ISR (controller/reassignment.py `complete`).

Every write is one transaction: the /controller_epoch version check, the topic znode set with a
version check (its content re-read and compared with the image's), and, when leader, leader epoch
or ISR change, the state znode compare-and-set on the partition epoch. A stale write (the ISR moved,
another change came first) is planned again from the newer image, at most `ATTEMPTS` times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from kazoo.exceptions import KazooException, NoNodeError

from controller import zk_layout as L
from controller.model import ClusterImage, PartitionRegistration, TopicRegistration
from controller.reassignment import Change, ReassignmentResults, Requested, complete, plan_alterations
from controller.zk_async import AsyncZk, TransactionFailed
from protocol.errors import ErrorCode, KafkaError
from protocol.types import BrokerId

log = logging.getLogger("samsa.controller")

ATTEMPTS = 3


class ZkReassignments:
    if TYPE_CHECKING:
        _zk: AsyncZk
        _image: ClusterImage
        _dirty: bool
        epoch: int
        _epoch_version: int

        def _active(self) -> bool: ...

        def _resign(self, reason: str) -> None: ...

        def _unclean(self, topic: TopicRegistration) -> bool: ...

        def _electable(self, reg: PartitionRegistration) -> set[BrokerId]: ...

        async def _wait_image(self, pred: Callable[[ClusterImage], bool], timeout_s: float) -> bool: ...

    def _unclean_allowed(self, name: str) -> bool:
        topic = self._image.topics.get(name)
        return topic is not None and self._unclean(topic)

    async def alter_partition_reassignments(
        self, requested: Requested, *, allow_replication_factor_change: bool, timeout_ms: int
    ) -> ReassignmentResults:
        if not self._active():
            raise KafkaError(ErrorCode.not_controller)
        targets = {(t, p): target for t, ps in requested for p, target in ps}
        results, changes = plan_alterations(
            self._image,
            requested,
            may_lead=self._electable,
            unclean_allowed=self._unclean_allowed,
            allow_replication_factor_change=allow_replication_factor_change,
        )
        answers = {(t, p): (ps, i) for t, ps in results for i, (p, _) in enumerate(ps)}

        def answer(t: str, p: int, error: KafkaError | None) -> None:
            ps, i = answers[(t, p)]
            ps[i] = (p, error)

        done: list[Change] = []
        for _ in range(ATTEMPTS):
            stale: list[Change] = []
            for topic in dict.fromkeys(t for t, _, _, _ in changes):
                group = [c for c in changes if c[0] == topic]
                outcome = await self._write_reassignment(topic, group, "reassignment (AlterPartitionReassignments)")
                if outcome is None:
                    done += group
                elif outcome.code == ErrorCode.invalid_update_version:
                    stale += group
                else:
                    for t, p, _, _ in group:
                        answer(t, p, outcome)
            if not stale:
                break
            await self._wait_image(partial(_moved_on, stale), 1.0)
            again, changes = plan_alterations(
                self._image,
                [(t, [(p, targets[(t, p)])]) for t, p, _, _ in stale],
                may_lead=self._electable,
                unclean_allowed=self._unclean_allowed,
                allow_replication_factor_change=allow_replication_factor_change,
            )
            for t, [(p, error)] in again:
                answer(t, p, error)
        else:
            for t, p, _, _ in changes:
                answer(t, p, KafkaError(ErrorCode.unknown_server_error, "concurrent partition changes"))
        await self._wait_image(partial(_moved_on, done), timeout_ms / 1000)
        return results

    async def _complete_reassignment(self, topic: str, p: int, reg: PartitionRegistration) -> None:
        """CONTROLLER, from `_reconcile`: end `reg`'s reassignment if its new replicas are in sync."""
        new = complete(reg, self._electable(reg))
        if new is None:
            return
        outcome = await self._write_reassignment(topic, [(topic, p, reg, new)], "reassignment completed")
        if outcome is not None and outcome.code != ErrorCode.invalid_update_version:
            self._dirty = True  # a ZooKeeper error: try again on the next pass (stale: the watch brings one)

    async def _write_reassignment(self, topic: str, group: list[Change], reason: str) -> KafkaError | None:
        """Write the changes of one topic's partitions; None when written, else NOT_CONTROLLER,
        INVALID_UPDATE_VERSION (the image was stale) or a ZooKeeper error."""
        try:
            data, stat = await self._zk.get(L.topic_path(topic))
        except NoNodeError:
            return KafkaError(ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}.")
        except KazooException as e:
            return KafkaError(ErrorCode.unknown_server_error, f"metadata read failed: {e!r}")
        topic_id, assignments = L.decode_topic(data)
        moving = L.decode_reassigning(data)
        tx = self._zk.transaction()
        tx.check(L.CONTROLLER_EPOCH, self._epoch_version)
        for _, p, old, new in group:
            if assignments.get(p) != old.replicas or moving.get(p, ((), ())) != (old.adding_replicas, old.removing_replicas):
                return KafkaError(ErrorCode.invalid_update_version)
            assignments[p] = new.replicas
            moving[p] = (new.adding_replicas, new.removing_replicas)
            if (new.leader, new.leader_epoch, new.isr) != (old.leader, old.leader_epoch, old.isr):
                tx.set_data(L.state_path(topic, p), L.encode_state(new, self.epoch), version=old.partition_epoch)
        tx.set_data(L.topic_path(topic), L.encode_topic(topic_id, assignments, moving), version=stat.version)
        try:
            await self._zk.commit(tx)
        except TransactionFailed as e:
            if e.index == 0:
                self._resign("controller epoch check failed")
                return KafkaError(ErrorCode.not_controller)
            return KafkaError(ErrorCode.invalid_update_version)
        except KazooException as e:
            log.info("reassignment write failed topic=%s error=%r", topic, e)
            return KafkaError(ErrorCode.unknown_server_error, f"metadata write failed: {e!r}")
        for _, p, old, new in group:
            log.info(
                "partition reassignment changed topic=%s partition=%d replicas=%s->%s adding=%s removing=%s "
                "leader=%d->%d leader_epoch=%d isr=%s reason=%s controller_epoch=%d",
                topic, p, list(old.replicas), list(new.replicas), list(new.adding_replicas),
                list(new.removing_replicas), old.leader, new.leader, new.leader_epoch, list(new.isr), reason,
                self.epoch,
            )  # fmt: skip
        return None


def _moved_on(stale: list[Change], image: ClusterImage) -> bool:
    """True once `image` has a newer registration (or none) for every stale partition."""
    return all((reg := image.partition(t, p)) is None or reg != old for t, p, old, _ in stale)
