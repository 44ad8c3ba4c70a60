"""Operator leader elections of the ZooKeeper controller (ElectLeaders: preferred and unclean).

Mixed into `ZooKeeperController` (controller/zookeeper.py). Only the active controller elects, as
in Kafka (NOT_CONTROLLER on any other broker, whose handler then forwards the request to the
controller, broker/handlers/_forward.py). The rules are
`election.plan_elections` (Kafka's ReplicationControlManager.electLeader); each new state is
written as every controller write is: a transaction that checks the /controller_epoch version and
compare-and-sets the state znode on its version. A stale state (another write came first) is
planned again from the newer image, at most `ATTEMPTS` times; a failed epoch check resigns and
answers NOT_CONTROLLER. The answer comes once this broker's image shows the new leaders, or after
the request's timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from kazoo.exceptions import KazooException

from controller import zk_layout as L
from controller.election import ElectionResults, ElectionType, electable, plan_elections
from controller.model import ClusterImage, PartitionRegistration
from controller.zk_async import AsyncZk, TransactionFailed
from protocol.errors import ErrorCode, KafkaError
from protocol.types import BrokerId

log = logging.getLogger("samsa.controller")

ATTEMPTS = 3


class ZkElections:
    if TYPE_CHECKING:
        _zk: AsyncZk
        _image: ClusterImage
        _shutting_down: set[BrokerId]
        _suspicions: dict[BrokerId, set[BrokerId]]
        epoch: int
        _epoch_version: int

        def _active(self) -> bool: ...

        def _resign(self, reason: str) -> None: ...

        async def _wait_image(self, pred: Callable[[ClusterImage], bool], timeout_s: float) -> bool: ...

    def _electable(self, reg: PartitionRegistration) -> set[BrokerId]:
        suspicions = {b: frozenset(r) for b, r in self._suspicions.items()}
        return electable(set(self._image.brokers), self._shutting_down, suspicions, reg)

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Sequence[tuple[str, Sequence[int]]] | None,
        timeout_ms: int,
    ) -> ElectionResults:
        if not self._active():
            return _all_failed(self._image, partitions, ErrorCode.not_controller)
        results, moves = plan_elections(self._image, election_type, partitions, self._electable)
        answers = {(t, p): i for t, ps in results for i, (p, _) in enumerate(ps)}
        by_topic = dict(results)
        done: list[tuple[str, int, PartitionRegistration]] = []
        for _ in range(ATTEMPTS):
            outcomes = await asyncio.gather(*(self._write_election(t, p, old, new, election_type) for t, p, old, new in moves))
            stale = []
            for (t, p, old, new), outcome in zip(moves, outcomes, strict=True):
                if outcome is None:
                    done.append((t, p, new))
                elif outcome.code == ErrorCode.invalid_update_version:
                    stale.append((t, p, old))
                else:
                    by_topic[t][answers[(t, p)]] = (p, outcome)
            if not stale:
                break
            await self._wait_image(partial(_moved_on, stale), 1.0)
            again, moves = plan_elections(self._image, election_type, [(t, [p]) for t, p, _ in stale], self._electable)
            for t, [(p, error)] in again:
                by_topic[t][answers[(t, p)]] = (p, error)
        else:
            for t, p, _, _ in moves:
                by_topic[t][answers[(t, p)]] = (p, KafkaError(ErrorCode.unknown_server_error, "concurrent partition changes"))
        await self._wait_image(
            lambda image: all(
                (reg := image.partition(t, p)) is not None and reg.leader_epoch >= new.leader_epoch
                for t, p, new in done
            ),
            timeout_ms / 1000,
        )
        return results

    async def _write_election(
        self, topic: str, p: int, old: PartitionRegistration, new: PartitionRegistration, election_type: ElectionType
    ) -> KafkaError | None:
        """None when written; NOT_CONTROLLER, INVALID_UPDATE_VERSION (stale) or a ZooKeeper error."""
        tx = self._zk.transaction()
        tx.check(L.CONTROLLER_EPOCH, self._epoch_version)
        tx.set_data(L.state_path(topic, p), L.encode_state(new, self.epoch), version=old.partition_epoch)
        try:
            await self._zk.commit(tx)
        except TransactionFailed as e:
            if e.index == 0:
                self._resign("controller epoch check failed")
                return KafkaError(ErrorCode.not_controller)
            return KafkaError(ErrorCode.invalid_update_version)
        except KazooException as e:
            log.info("partition state write failed topic=%s partition=%d error=%r", topic, p, e)
            return KafkaError(ErrorCode.unknown_server_error, f"metadata write failed: {e!r}")
        log.info(
            "partition state changed topic=%s partition=%d leader=%d->%d leader_epoch=%d isr=%s reason=%s controller_epoch=%d",
            topic, p, old.leader, new.leader, new.leader_epoch, list(new.isr),
            f"{election_type.name.lower()} leader election (ElectLeaders)", self.epoch,
        )  # fmt: skip
        return None


def _moved_on(stale: list[tuple[str, int, PartitionRegistration]], image: ClusterImage) -> bool:
    """True once `image` has a newer state (or none) for every stale partition."""
    return all(
        (reg := image.partition(t, p)) is None or reg.partition_epoch != old.partition_epoch for t, p, old in stale
    )


def _all_failed(
    image: ClusterImage, partitions: Sequence[tuple[str, Sequence[int]]] | None, code: ErrorCode
) -> ElectionResults:
    if partitions is None:
        partitions = [(t.name, sorted(t.partitions)) for t in image.topics.values()]
    return [(t, [(p, KafkaError(code)) for p in ps]) for t, ps in partitions]
