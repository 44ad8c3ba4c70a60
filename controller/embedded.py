"""The embedded controller: a single node's cluster metadata, kept in its data directory.

It runs the same interface as the ZooKeeper controller, so a single broker takes the same code path
as a cluster: the broker registers, topics get replica assignments (all on this broker), every
partition has a leader, a leader epoch and an ISR. Metadata is one JSON document,
`<log.dir>/cluster-metadata.json`, replaced atomically (write, fsync, rename) on every change;
the cluster id lives in `meta.properties` as in Kafka.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from controller.election import ElectionResults, ElectionType, plan_elections
from controller.interface import ImageListener
from controller.model import (
    DEFAULT_BROKER_ENTITY,
    MIN_INSYNC_REPLICAS,
    BrokerRegistration,
    ClusterImage,
    NewTopic,
    PartitionRegistration,
    TopicRegistration,
)
from controller.planning import initial_state, plan_new_partitions, plan_topic
from controller.quotas import QuotaEntity, alter, entity_of
from controller.reassignment import ReassignmentResults, Requested, complete, plan_alterations
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition
from protocol.types import BrokerId, ControllerEpoch

log = logging.getLogger("samsa.controller")

METADATA_FILE = "cluster-metadata.json"
META_PROPERTIES = "meta.properties"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:  # a full disk must not leave a partial .tmp behind
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_or_create_cluster_id(data_dir: Path, broker_id: BrokerId, configured: str | None = None) -> str:
    """Read cluster.id from meta.properties, creating the file on first start with the
    configured id (the broker config cluster.id) or a new one. A configured id that differs
    from the one in the file raises RuntimeError: the data belongs to another cluster."""
    path = data_dir / META_PROPERTIES
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("cluster.id="):
                found = line.split("=", 1)[1].strip()
                check_cluster_id(configured, found, str(path))
                return found
    cluster_id = configured or _new_cluster_id()
    data_dir.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, f"version=1\ncluster.id={cluster_id}\nnode.id={broker_id}\n".encode())
    return cluster_id


def check_cluster_id(configured: str | None, found: str, where: str) -> None:
    """Refuse to start when cluster.id is set and the stored cluster id differs."""
    if configured and configured != found:
        raise RuntimeError(
            f"cluster.id is {configured} but {where} holds cluster id {found}: this data belongs "
            "to another cluster; unset cluster.id or set it to the stored id"
        )


def _new_cluster_id() -> str:
    """A random id in Kafka's format: 22 characters of URL-safe base64 of a UUID."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class EmbeddedController:
    """Single-node controller. This broker is the controller, the only broker and every leader."""

    def __init__(
        self,
        data_dir: Path,
        registration: BrokerRegistration,
        cluster_id: str | None = None,
        static_min_insync_replicas: int = 1,
    ) -> None:
        """`static_min_insync_replicas` is this broker's min.insync.replicas from its properties:
        the cluster default written when there is none (see `start`)."""
        self._data_dir = data_dir
        self._registration = registration
        self._listeners: list[ImageListener] = []
        self._static_min_insync_replicas = static_min_insync_replicas
        cluster_id = load_or_create_cluster_id(data_dir, registration.broker_id, cluster_id)
        topics, broker_configs, quotas, self._next_producer_id = self._load()
        group_configs = self._load_group_configs()
        self._image = ClusterImage(
            cluster_id=cluster_id,
            controller_id=registration.broker_id,
            controller_epoch=ControllerEpoch(1),
            brokers=MappingProxyType({registration.broker_id: registration}),
            topics=MappingProxyType(topics),
            broker_configs=MappingProxyType(broker_configs),
            client_quotas=MappingProxyType(quotas),
            group_configs=MappingProxyType(group_configs),
        )

    # -- persistence --------------------------------------------------------------------------

    def _load(
        self,
    ) -> tuple[dict[str, TopicRegistration], dict[str, Mapping[str, str]], dict[QuotaEntity, Mapping[str, float]], int]:
        path = self._data_dir / METADATA_FILE
        if not path.exists():
            return {}, {}, {}, 0
        doc = json.loads(path.read_text())
        topics = {name: TopicRegistration.from_json(name, t) for name, t in doc["topics"].items()}
        broker_configs: dict[str, Mapping[str, str]] = {
            str(entity): MappingProxyType({str(k): str(v) for k, v in configs.items()})
            for entity, configs in doc.get("broker_configs", {}).items()
        }
        quotas: dict[QuotaEntity, Mapping[str, float]] = {
            entity_of([(str(t), None if n is None else str(n)) for t, n in q["entity"]]):
            MappingProxyType({str(k): float(v) for k, v in q["quotas"].items()})
            for q in doc.get("client_quotas", [])
        }
        return topics, broker_configs, quotas, int(doc.get("next_producer_id", 0))

    def _load_group_configs(self) -> dict[str, Mapping[str, str]]:
        path = self._data_dir / METADATA_FILE
        doc = json.loads(path.read_text()) if path.exists() else {}
        return {str(g): MappingProxyType({str(k): str(v) for k, v in c.items()})
                for g, c in doc.get("group_configs", {}).items()}

    def _persist(self, image: ClusterImage, next_producer_id: int) -> None:
        """Write the metadata file; KafkaError(KAFKA_STORAGE_ERROR) if it cannot be written (a
        full disk), with the file and the image as they were."""
        doc = {
            "topics": {name: t.to_json() for name, t in image.topics.items()},
            "broker_configs": {entity: dict(c) for entity, c in image.broker_configs.items()},
            "client_quotas": [{"entity": [list(p) for p in e], "quotas": dict(q)} for e, q in image.client_quotas.items()],
            "group_configs": {group: dict(c) for group, c in image.group_configs.items()},
            "next_producer_id": next_producer_id,
        }
        try:
            _atomic_write(self._data_dir / METADATA_FILE, json.dumps(doc, sort_keys=True).encode())
        except OSError as exc:
            log.warning("metadata write failed path=%s error=%s", self._data_dir / METADATA_FILE, exc)
            raise KafkaError(
                ErrorCode.kafka_storage_error, f"cluster metadata could not be written: {exc.strerror or exc}"
            ) from None

    def _publish(
        self,
        topics: Mapping[str, TopicRegistration] | None = None,
        broker_configs: Mapping[str, Mapping[str, str]] | None = None,
        client_quotas: Mapping[QuotaEntity, Mapping[str, float]] | None = None,
        group_configs: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        """Persist, then make the new image current and tell the listeners (persisted first, so
        a failed write changes nothing)."""
        new = self._image
        if topics is not None:
            new = replace(new, topics=MappingProxyType(dict(topics)))
        if broker_configs is not None:
            new = replace(new, broker_configs=MappingProxyType(
                {e: MappingProxyType(dict(c)) for e, c in broker_configs.items() if c}
            ))
        if client_quotas is not None:
            new = replace(new, client_quotas=MappingProxyType(
                {e: MappingProxyType(dict(q)) for e, q in client_quotas.items() if q}
            ))
        if group_configs is not None:
            new = replace(new, group_configs=MappingProxyType(
                {g: MappingProxyType(dict(c)) for g, c in group_configs.items() if c}
            ))
        self._persist(new, self._next_producer_id)
        old, self._image = self._image, new
        for listener in self._listeners:
            listener(old, new)

    # -- Controller interface -----------------------------------------------------------------

    @property
    def image(self) -> ClusterImage:
        return self._image

    def subscribe(self, listener: ImageListener) -> None:
        self._listeners.append(listener)
        listener(None, self._image)

    async def start(self) -> None:
        """Starts the controller. As Kafka's KRaft controller does on a cluster with eligible
        leader replicas (ConfigurationControlManager.maybeGenerateElrSafetyRecords), a cluster
        without a cluster-wide min.insync.replicas gets this broker's static value as its dynamic
        default (DYNAMIC_DEFAULT_BROKER_CONFIG)."""
        default = self._image.broker_configs.get(DEFAULT_BROKER_ENTITY, {})
        if MIN_INSYNC_REPLICAS not in default:
            try:
                self._publish(broker_configs={
                    **self._image.broker_configs,
                    DEFAULT_BROKER_ENTITY: {**default, MIN_INSYNC_REPLICAS: str(self._static_min_insync_replicas)},
                })
                log.info("cluster-level min.insync.replicas generated value=%d", self._static_min_insync_replicas)
            except KafkaError:  # logged by _persist; tried again at the next start
                pass
        log.info(
            "controller started mode=embedded cluster_id=%s broker_id=%d topics=%d",
            self._image.cluster_id,
            self._registration.broker_id,
            len(self._image.topics),
        )

    async def stop(self) -> None:
        pass

    async def controlled_shutdown(self) -> bool:
        """A single node has no other broker to take its leaderships."""
        return True

    def suspected_peers(self) -> frozenset[BrokerId]:
        return frozenset()

    def add_suspicion_listener(self, listener: Callable[[], None]) -> None:
        """No peers, so no suspicion ever changes."""

    async def report_offline_replicas(self, replicas: frozenset[TopicPartition]) -> None:
        """A single node: no other replica can take over; the partitions stay offline here."""

    def _new_partitions(
        self, assignments: Mapping[int, tuple[BrokerId, ...]]
    ) -> dict[int, PartitionRegistration]:
        live = set(self._image.brokers)
        return {p: initial_state(replicas, live) for p, replicas in assignments.items()}

    def _plan_topic(self, topic: NewTopic) -> TopicRegistration:
        if topic.name in self._image.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.")
        assignments = plan_topic(self._image.brokers, topic)
        return TopicRegistration(
            name=topic.name,
            topic_id=uuid.uuid4(),
            partitions=MappingProxyType(self._new_partitions(assignments)),
            configs=MappingProxyType(dict(topic.configs)),
        )

    async def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> dict[str, KafkaError | None]:
        results: dict[str, KafkaError | None] = {}
        created: dict[str, TopicRegistration] = {}
        for topic in topics:
            try:
                if topic.name in created:
                    raise KafkaError(ErrorCode.invalid_request, "Duplicate topic in request.")
                created[topic.name] = self._plan_topic(topic)
                results[topic.name] = None
            except KafkaError as e:
                results[topic.name] = e
        if created and not validate_only:
            try:
                self._publish({**self._image.topics, **created})
            except KafkaError as e:
                return {name: (e if error is None else error) for name, error in results.items()}
            for name, t in created.items():
                log.info(
                    "topic created topic=%s topic_id=%s partitions=%d configs=%s",
                    name,
                    t.topic_id,
                    len(t.partitions),
                    dict(t.configs),
                )
        return results

    async def delete_topics(self, names: Sequence[str]) -> dict[str, KafkaError | None]:
        results: dict[str, KafkaError | None] = {}
        remaining = dict(self._image.topics)
        for name in names:
            if name not in remaining:
                results[name] = KafkaError(
                    ErrorCode.unknown_topic_or_partition,
                    "This server does not host this topic-partition.",
                )
            else:
                del remaining[name]
                results[name] = None
        if len(remaining) != len(self._image.topics):
            try:
                self._publish(remaining)
            except KafkaError as e:
                return {name: (e if error is None else error) for name, error in results.items()}
            log.info("topics deleted topics=%s", [n for n, e in results.items() if e is None])
        return results

    async def create_partitions(
        self,
        name: str,
        total_count: int,
        assignments: Sequence[Sequence[BrokerId]] | None,
        *,
        validate_only: bool = False,
    ) -> None:
        topic = self._image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        new_assignments = plan_new_partitions(
            self._image.brokers,
            {p: r.replicas for p, r in topic.partitions.items()},
            total_count,
            assignments,
        )
        if validate_only:
            return
        partitions = {**topic.partitions, **self._new_partitions(new_assignments)}
        self._publish(
            {**self._image.topics, name: replace(topic, partitions=MappingProxyType(partitions))}
        )
        log.info("partitions created topic=%s from=%d to=%d", name, current, total_count)

    async def alter_topic_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        topic = self._image.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
        if validate_only:
            return
        self._publish(
            {**self._image.topics, name: replace(topic, configs=MappingProxyType(dict(configs)))}
        )
        log.info("topic configs altered topic=%s configs=%s", name, dict(configs))

    async def alter_broker_configs(
        self, entity: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        if validate_only:
            return
        self._publish(broker_configs={**self._image.broker_configs, entity: dict(configs)})
        log.info("broker configs altered entity=%r configs=%s", entity, dict(configs))

    async def alter_group_configs(
        self, group: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        if validate_only:
            return
        self._publish(group_configs={**self._image.group_configs, group: dict(configs)})
        log.info("group configs altered group=%s configs=%s", group, dict(configs))

    async def alter_client_quotas(
        self, alterations: Sequence[tuple[QuotaEntity, Sequence[tuple[str, float | None]]]], *, validate_only: bool = False
    ) -> list[KafkaError | None]:
        quotas = dict(self._image.client_quotas)
        results: list[KafkaError | None] = []
        for entity, ops in alterations:
            try:
                quotas[entity] = alter(entity, ops, quotas.get(entity, {}))
                results.append(None)
            except KafkaError as e:
                results.append(e)
        if not validate_only and any(r is None for r in results):
            try:
                self._publish(client_quotas=quotas)
            except KafkaError as e:  # the metadata file could not be written: nothing changed
                return [e if r is None else r for r in results]
            log.info("client quotas altered entities=%s", [e for (e, _), r in zip(alterations, results, strict=True) if r is None])
        return results

    async def allocate_producer_ids(self, broker_id: BrokerId, count: int) -> int:
        first = self._next_producer_id
        self._persist(self._image, first + count)
        self._next_producer_id = first + count
        log.info("producer ids allocated broker_id=%d first=%d count=%d", broker_id, first, count)
        return first

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Sequence[tuple[str, Sequence[int]]] | None,
        timeout_ms: int,
    ) -> ElectionResults:
        """The same rules as in a cluster; the one broker leads every partition, so the answers
        are ELECTION_NOT_NEEDED or UNKNOWN_TOPIC_OR_PARTITION, as Kafka's on one node."""
        live = set(self._image.brokers)
        results, moves = plan_elections(self._image, election_type, partitions, lambda _reg: live)
        if moves:
            topics = dict(self._image.topics)
            for topic, p, _old, new in moves:
                t = topics[topic]
                updated = replace(new, partition_epoch=new.partition_epoch + 1)
                topics[topic] = replace(t, partitions=MappingProxyType({**t.partitions, p: updated}))
                log.info("partition state changed topic=%s partition=%d leader=%d leader_epoch=%d reason=%s",
                         topic, p, new.leader, new.leader_epoch, f"{election_type.name.lower()} leader election")
            self._publish(topics)
        return results

    async def alter_partition_reassignments(
        self, requested: Requested, *, allow_replication_factor_change: bool, timeout_ms: int
    ) -> ReassignmentResults:
        """The same rules as in a cluster. The one broker is every replica, so a valid target
        is itself: nothing moves, and no reassignment is ever in progress, as on a one-broker
        Kafka (a cancel answers NO_REASSIGNMENT_IN_PROGRESS)."""
        live = set(self._image.brokers)
        results, changes = plan_alterations(
            self._image,
            requested,
            may_lead=lambda _reg: live,
            unclean_allowed=lambda _name: False,
            allow_replication_factor_change=allow_replication_factor_change,
        )
        if changes:
            topics = dict(self._image.topics)
            for topic, p, _old, new in changes:
                t = topics[topic]
                updated = replace(complete(new, live) or new, partition_epoch=new.partition_epoch + 1)
                topics[topic] = replace(t, partitions=MappingProxyType({**t.partitions, p: updated}))
                log.info("partition reassignment changed topic=%s partition=%d replicas=%s", topic, p, list(updated.replicas))
            self._publish(topics)
        return results

    async def alter_partition(
        self,
        topic: str,
        partition: int,
        broker_id: BrokerId,
        proposed: PartitionRegistration,
    ) -> PartitionRegistration:
        t = self._image.topics.get(topic)
        current = None if t is None else t.partitions.get(partition)
        if t is None or current is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        if current.leader != broker_id or current.leader_epoch != proposed.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch, "stale leader epoch in AlterPartition")
        if current.partition_epoch != proposed.partition_epoch:
            raise KafkaError(ErrorCode.invalid_update_version, "stale partition epoch")
        updated = replace(proposed, partition_epoch=current.partition_epoch + 1)
        partitions = {**t.partitions, partition: updated}
        self._publish({**self._image.topics, topic: replace(t, partitions=MappingProxyType(partitions))})
        return updated
