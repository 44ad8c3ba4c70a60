"""The broker process: wires config, storage, controller, replica manager and the listeners.

Start-up order: bind the listeners (so port 0 resolves to a real port before the broker registers
its endpoints), recover and load the logs, start the controller (embedded, or ZooKeeper in a
cluster), follow its metadata image with the replica manager, then serve. Shutdown reverses it and
leaves a clean-shutdown marker so the next start skips log recovery.

Metrics: `self.metrics` (broker/metrics) is counted into by the replica manager and, with
metrics.prometheus.port set, by the connections (per-request histograms); the Prometheus endpoint
starts last and stops first.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.acceptor import Acceptor, ConnectionQuotas, bind, resolve_ip_overrides
from broker.acl import Authorizer
from broker.config import BrokerConfig, Listener, LogConfig, topic_log_config
from broker.config.dynamic import DynamicBrokerConfig
from broker.config.security import parse_super_users
from broker.coordinator.coordinator import GroupCoordinator
from broker.coordinator.group_configs import GroupConfigs
from broker.log.cleaner import CleanerConfig
from broker.log.manager import LogManager
from broker.memory_pool import MemoryPool
from broker.metrics.stats import BrokerMetrics
from broker.network import Connection, receive_buffer
from broker.partition_metadata_client import PartitionMetadataClient
from broker.producer_ids import ProducerIdManager
from broker.quotas import ClientQuotas
from broker.replication.leader_client import BrokerClients
from broker.replication.replica_manager import ReplicaManager
from broker.replication.settings import FetcherSettings, IsrSettings
from broker.security.client import ClientSecurity
from broker.security.listeners import listener_securities
from broker.security.session import ListenerSecurity
from broker.security.tls import StoreSpec, write_pem_files
from broker.services import FORWARDING_CLIENT_ID, BrokerServices
from broker.share.persister import SharePersister
from broker.share.share_coordinator import ShareCoordinator
from broker.share.share_fetch import SharePartitionManager
from broker.tasks import cancel_and_wait
from broker.topic_creation import AutoTopicCreator
from broker.txn.coordinator import TransactionCoordinator
from controller import zk_layout
from controller.embedded import EmbeddedController
from controller.interface import Controller
from controller.model import BrokerRegistration, Endpoint, TopicRegistration
from controller.security_model import ScramCredential
from controller.security_store import EmbeddedSecurityStore, SecurityStore
from controller.zk_settings import ZkSettings
from protocol import record_check
from protocol.types import BrokerId

if TYPE_CHECKING:
    from broker.metrics.end_offsets import RemoteEndOffsets
    from broker.metrics.endpoint import PrometheusEndpoint

log = logging.getLogger("samsa.broker")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = BrokerId(config.broker_id)
        self.acceptors: list[Acceptor] = []
        self.bound: list[tuple[Listener, int]] = []
        self.quotas = ConnectionQuotas(config, {})
        queued = config.queued_max_request_bytes
        self.memory_pool = MemoryPool(
            max(queued, config.socket_request_max_bytes) if queued > 0 else -1)
        self._receive_buffer = receive_buffer()
        self.metrics = BrokerMetrics()
        self._metrics_endpoint: PrometheusEndpoint | None = None
        self._remote_end_offsets: RemoteEndOffsets | None = None
        self._connections: dict[asyncio.Task[None], Connection | None] = {}
        """Every connection task; None until its transport is set up."""
        self._sweep: asyncio.Task[None] | None = None
        self.log_manager: LogManager | None = None
        self.controller: Controller = None  # type: ignore[assignment]  # set in start()
        self.replica_manager: ReplicaManager = None  # type: ignore[assignment]
        self.group_coordinator: GroupCoordinator = None  # type: ignore[assignment]
        self.txn_coordinator: TransactionCoordinator | None = None
        self.share_coordinator: ShareCoordinator | None = None
        self.share_partitions: SharePartitionManager | None = None
        self.share_persister: SharePersister | None = None
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]
        self.default_log_config: LogConfig = config.log_config()
        self.security_store: SecurityStore | None = None
        self.listener_security: dict[str, ListenerSecurity] = {}
        self.dynamic_config = DynamicBrokerConfig(config)
        """This broker's config with the dynamic broker configs applied (the image's)."""
        self._stopped = asyncio.Event()
        self._self_stop: asyncio.Task[None] | None = None
        self.serving = False
        """start() completed; stop() also cleans up after a start that failed part way."""

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        started = time.monotonic()
        self.listener_security = listener_securities(self.config, self._scram_credential)
        self.quotas = ConnectionQuotas(
            self.config, resolve_ip_overrides(self.config.max_connections_per_ip_overrides))
        for listener in self.config.listeners:
            sock = bind(listener)
            self.acceptors.append(Acceptor(listener.name, sock, self.quotas, self._accept))
            self.bound.append((listener, sock.getsockname()[1]))

        data_dir = Path(self.config.log_dirs[0])
        self.log_manager = LogManager(
            [Path(d) for d in self.config.log_dirs],
            self.default_log_config,
            producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            retention_check_interval_ms=self.config.log_retention_check_interval_ms,
            initial_task_delay_ms=self.config.log_initial_task_delay_ms,
            flush_check_interval_ms=self.config.log_flush_scheduler_interval_ms,
            checkpoint_interval_ms=self.config.log_flush_offset_checkpoint_interval_ms,
            log_start_offset_checkpoint_interval_ms=(
                self.config.log_flush_start_offset_checkpoint_interval_ms),
            high_watermark_checkpoint_interval_ms=(
                self.config.replica_high_watermark_checkpoint_interval_ms),
            cleaner_config=CleanerConfig.from_broker_config(self.config),
            io_threads=self.config.num_io_threads,
        )
        await asyncio.to_thread(self.log_manager.load_logs)
        if not self.config.zookeeper_connect and data_dir in self.log_manager.offline_dirs:
            # a single node keeps its metadata there (Kafka's KRaft halts without its metadata dir)
            raise RuntimeError(f"the first log dir, which holds the metadata, is offline: {data_dir}")
        hw_checkpoints = self.log_manager.read_high_watermarks()

        self.controller = self._new_controller(data_dir)
        self.security_store = self._new_security_store(data_dir)
        await self.security_store.start()
        self.authorizer = Authorizer(bool(self.config.authorizer_class_name),
                                     parse_super_users(self.config.super_users),
                                     self.config.allow_everyone_if_no_acl_found)
        self.security_store.subscribe(self.authorizer.on_image)
        self.producer_ids = ProducerIdManager(self.controller, self.broker_id)
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.log_config_for, hw_checkpoints,
            alter_partition=self.controller.alter_partition,
            # a cluster's failure detector: a suspected follower leaves the ISR at once
            isr_settings=IsrSettings.from_config(self.config, self.controller.suspected_peers),
            fetcher_settings=FetcherSettings.from_config(self.config),
            metrics=self.metrics,
            report_offline_replicas=self.controller.report_offline_replicas,
            on_all_log_dirs_failed=self._spawn_stop,
        )  # fmt: skip
        self._configure_replication_throttles(self.config)
        self.log_manager.high_watermarks = self.replica_manager.high_watermarks
        self.controller.add_suspicion_listener(self.replica_manager.isr_manager.wake)
        self.share_coordinator = ShareCoordinator(self.config, self.controller, self.replica_manager)
        self.share_persister = SharePersister(self.broker_id, self.share_coordinator, lambda: self.controller.image,
            BrokerClients(lambda: self.controller.image, self.config.inter_broker_listener_name
                          or self.config.listeners[0].name, client_id=f"samsa-share-persister-{self.broker_id}",
                          timeout_s=self.config.share_coordinator_write_timeout_ms / 1000 + 5,
                          security=ClientSecurity.from_config(self.config)))  # fmt: skip
        self.group_coordinator = GroupCoordinator(
            self.config, self.controller, self.replica_manager, self.share_persister.initialize_partitions,
            self.share_persister.delete_partitions,
        )
        self.share_partitions = SharePartitionManager(
            self.replica_manager.leader_partition, self._topic_name, self.share_persister,
            self.replica_manager.delayed_fetch,
            GroupConfigs(self.config, lambda: self.controller.image).share_partition_settings,
        )  # fmt: skip
        self.txn_coordinator = TransactionCoordinator(
            self.config, self.controller, self.replica_manager, self.producer_ids, self.group_coordinator
        )
        self.services = BrokerServices(
            broker_id=self.broker_id,
            dynamic_config=self.dynamic_config,
            controller=self.controller,
            replica_manager=self.replica_manager,
            group_coordinator=self.group_coordinator,
            txn_coordinator=self.txn_coordinator,
            producer_ids=self.producer_ids,
            topic_creator=AutoTopicCreator(self.controller, self.config),
            quotas=ClientQuotas(
                lambda: self.controller.image.client_quotas,
                self.config.quota_window_num,
                self.config.quota_window_size_seconds,
            ),
            authorizer=self.authorizer,
            security_store=self.security_store,
            controller_channel=BrokerClients(
                lambda: self.controller.image, self.config.inter_broker_listener_name or self.config.listeners[0].name,
                client_id=FORWARDING_CLIENT_ID, timeout_s=30, security=ClientSecurity.from_config(self.config)),
            share_coordinator=self.share_coordinator,
            share_partitions=self.share_partitions,
            share_persister=self.share_persister,
            partition_metadata=PartitionMetadataClient(
                self.broker_id, lambda: self.controller.image, self.replica_manager,
                BrokerClients(lambda: self.controller.image,
                              self.config.inter_broker_listener_name or self.config.listeners[0].name,
                              client_id=f"samsa-partition-metadata-{self.broker_id}", timeout_s=5,
                              security=ClientSecurity.from_config(self.config))),
        )  # fmt: skip
        self.replica_manager.add_leadership_listener(self.group_coordinator.on_leadership_change)
        self.replica_manager.add_leadership_listener(self.txn_coordinator.on_leadership_change)
        self.replica_manager.add_leadership_listener(self.share_coordinator.on_leadership_change)
        self.group_coordinator.start()
        self.txn_coordinator.start()
        self.share_coordinator.start()
        self.dynamic_config.add_listener(self._on_config_change)
        # dynamic broker configs first, so partitions are created with the topic defaults they set
        self.controller.subscribe(lambda old, new: self.dynamic_config.update(new.broker_configs))
        self.controller.subscribe(self.replica_manager.on_image)
        await self.controller.start()
        self.replica_manager.start()
        self.log_manager.start()
        for acceptor in self.acceptors:
            acceptor.start()
        if self.config.metrics_prometheus_port:
            self._start_metrics_endpoint()
        self.serving = True
        self._sweep = asyncio.create_task(self._sweep_connections(), name="connection-sweep")
        log.info(
            "broker started broker_id=%d listeners=%s startup_ms=%.0f",
            self.broker_id,
            ",".join(self.advertised_addresses()),
            (time.monotonic() - started) * 1000,
        )
        log.info("record check walk=%s", record_check.WALK)  # "python": the C extension was not built

    def _start_metrics_endpoint(self) -> None:
        from broker.metrics.collector import BrokerCollector
        from broker.metrics.end_offsets import RemoteEndOffsets
        from broker.metrics.endpoint import PrometheusEndpoint
        from broker.metrics.loop import loop_idle_fraction

        assert self.log_manager is not None and self.services.partition_metadata is not None
        self._remote_end_offsets = RemoteEndOffsets(self.services.partition_metadata)
        collector = BrokerCollector(
            self.metrics,
            broker_id=self.broker_id,
            replica_manager=self.replica_manager,
            log_manager=self.log_manager,
            controller=self.controller,
            group_coordinator=self.group_coordinator,
            quotas=lambda: self.quotas,
            loop_idle=loop_idle_fraction,
            now=time.monotonic,
            remote_end_offsets=self._remote_end_offsets,
        )
        self._metrics_endpoint = PrometheusEndpoint(
            self.config.metrics_prometheus_host, self.config.metrics_prometheus_port, collector.families
        )
        self._metrics_endpoint.start()

    def _new_controller(self, data_dir: Path) -> Controller:
        """The ZooKeeper controller when zookeeper.connect is set, else the embedded one."""
        if self.config.zookeeper_connect:
            from controller.zookeeper import ZooKeeperController

            return ZooKeeperController(zk_settings(self.config), self.registration())
        return EmbeddedController(
            data_dir, self.registration(), self.config.cluster_id,
            static_min_insync_replicas=self.default_log_config.min_insync_replicas,
        )

    def _new_security_store(self, data_dir: Path) -> SecurityStore:
        """ACLs and SCRAM credentials: in ZooKeeper in a cluster, else in the data directory."""
        if self.config.zookeeper_connect:
            from controller.zk_security import ZkSecurityStore

            settings = zk_settings(self.config)
            return ZkSecurityStore(settings.connect, settings.session_timeout_ms,
                                   settings.connection_timeout_ms, settings.tls)
        return EmbeddedSecurityStore(data_dir)

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        store = self.security_store
        return None if store is None else store.image.scram.get(user, {}).get(mechanism)

    async def stop(self) -> None:
        if self._metrics_endpoint is not None:  # its server thread notices within half a second
            await asyncio.to_thread(self._metrics_endpoint.stop)
            self._metrics_endpoint = None
        if self._remote_end_offsets is not None:
            await self._remote_end_offsets.close()
            self._remote_end_offsets = None
        if self.config.controlled_shutdown_enable and self.serving:
            try:
                await self.controller.controlled_shutdown()  # move leadership away while still serving
            except Exception:
                log.exception("controlled shutdown failed broker_id=%d", self.broker_id)
        for acceptor in self.acceptors:
            acceptor.close()
        if self._sweep is not None:
            await cancel_and_wait([self._sweep])
            self._sweep = None
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self.txn_coordinator is not None:
            await self.txn_coordinator.shutdown()
        services = getattr(self, "services", None)
        if services is not None and services.controller_channel is not None:
            services.controller_channel.close()
        if services is not None and services.partition_metadata is not None:
            services.partition_metadata.close()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.share_partitions is not None:
            self.share_partitions.close()
        if self.share_persister is not None:
            self.share_persister.close()
        if self.share_coordinator is not None:
            await self.share_coordinator.shutdown()
        if self.replica_manager is not None:
            await self.replica_manager.shutdown()
        if self.controller is not None:
            await self.controller.stop()
        if self.security_store is not None:
            await self.security_store.stop()
        if self.log_manager is not None:
            await self.log_manager.stop()
            self.log_manager.close()
        self._stopped.set()
        log.info("broker stopped broker_id=%d", self.broker_id)

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.controller.image.topic_by_id(topic_id)
        return None if topic is None else topic.name

    def _spawn_stop(self) -> None:
        """Stop from within (every log dir failed): `samsa serve` then exits with status 1."""
        task = asyncio.get_running_loop().create_task(self.stop(), name="stop")
        self._self_stop = task

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def _accept(self, listener: str, sock: socket.socket, ip: str) -> None:
        """An accepted socket (already counted in the quotas): serve it in a task of its own."""
        task = asyncio.get_running_loop().create_task(self._serve(listener, sock))
        self._connections[task] = None
        task.add_done_callback(lambda t: self._forget_connection(t, listener, ip))
        if self.quotas.excess():
            self._close_excess_connection(listener)

    async def _serve(self, listener: str, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        security = self.listener_security[listener]
        # request metrics (the per-request histograms) only when something will read them
        requests = self.metrics.requests if self.config.metrics_prometheus_port else None
        try:
            _, connection = await loop.connect_accepted_socket(
                lambda: Connection(self.services, listener, self.memory_pool, self._receive_buffer,
                                   self.config.socket_request_max_bytes, security, requests), sock,
                ssl=security.ssl_context)
        except OSError as e:
            try:
                peer = "{}:{}".format(*sock.getpeername()[:2])
            except OSError:
                peer = "?"
            sock.close()
            if security.ssl_context is not None:  # a plaintext client, an untrusted certificate
                log.warning("connection closed reason=tls_handshake_failed client=%s listener=%s "
                            "error=%s", peer, listener, e)
            else:
                log.warning("connection setup failed listener=%s error=%s", listener, e)
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = connection
        await connection.serve()

    def _forget_connection(self, task: asyncio.Task[None], listener: str, ip: str) -> None:
        self._connections.pop(task, None)
        self.quotas.dec(listener, ip)
        for acceptor in self.acceptors:
            acceptor.maybe_resume()

    def _close_excess_connection(self, accepted_on: str) -> None:
        """Kafka's answer to a connection the inter-broker listener accepted beyond
        max.connections: close the least recently active connection of another listener."""
        candidates = [
            (connection.idle_since if connection.idle_since is not None else float("inf"), task)
            for task, connection in self._connections.items()
            if connection is not None and connection.listener != self.quotas.protected_listener
        ]
        if not candidates:
            return
        _, task = min(candidates, key=lambda c: c[0])
        connection = self._connections[task]
        assert connection is not None
        log.info(
            "connection closed reason=max_connections client=%s client_id=%s listener=%s "
            "accepted_on=%s connections=%d max_connections=%d",
            connection.address,
            connection.client_id,
            connection.listener,
            accepted_on,
            self.quotas.total,
            self.quotas.max_connections,
        )
        task.cancel()

    async def _sweep_connections(self) -> None:
        """The connection deadlines, checked every tenth of the shortest (between 10 ms and
        30 s), so a connection goes at most that much late.

        connections.max.idle.ms: close each connection that has had no request in flight and
        no frame started for that long, with one log line (Kafka's clients close theirs after 9
        minutes, before the broker's 10); negative: never. samsa.request.receive.timeout.ms:
        close each connection whose frame has not arrived whole that long after its first
        byte, releasing what it buffered."""
        max_idle_ms = self.config.connections_max_idle_ms
        receive_ms = self.config.samsa_request_receive_timeout_ms
        shortest = min(receive_ms, max_idle_ms) if max_idle_ms >= 0 else receive_ms
        period_s = min(max(shortest / 10, 10), 30_000) / 1000
        while True:
            await asyncio.sleep(period_s)
            now = time.monotonic()
            idle_deadline = now - max_idle_ms / 1000 if max_idle_ms >= 0 else float("-inf")
            receive_deadline = now - receive_ms / 1000
            for task, connection in list(self._connections.items()):
                if connection is None:
                    continue
                since = connection.idle_since
                started = connection.frame_started
                if since is not None and since <= idle_deadline:
                    connection.idle_since = None
                    connection.log_idle_close((now - since) * 1000, max_idle_ms)
                    task.cancel()
                elif started is not None and started <= receive_deadline:
                    connection.frame_started = None
                    connection.log_receive_timeout((now - started) * 1000, receive_ms)
                    task.cancel()

    # -- endpoints -----------------------------------------------------------------------------

    def bound_port(self, listener_name: str) -> int:
        for listener, port in self.bound:
            if listener.name == listener_name:
                return port
        raise KeyError(listener_name)

    def endpoints(self) -> tuple[Endpoint, ...]:
        """Advertised endpoints; port 0 resolves to the bound port, an empty host to this host."""
        result = []
        for adv in self.config.advertised_listeners:
            port = adv.port or self.bound_port(adv.name)
            host = adv.host or socket.getfqdn()
            if host == "0.0.0.0":
                host = socket.getfqdn()
            result.append(Endpoint(adv.name, host, port, adv.security_protocol))
        return tuple(result)

    def advertised_addresses(self) -> list[str]:
        return [f"{e.listener}://{e.host}:{e.port}" for e in self.endpoints()]

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(self.broker_id, self.endpoints(), self.config.broker_rack)

    # -- topics --------------------------------------------------------------------------------

    def log_config_for(self, topic: TopicRegistration) -> LogConfig:
        return topic_log_config(self.default_log_config, topic.configs)

    def _on_config_change(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """Dynamic broker configs changed: the topic defaults they set (log.retention.ms,
        message.max.bytes, ...) apply to every log at once, as Kafka's DynamicLogConfig does, and
        the replication throttles take their new rates."""
        self._configure_replication_throttles(new)
        default = new.log_config()
        if default != self.default_log_config:
            self.default_log_config = default
            assert self.log_manager is not None
            self.log_manager.default_config = default
            self.replica_manager.update_log_configs()

    def _configure_replication_throttles(self, config: BrokerConfig) -> None:
        """leader/follower.replication.throttled.rate, replica.alter.log.dirs.io.max.bytes.per.second
        and their windows to the replica manager."""
        self.replica_manager.update_replication_throttles(
            config.leader_replication_throttled_rate,
            config.follower_replication_throttled_rate,
            config.replication_quota_window_num,
            config.replication_quota_window_size_seconds * 1000,
        )
        self.replica_manager.alter_log_dirs_manager.quota.configure(
            config.replica_alter_log_dirs_io_max_bytes_per_second,
            config.alter_log_dirs_replication_quota_window_num,
            config.alter_log_dirs_replication_quota_window_size_seconds * 1000,
        )


def zk_settings(config: BrokerConfig) -> ZkSettings:
    """The ZooKeeper controller's settings from this broker's config (zookeeper.connect set)."""
    assert config.zookeeper_connect is not None
    host = config.listeners[0].host or "0.0.0.0"
    advertised = next(
        (a.host for a in config.advertised_listeners if a.name == config.inter_broker_listener_name), ""
    )
    if not advertised or advertised == "0.0.0.0":
        advertised = host if host != "0.0.0.0" else socket.getfqdn()
    log_config = config.log_config()  # the topic defaults: unclean.leader.election.enable
    return ZkSettings(
        connect=config.zookeeper_connect,
        session_timeout_ms=config.zookeeper_session_timeout_ms,
        connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        inter_broker_listener=config.inter_broker_listener_name,
        unclean_default=log_config.unclean_leader_election_enable,
        heartbeat_host=host,
        heartbeat_port=config.samsa_heartbeat_port,
        heartbeat_interval_ms=config.samsa_heartbeat_interval_ms,
        heartbeat_timeout_ms=config.samsa_heartbeat_timeout_ms,
        peer_overrides=zk_layout.parse_peer_overrides(config.samsa_peer_address_overrides),
        heartbeat_advertised_host=advertised,
        controlled_shutdown_timeout_s=max(
            1.0, config.controlled_shutdown_max_retries * config.controlled_shutdown_retry_backoff_ms / 1000
        ),
        auto_leader_rebalance=config.auto_leader_rebalance_enable,
        leader_imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds,
        leader_imbalance_percentage=config.leader_imbalance_per_broker_percentage,
        preferred_leader_settle_s=config.samsa_preferred_leader_settle_ms / 1000,
        cluster_id=config.cluster_id,
        tls=zookeeper_tls(config),
        static_min_insync_replicas=log_config.min_insync_replicas,
    )


def zookeeper_tls(config: BrokerConfig) -> dict[str, Any]:
    """kazoo's TLS arguments from the zookeeper.ssl.* configs (PEM files kazoo can read: a PKCS12
    store is written out as PEM, mode 0600, under the data directory)."""
    if not config.zookeeper_ssl_client_enable:
        return {}

    def spec(location: str | None, password: str | None, kind: str | None, key: str) -> StoreSpec | None:
        if not location:
            return None
        kind = kind or ("PKCS12" if location.lower().endswith((".p12", ".pfx")) else "PEM")
        return StoreSpec(kind.upper(), location, password, key=key)

    files = write_pem_files(
        Path(config.log_dirs[0]) / ".zookeeper-tls",
        spec(config.zookeeper_ssl_keystore_location, config.zookeeper_ssl_keystore_password,
             config.zookeeper_ssl_keystore_type, "zookeeper.ssl.keystore.location"),
        spec(config.zookeeper_ssl_truststore_location, config.zookeeper_ssl_truststore_password,
             config.zookeeper_ssl_truststore_type, "zookeeper.ssl.truststore.location"))
    verify = "ca" in files
    return {"use_ssl": True, "verify_certs": verify,
            "check_hostname": verify and config.zookeeper_ssl_endpoint_identification_algorithm.upper() == "HTTPS",
            **files}
