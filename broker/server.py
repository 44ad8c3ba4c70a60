"""The broker process: wires config, storage, controller, replica manager and the listeners.

Start-up order: bind the listeners (so port 0 resolves to a real port before the broker registers
its endpoints), recover and load the logs, start the controller (embedded, or ZooKeeper in a
cluster), follow its metadata image with the replica manager, then serve. Shutdown reverses it and
leaves a clean-shutdown marker so the next start skips log recovery.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from pathlib import Path
from typing import Sequence

from broker.config import BrokerConfig, Listener, topic_log_config
from broker.handlers import registry
from broker.log.cleaner import CleanerConfig
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.network import Connection
from broker.producer_ids import ProducerIdManager
from broker.tasks import cancel_and_wait
from broker.coordinator.coordinator import GroupCoordinator
from broker.replication.fetcher_manager import FetcherSettings, ReplicaFetcherManager
from broker.replication.isr import IsrManager
from broker.replication.replica_manager import ReplicaManager
from controller.embedded import EmbeddedController
from controller.interface import Controller
from controller.model import BrokerRegistration, Endpoint, NewTopic, TopicRegistration
from protocol.errors import KafkaError
from protocol.types import BrokerId

log = logging.getLogger("samsa.broker")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = BrokerId(config.broker_id)
        self.servers: list[asyncio.Server] = []
        self.bound: list[tuple[Listener, int]] = []
        self._connections: dict[asyncio.Task[None], Connection] = {}
        self._idle_sweep: asyncio.Task[None] | None = None
        self.log_manager: LogManager | None = None
        self.controller: Controller = None  # type: ignore[assignment]  # set in start()
        self.replica_manager: ReplicaManager = None  # type: ignore[assignment]
        self.group_coordinator: GroupCoordinator = None  # type: ignore[assignment]
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]
        self.default_log_config: LogConfig = config.log_config()
        self._stopped = asyncio.Event()
        self.serving = False
        """start() completed; stop() also cleans up after a start that failed part way."""

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        started = time.monotonic()
        registry.declared()  # fails fast on a malformed handler module; handlers import on first use
        for listener in self.config.listeners:
            server = await asyncio.start_server(
                lambda r, w, name=listener.name: self._accept(name, r, w),
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
                limit=1 << 20,
                start_serving=False,
            )
            port = server.sockets[0].getsockname()[1]
            self.servers.append(server)
            self.bound.append((listener, port))

        data_dir = Path(self.config.log_dirs[0])
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log_manager = LogManager(
            [Path(d) for d in self.config.log_dirs],
            self.default_log_config,
            producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            retention_check_interval_ms=self.config.log_retention_check_interval_ms,
            flush_check_interval_ms=self.config.log_flush_scheduler_interval_ms,
            checkpoint_interval_ms=self.config.log_flush_offset_checkpoint_interval_ms,
            log_start_offset_checkpoint_interval_ms=(
                self.config.log_flush_start_offset_checkpoint_interval_ms),
            high_watermark_checkpoint_interval_ms=(
                self.config.replica_high_watermark_checkpoint_interval_ms),
            cleaner_config=CleanerConfig.from_broker_config(self.config),
        )
        await asyncio.to_thread(self.log_manager.load_logs)
        hw_checkpoints = self.log_manager.read_high_watermarks()

        self.controller = self._new_controller(data_dir)
        self.producer_ids = ProducerIdManager(self.controller, self.broker_id)
        self.replica_manager = ReplicaManager(
            self.broker_id, self.log_manager, self.log_config_for, hw_checkpoints
        )
        self.log_manager.high_watermarks = self.replica_manager.high_watermarks
        self.replica_manager.fetcher_manager = ReplicaFetcherManager(
            self.replica_manager, FetcherSettings.from_config(self.config)
        )
        self.replica_manager.isr_manager = IsrManager(
            self.replica_manager,
            self.controller.alter_partition,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            # a cluster's failure detector: a suspected follower leaves the ISR at once
            suspected=getattr(self.controller, "suspected_peers", None),
            suspicion_timeout_ms=self.config.samsa_heartbeat_timeout_ms,
            suspicion_recheck_ms=self.config.samsa_heartbeat_interval_ms,
        )
        add_suspicion_listener = getattr(self.controller, "add_suspicion_listener", None)
        if add_suspicion_listener is not None:
            add_suspicion_listener(self.replica_manager.isr_manager.wake)
        self.group_coordinator = GroupCoordinator(self)
        self.replica_manager.add_leadership_listener(self.group_coordinator.on_leadership_change)
        self.group_coordinator.start()
        self.controller.subscribe(self.replica_manager.on_image)
        await self.controller.start()
        self.replica_manager.isr_manager.start()
        self.log_manager.start()
        for server in self.servers:
            await server.start_serving()
        self.serving = True
        if self.config.connections_max_idle_ms >= 0:
            self._idle_sweep = asyncio.create_task(
                self._close_idle_connections(self.config.connections_max_idle_ms),
                name="idle-connections",
            )
        log.info(
            "broker started broker_id=%d listeners=%s startup_ms=%.0f",
            self.broker_id,
            ",".join(self.advertised_addresses()),
            (time.monotonic() - started) * 1000,
        )

    def _new_controller(self, data_dir: Path) -> Controller:
        """The ZooKeeper controller when zookeeper.connect is set, else the embedded one."""
        if self.config.zookeeper_connect:
            from controller.zookeeper import ZkSettings, ZooKeeperController

            return ZooKeeperController(ZkSettings.from_config(self.config), self.registration())
        return EmbeddedController(data_dir, self.registration(), self.config.cluster_id)

    async def stop(self) -> None:
        shutdown = getattr(self.controller, "controlled_shutdown", None)
        if shutdown is not None and self.config.controlled_shutdown_enable and self.serving:
            try:
                await shutdown()  # move leadership away while still serving
            except Exception:
                log.exception("controlled shutdown failed broker_id=%d", self.broker_id)
        for server in self.servers:
            server.close()
        if self._idle_sweep is not None:
            await cancel_and_wait([self._idle_sweep])
            self._idle_sweep = None
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.replica_manager is not None:
            if self.replica_manager.fetcher_manager is not None:
                await self.replica_manager.fetcher_manager.shutdown()
            if self.replica_manager.isr_manager is not None:
                await self.replica_manager.isr_manager.stop()
            self.replica_manager.delayed_fetch.wake_all()
            self.replica_manager.delayed_produce.wake_all()
        if self.controller is not None:
            await self.controller.stop()
        if self.log_manager is not None:
            await self.log_manager.stop()
            self.log_manager.close()
        self._stopped.set()
        log.info("broker stopped broker_id=%d", self.broker_id)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    def _accept(self, listener: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = Connection(self, listener, reader, writer)
        task = asyncio.get_running_loop().create_task(connection.serve())
        self._connections[task] = connection
        task.add_done_callback(self._forget_connection)

    def _forget_connection(self, task: asyncio.Task[None]) -> None:
        self._connections.pop(task, None)

    async def _close_idle_connections(self, max_idle_ms: int) -> None:
        """connections.max.idle.ms: close each connection that has had no request in flight
        and no frame started for that long, with one log line (Kafka's clients close theirs
        after 9 minutes, before the broker's 10). The sweep runs every tenth of the limit
        (between 10 ms and 30 s), so a connection goes at most that much later."""
        period_s = min(max(max_idle_ms / 10, 10), 30_000) / 1000
        while True:
            await asyncio.sleep(period_s)
            now = time.monotonic()
            deadline = now - max_idle_ms / 1000
            for task, connection in list(self._connections.items()):
                since = connection.idle_since
                if since is not None and since <= deadline:
                    connection.idle_since = None
                    connection.log_idle_close((now - since) * 1000, max_idle_ms)
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

    async def auto_create_topics(self, names: Sequence[str]) -> dict[str, KafkaError | None]:
        """Create topics on first use (Metadata with auto-creation) with the broker defaults."""
        live = len(self.controller.image.brokers)
        topics = [
            NewTopic(
                name=name,
                num_partitions=self.config.num_partitions,
                replication_factor=min(self.config.default_replication_factor, live),
            )
            for name in names
        ]
        results = await self.controller.create_topics(topics)
        for name, error in results.items():
            if error is None:
                log.info("topic auto-created topic=%s partitions=%d", name, self.config.num_partitions)
        return results
