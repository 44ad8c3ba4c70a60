"""What the group, transaction and share coordinators share: the partitions of their topic
(`__consumer_offsets`, `__transaction_state`, `__share_group_state`) that this broker leads, each loaded from its log
when this broker becomes its leader and dropped when it stops being one, and the topic itself,
created on first use (Kafka's CoordinatorRuntime and TransactionStateManager do the same for
both).

States of a coordinator partition:

    (none)  --this broker becomes its leader-------------->  LOADING (its log replayed by _load,
                                                             as the coordinator's _replay says)
    LOADING --its log replayed to the end----------------->  ACTIVE
    LOADING, ACTIVE --leadership moves away, shutdown---->  (none): _unload cancels the load and
                                                             the coordinator releases its state
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from broker.coordinator.loader import replay_partition
from broker.coordinator.records import partition_for
from controller.model import NewTopic
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.replication.replica_manager import ReplicaManager
    from controller.interface import Controller


def append_error(error: ErrorCode) -> ErrorCode:
    """A coordinator's error for a failed append of its records (Kafka's
    CoordinatorOperationExceptionHelper.handleOperationException, which the transaction
    coordinator's appendTransactionToLog mirrors)."""
    if error in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.unknown_server_error
    return error


class LoadStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass(eq=False)
class CoordinatorPartition:
    """One partition of a coordinator's topic that this broker leads."""

    index: int
    status: LoadStatus = LoadStatus.LOADING
    task: asyncio.Task[None] | None = None
    loaded: asyncio.Event = field(default_factory=asyncio.Event)


P = TypeVar("P", bound=CoordinatorPartition)
ChunkT = TypeVar("ChunkT")


@dataclass(frozen=True)
class Replay(Generic[ChunkT]):
    """How a coordinator replays one partition's log: `decode` a chunk of it (in a worker thread),
    `apply` the chunk (on the loop), then `install` what was replayed (end offset, milliseconds
    taken) just before the partition serves."""

    decode: Callable[[bytes, int], ChunkT]
    apply: Callable[[ChunkT], None]
    install: Callable[[int, float], None]


class PartitionedCoordinator(ABC, Generic[P]):
    """The partitions of `topic` this broker leads; a coordinator says how to make, load and
    release one, and how its topic is created."""

    _load_label = "coordinator state"
    """What a partition holds, in its load's log lines ("groups", "transactions", ...)."""

    def __init__(self, topic: str, controller: Controller, replica_manager: ReplicaManager, log: logging.Logger) -> None:
        self._topic = topic
        self._controller = controller
        self._replica_manager = replica_manager
        self._log = log
        self._partitions: dict[int, P] = {}
        self._active = False
        self._create_lock = asyncio.Lock()

    # -- what each coordinator says --------------------------------------------------------------

    @abstractmethod
    def _configured_partitions(self) -> int:
        """The topic's partition count setting (offsets.topic.num.partitions, ...)."""

    @abstractmethod
    def _new_partition(self, tp: TopicPartition) -> P | None:
        """A partition to load now that this broker leads `tp` (None: not now)."""

    @abstractmethod
    def _replay(self, part: P) -> Replay[Any]:
        """How to replay `part`'s log into the coordinator's state."""

    @abstractmethod
    def _release(self, part: P) -> None:
        """Drop what the partition holds (it is no longer this broker's)."""

    @abstractmethod
    def _topic_settings(self, live_brokers: int) -> tuple[int, dict[str, str]]:
        """(replication factor, configs) of the topic when it is created."""

    # -- shared ----------------------------------------------------------------------------------

    def num_partitions(self) -> int:
        topic = self._controller.image.topics.get(self._topic)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self._configured_partitions()

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions())

    def on_leadership_change(self, tp: TopicPartition, is_leader: bool) -> None:
        """Replica manager listener (no awaits): load on leadership, unload on losing it."""
        if tp.topic != self._topic:
            return
        old = self._partitions.pop(tp.partition, None)
        if old is not None:
            self._unload(old)
        part = self._new_partition(tp) if is_leader else None
        if part is not None:
            self._partitions[tp.partition] = part
            part.task = asyncio.get_running_loop().create_task(self._load(part))

    async def _load(self, part: P) -> None:
        """Replay the partition's log (`_replay`), then serve it: ACTIVE, `loaded` set."""
        started = time.monotonic()
        try:
            partition = self._replica_manager.partitions.get(TopicPartition(self._topic, part.index))
            if partition is None:
                return
            replay = self._replay(part)
            end = await replay_partition(
                partition, replay.decode, replay.apply, lambda: self._is_current(part),
                label=f"{self._load_label} partition={part.index}",
            )  # fmt: skip
            if end is None:
                return  # unloaded meanwhile
            replay.install(end, (time.monotonic() - started) * 1000)
            part.status = LoadStatus.ACTIVE
            part.loaded.set()
        except asyncio.CancelledError:
            raise
        except Exception:
            self._log.exception("loading %s failed partition=%d", self._load_label, part.index)

    def _unload(self, part: P) -> None:
        if part.task is not None and not part.task.done():
            part.task.cancel()
        self._release(part)
        if self._partitions.get(part.index) is part:
            del self._partitions[part.index]

    def _unload_all(self) -> None:
        for part in list(self._partitions.values()):
            self._unload(part)

    def _is_current(self, part: P) -> bool:
        return self._partitions.get(part.index) is part

    def _checked_partition(self, key: str) -> tuple[ErrorCode, P | None]:
        """The partition of `key` if this broker serves it now, else Kafka's error, in Kafka's order."""
        if not self._active:
            return ErrorCode.coordinator_not_available, None
        part = self._partitions.get(self.partition_for(key))
        if part is None:
            return ErrorCode.not_coordinator, None
        if part.status is LoadStatus.LOADING:
            return ErrorCode.coordinator_load_in_progress, None
        return ErrorCode.none, part

    async def _wait_loaded(self, index: int, timeout_s: float = 1.0) -> None:
        """Wait a moment for a partition still loading (usually milliseconds right after the
        topic's creation): spares a FindCoordinator client a retry."""
        part = self._partitions.get(index)
        if part is not None and part.status is LoadStatus.LOADING:
            try:
                await asyncio.wait_for(part.loaded.wait(), timeout_s)
            except TimeoutError:
                pass

    async def _create_topic(self) -> None:
        async with self._create_lock:
            controller = self._controller
            if self._topic in controller.image.topics:
                return
            replication, configs = self._topic_settings(len(controller.image.brokers))
            partitions = self._configured_partitions()
            results = await controller.create_topics([NewTopic(
                name=self._topic, num_partitions=partitions, replication_factor=replication, configs=configs)])
            error = results.get(self._topic)
            if error is None:
                self._log.info("topic created topic=%s partitions=%d replication_factor=%d",
                               self._topic, partitions, replication)  # fmt: skip
            elif error.code != ErrorCode.topic_already_exists:
                self._log.warning("creating %s failed error=%s message=%s", self._topic, error.code.name, error.message)
