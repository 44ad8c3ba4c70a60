"""Admin writes of the ZooKeeper controller, made by whichever broker received the request
(as Kafka's AdminZkClient did): topics, partitions, configs, producer id blocks, and a leader's ISR
change (`alter_partition`: leader epoch checked, then compare-and-set on the state znode version).
Mixed into `ZooKeeperController` (controller/zookeeper.py), whose watched cache and image it reads.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
)

from controller import zk_layout as L
from controller.election import isr_ineligible
from controller.model import (
    DEFAULT_BROKER_ENTITY,
    MIN_INSYNC_REPLICAS,
    ClusterImage,
    NewTopic,
    PartitionRegistration,
)
from controller.planning import initial_state, plan_new_partitions, plan_topic
from controller.zk_async import AsyncZk, TransactionFailed
from controller.zk_settings import ZkSettings
from protocol.errors import ErrorCode, KafkaError
from protocol.types import BrokerId

log = logging.getLogger("samsa.controller")


class ZkAdmin:
    if TYPE_CHECKING:
        _zk: AsyncZk
        _image: ClusterImage
        _topic_names: set[str]
        _assignments: dict[str, tuple[uuid.UUID, dict[int, tuple[BrokerId, ...]]]]
        _controller_epoch_seen: int
        _shutting_down: set[BrokerId]
        _suspicions: dict[BrokerId, set[BrokerId]]
        settings: ZkSettings

        async def _wait_image(self, pred: Callable[[ClusterImage], bool], timeout_s: float) -> bool: ...


    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> dict[str, KafkaError | None]:
        results: dict[str, KafkaError | None] = {}
        brokers = self._image.brokers
        live = set(brokers)
        pending: list[str] = []
        for topic in topics:
            try:
                if topic.name in results:
                    raise KafkaError(ErrorCode.invalid_request, "Duplicate topic in request.")
                if topic.name in self._image.topics or topic.name in self._topic_names:
                    raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.")
                assignments = plan_topic(brokers, topic)
                results[topic.name] = None
                if validate_only:
                    continue
                tx = self._zk.transaction()
                tx.create(L.topic_path(topic.name), L.encode_topic(uuid.uuid4(), assignments))
                tx.create(L.partitions_path(topic.name))
                for p, replicas in assignments.items():
                    tx.create(L.partition_path(topic.name, p))
                    state = initial_state(replicas, live)
                    tx.create(L.state_path(topic.name, p), L.encode_state(state, self._controller_epoch_seen))
                tx.create(L.config_path(topic.name), L.encode_config(topic.configs))
                try:
                    await self._zk.commit(tx)
                except TransactionFailed as e:
                    if e.index == 0 and isinstance(e.error, NodeExistsError):
                        raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.") from None
                    if isinstance(e.error, NodeExistsError):  # a leftover config of a deleted topic
                        await self._zk.delete(L.config_path(topic.name))
                        await self._zk.commit(self._retx(tx))
                    else:
                        raise
                pending.append(topic.name)
                log.info("topic created topic=%s partitions=%d assignments=%s configs=%s",
                         topic.name, len(assignments), {p: list(r) for p, r in assignments.items()}, dict(topic.configs))
            except KafkaError as e:
                results[topic.name] = e
            except (KazooException, TransactionFailed) as e:
                results[topic.name] = KafkaError(ErrorCode.unknown_server_error, f"ZooKeeper: {e!r}")
        if pending:
            await self._wait_image(lambda im: all(n in im.topics for n in pending), 10)
        return results

    def _retx(self, tx: Any) -> Any:
        again = self._zk.transaction()
        again.operations = list(tx.operations)
        return again

    async def delete_topics(self, names: Sequence[str]) -> dict[str, KafkaError | None]:
        results: dict[str, KafkaError | None] = {}
        deleted: list[str] = []
        for name in names:
            topic = self._assignments.get(name)
            if topic is None or name not in self._topic_names:
                results[name] = KafkaError(
                    ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
                )
                continue
            tx = self._zk.transaction()
            for p in topic[1]:
                tx.delete(L.state_path(name, p))
                tx.delete(L.partition_path(name, p))
            tx.delete(L.partitions_path(name))
            tx.delete(L.topic_path(name))
            try:
                await self._zk.commit(tx)
                results[name] = None
                deleted.append(name)
            except (TransactionFailed, KazooException) as e:
                results[name] = KafkaError(ErrorCode.unknown_topic_or_partition, f"delete failed: {e}")
                continue
            try:
                await self._zk.delete(L.config_path(name))
            except NoNodeError:
                pass
        if deleted:
            log.info("topics deleted topics=%s", deleted)
            await self._wait_image(lambda im: not any(n in im.topics for n in deleted), 10)
        return results

    async def create_partitions(
        self,
        name: str,
        total_count: int,
        assignments: Sequence[Sequence[BrokerId]] | None,
        *,
        validate_only: bool = False,
    ) -> None:
        data_stat = None
        try:
            data_stat = await self._zk.get(L.topic_path(name))
        except NoNodeError:
            pass
        if data_stat is None or name not in self._image.topics:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        topic_id, current = L.decode_topic(data_stat[0])
        added = plan_new_partitions(self._image.brokers, current, total_count, assignments)
        if validate_only:
            return
        live = set(self._image.brokers)
        tx = self._zk.transaction()
        moving = L.decode_reassigning(data_stat[0])
        tx.set_data(L.topic_path(name), L.encode_topic(topic_id, {**current, **added}, moving), version=data_stat[1].version)
        for p, replicas in added.items():
            tx.create(L.partition_path(name, p))
            tx.create(L.state_path(name, p), L.encode_state(initial_state(replicas, live), self._controller_epoch_seen))
        try:
            await self._zk.commit(tx)
        except TransactionFailed as e:
            raise KafkaError(ErrorCode.invalid_partitions, f"concurrent change, retry: {e}") from None
        log.info("partitions created topic=%s from=%d to=%d", name, len(current), total_count)
        await self._wait_image(lambda im: name in im.topics and len(im.topics[name].partitions) == total_count, 10)

    async def alter_topic_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        if name not in self._image.topics:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        if validate_only:
            return
        data = L.encode_config(configs)
        try:
            await self._zk.set(L.config_path(name), data)
        except NoNodeError:
            await self._zk.create(L.config_path(name), data)
        log.info("topic configs altered topic=%s configs=%s", name, dict(configs))
        want = dict(configs)
        await self._wait_image(lambda im: name not in im.topics or dict(im.topics[name].configs) == want, 10)

    async def alter_broker_configs(
        self, entity: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        if validate_only:
            return
        path, data = L.broker_config_path(entity), L.encode_config(configs)
        try:
            await self._zk.set(path, data)
        except NoNodeError:
            await self._zk.create(path, data)
        log.info("broker configs altered entity=%r configs=%s", entity, dict(configs))
        want = dict(configs)
        await self._wait_image(lambda im: dict(im.broker_configs.get(entity, {})) == want, 10)

    async def generate_min_insync_replicas_default(self) -> None:
        """A new controller gives a cluster without a cluster-wide min.insync.replicas its own
        static value as the dynamic default, as Kafka's KRaft controller does for eligible leader
        replicas (ConfigurationControlManager.maybeGenerateElrSafetyRecords); version-checked, so
        two controllers cannot both write it."""
        path = L.broker_config_path(DEFAULT_BROKER_ENTITY)
        value = str(self.settings.static_min_insync_replicas)
        try:
            try:
                data, stat = await self._zk.get(path)
            except NoNodeError:
                await self._zk.create(path, L.encode_config({MIN_INSYNC_REPLICAS: value}))
            else:
                configs = L.decode_config(data)
                if MIN_INSYNC_REPLICAS in configs:
                    return
                await self._zk.set(path, L.encode_config({**configs, MIN_INSYNC_REPLICAS: value}), stat.version)
        except (NodeExistsError, BadVersionError):
            return  # written meanwhile by another broker
        except KazooException as e:
            log.warning("cluster-level min.insync.replicas not generated error=%r", e)
            return
        log.info("cluster-level min.insync.replicas generated value=%s", value)

    async def allocate_producer_ids(self, broker_id: BrokerId, count: int) -> int:
        while True:
            try:
                data, stat = await self._zk.get(L.PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    await self._zk.create(L.PRODUCER_ID_BLOCK, b"")
                except NodeExistsError:
                    pass
                continue
            first = L.decode_producer_block_end(data) + 1
            try:
                await self._zk.set(
                    L.PRODUCER_ID_BLOCK, L.encode_producer_block(broker_id, first, first + count - 1), stat.version
                )
            except BadVersionError:
                continue
            log.info("producer ids allocated broker_id=%d first=%d count=%d", broker_id, first, count)
            return first

    async def alter_partition(
        self, topic: str, partition: int, broker_id: BrokerId, proposed: PartitionRegistration
    ) -> PartitionRegistration:
        """A leader's ISR change: leader epoch checked, then CAS on the state znode version."""
        path = L.state_path(topic, partition)
        try:
            data, stat = await self._zk.get(path)
        except NoNodeError:
            raise KafkaError(ErrorCode.unknown_topic_or_partition) from None
        current = L.decode_state(data, stat.version)
        if current.leader != broker_id or current.leader_epoch != proposed.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch, "stale leader epoch in AlterPartition")
        if current.version != proposed.partition_epoch:
            raise KafkaError(ErrorCode.invalid_update_version, "stale partition epoch")
        joining = {b for b in proposed.isr if b not in current.isr}
        ineligible = isr_ineligible(joining, proposed.isr, set(self._image.brokers), self._shutting_down, self._suspicions)
        if ineligible:
            raise KafkaError(
                ErrorCode.ineligible_replica,
                "replicas not eligible for the ISR: " + ", ".join(f"{b} ({why})" for b, why in sorted(ineligible.items())),
            )
        try:
            new_stat = await self._zk.set(path, L.encode_state(proposed, current.controller_epoch), stat.version)
        except BadVersionError:
            raise KafkaError(ErrorCode.invalid_update_version, "stale partition epoch") from None
        return replace(proposed, partition_epoch=new_stat.version)
