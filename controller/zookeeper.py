# Over 700 lines: one watch -> cache -> image loop over every znode kind (the writes live in the zk_* mixins).
"""The ZooKeeper controller: cluster metadata in ZooKeeper, one elected controller (kazoo).

Every broker runs this class. It registers itself (ephemeral /brokers/ids/<id>), keeps a
`ClusterImage` built from watches on the znodes of `controller/zk_layout.py`, and calls its
subscribers with (old, new) on the event loop. Admin calls (create/delete topics, partitions,
configs, producer id blocks) are ZooKeeper writes any broker may make, as Kafka's AdminZkClient
did; a topic is created in one multi-op transaction together with its partitions' first states.
Leader elections are made only by the active controller; a leader's ISR change
(`alter_partition`) is a compare-and-set on the state znode's version (= partition epoch) after
checking its leader epoch, so a stale leader cannot win.

Controller state machine (`ControllerState`):

    NOT_CONTROLLER --/controller absent; multi-op {check /controller_epoch version, create
                     ephemeral /controller, set /controller_epoch+1} committed-->  CONTROLLER
    CONTROLLER     --/controller gone or someone else's, a higher /controller_epoch seen, a write
                     whose /controller_epoch check fails, session lost or closed-->  NOT_CONTROLLER
    NOT_CONTROLLER --/controller deleted (watch), new session-->  tries again

While CONTROLLER, `_reconcile` plans every partition with `election.plan_partition` (dead or
shutting-down or majority-suspected leaders, offline partitions, offline replicas in ISRs) and
writes each new state in a transaction that also checks the /controller_epoch version, so a
controller that lost its epoch (paused past its session, cut off) cannot win a write. Any broker
deletes /controller (with a version check) when a majority of the other live brokers suspect the
controller's broker, so a dead controller is replaced without waiting for its session to expire
(suspicions, that rule and self-fencing are in controller/zk_health.py).

Session states (kazoo): CONNECTED -> SUSPENDED (connection lost: keep serving the last image, make
no writes) -> CONNECTED (same session: re-read everything) or LOST (session expired: resign, then
on the next CONNECTED re-register, re-create suspicions, re-watch and re-read everything). A broker
cut off from ZooKeeper whose peers find it no longer registered fences itself (zk_health.py).
No state change awaits: watch callbacks are bridged to the loop, reads are tasks, and their
results are applied synchronously.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from controller import zk_layout as L
from controller.election import majority_suspects, offline_replicas, plan_partition, preferred_leader_moves
from controller.embedded import _new_cluster_id, check_cluster_id
from controller.failure_detector import FailureDetector
from controller.interface import ImageListener
from controller.model import (
    BrokerRegistration,
    ClusterImage,
    PartitionRegistration,
    TopicRegistration,
)
from controller.zk_admin import ZkAdmin
from controller.zk_async import AsyncZk, TransactionFailed
from controller.zk_elections import ZkElections
from controller.zk_group_configs import GROUP_CONFIG_CHILDREN, ZkGroupConfigs
from controller.zk_health import ZkHealth
from controller.zk_quotas import QUOTA_CHILDREN, ZkQuotas
from controller.zk_reassign import ZkReassignments
from controller.zk_settings import ZkSettings
from protocol.types import NO_BROKER, BrokerId, ControllerEpoch

log = logging.getLogger("samsa.controller")

PRODUCER_ID_BLOCK_SIZE = 1000
CONTROLLED_SHUTDOWN_LINGER_S = 0.5
"""after a controlled shutdown moved this broker's leaderships: serving on while clients move"""


class ControllerState(enum.Enum):
    NOT_CONTROLLER = "not_controller"
    CONTROLLER = "controller"


def _truthy(v: str | None) -> bool | None:
    return None if v is None else v.strip().lower() == "true"


class ZooKeeperController(ZkAdmin, ZkElections, ZkReassignments, ZkQuotas, ZkGroupConfigs, ZkHealth):
    def __init__(self, settings: ZkSettings, registration: BrokerRegistration) -> None:
        self.settings = settings
        self.broker_id = registration.broker_id
        self._registration = registration
        self._listeners: list[ImageListener] = []
        self._zk: AsyncZk = None  # type: ignore[assignment]  # set in start()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.state = ControllerState.NOT_CONTROLLER
        self.epoch = 0
        self._epoch_version = -1
        self._session: int | None = None
        self._session_gen = 0
        self._connected = False
        self._loaded = False
        self._stopping = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watchers: dict[tuple[str, str], Callable[..., None]] = {}
        self._image = ClusterImage("", NO_BROKER, ControllerEpoch(0), MappingProxyType({}), MappingProxyType({}))
        self._image_waiters: list[tuple[Callable[[ClusterImage], bool], asyncio.Future[None]]] = []
        self._publish_scheduled = False
        self._listeners_primed = False
        self._reconcile_task: asyncio.Task[None] | None = None
        self._dirty = False
        # the cache the image is built from
        self._cluster_id = ""
        self._controller_id: BrokerId = NO_BROKER
        self._controller_stat_version = -1
        self._controller_epoch_seen = 0
        self._brokers: dict[BrokerId, L.BrokerInfo] = {}
        self._registered_at: dict[BrokerId, float] = {}
        """monotonic time this broker first saw each broker's current registration"""
        self._topic_names: set[str] = set()
        self._assignments: dict[str, tuple[uuid.UUID, dict[int, tuple[BrokerId, ...]]]] = {}
        self._reassigning: dict[str, dict[int, L.Reassigning]] = {}
        self._states: dict[tuple[str, int], L.PartitionState] = {}
        self._configs: dict[str, dict[str, str]] = {}
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._quotas: dict[str, dict[str, float]] = {}
        self._group_configs: dict[str, dict[str, str]] = {}
        self._suspicions: dict[BrokerId, set[BrokerId]] = {}
        self._shutting_down: set[BrokerId] = set()
        self._my_suspicions: set[BrokerId] = set()
        self._suspicion_writes = asyncio.Lock()  # one at a time: a report never lands after its withdrawal
        self._suspicion_listeners: list[Callable[[], None]] = []
        self._suspended_at: float | None = None
        """monotonic time the ZooKeeper connection was lost (None while connected)"""
        self.fenced = False
        """cut off from ZooKeeper past the session timeout while the peers reach it"""
        self.failure_detector = FailureDetector(
            self.broker_id,
            settings.heartbeat_host,
            settings.heartbeat_port,
            interval_ms=settings.heartbeat_interval_ms,
            timeout_ms=settings.heartbeat_timeout_ms,
            on_change=self._on_suspicion_change,
            on_flags=lambda peer: self._notify_suspicion_listeners(),
        )

    # -- Controller interface: image and lifecycle ---------------------------------------------------

    @property
    def image(self) -> ClusterImage:
        return self._image

    def subscribe(self, listener: ImageListener) -> None:
        self._listeners.append(listener)
        if self._loaded:
            listener(None, self._image)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.failure_detector.start()
        client = KazooClient(
            hosts=self.settings.connect,
            timeout=self.settings.session_timeout_ms / 1000,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            command_retry=None,
            **self.settings.tls,
        )
        self._zk = AsyncZk(client, self._loop)
        client.add_listener(self._zk.bridge(self._on_zk_state))
        try:
            await self._zk.start(self.settings.connection_timeout_ms / 1000)
        except Exception as e:  # noqa: BLE001 - any failure to connect ends start-up with one clear error
            raise RuntimeError(f"cannot connect to ZooKeeper at {self.settings.connect}: {e!r}") from None
        self._connected = True
        self._session = client.client_id[0] if client.client_id else None
        await self._bootstrap()
        await self._new_session_setup()
        self._loaded = True
        self._publish()
        self.failure_detector.set_zookeeper_connected(True)
        self._spawn(self._fence_loop())
        if self.settings.auto_leader_rebalance:
            self._spawn(self._leader_balance_loop())
        log.info(
            "controller started mode=zookeeper cluster_id=%s broker_id=%d brokers=%s topics=%d controller_id=%d",
            self._cluster_id, self.broker_id, sorted(self._image.brokers), len(self._image.topics), self._controller_id,
        )  # fmt: skip

    async def stop(self) -> None:
        self._stopping = True
        self._resign("stopping")
        await self.failure_detector.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._zk is not None:
            await self._zk.close()
        log.info("controller stopped mode=zookeeper broker_id=%d", self.broker_id)

    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships away (ephemeral
        /admin/controlled_shutdown/<id>) and wait until no partition it leads has another live ISR
        member, or the timeout passes. Returns True when leadership moved in time.

        If it led anything, it then goes on serving for CONTROLLED_SHUTDOWN_LINGER_S: its clients,
        told NOT_LEADER_OR_FOLLOWER, ask for Metadata and move to the new leaders while this broker
        is still listed. Closing at once, the new leader and this broker's disappearance reach
        librdkafka in one Metadata response, and it parks the partition on no broker until its next
        1 s topic scan (seen: 0.5 s more acknowledgement gap per restart of a rolling restart)."""
        started = time.monotonic()
        led = any(
            reg.leader == self.broker_id for t in self._image.topics.values() for reg in t.partitions.values()
        )
        try:
            await self._zk.create(L.shutdown_path(self.broker_id), b"", ephemeral=True)
        except NodeExistsError:
            pass
        except KazooException as e:
            log.warning("controlled shutdown request failed broker_id=%d error=%r", self.broker_id, e)
            return False

        def done(image: ClusterImage) -> bool:
            return not any(
                reg.leader == self.broker_id
                and any(b != self.broker_id and b in image.brokers for b in reg.isr)
                for t in image.topics.values()
                for reg in t.partitions.values()
            )

        ok = await self._wait_image(done, self.settings.controlled_shutdown_timeout_s)
        log.info(
            "controlled shutdown %s broker_id=%d duration_ms=%.0f",
            "completed" if ok else "timed out", self.broker_id, (time.monotonic() - started) * 1000,
        )  # fmt: skip
        if ok and led:
            await asyncio.sleep(CONTROLLED_SHUTDOWN_LINGER_S)
        return ok

    # -- session ------------------------------------------------------------------------------------

    def _on_zk_state(self, state: str) -> None:
        """Runs on the loop (bridged). No awaits."""
        if self._stopping:
            return
        if state != KazooState.CONNECTED:
            self.failure_detector.set_zookeeper_connected(False)
            if self._suspended_at is None:
                self._suspended_at = time.monotonic()
        if state == KazooState.SUSPENDED:
            self._connected = False
            log.warning("zookeeper connection suspended broker_id=%d", self.broker_id)
        elif state == KazooState.LOST:
            self._connected = False
            self._session_gen += 1
            self._watchers.clear()
            self._resign("session lost")
            log.warning("zookeeper session lost broker_id=%d", self.broker_id)
        elif state == KazooState.CONNECTED:
            was = self._connected
            self._connected = True
            self._suspended_at = None
            self.failure_detector.set_zookeeper_connected(True)
            client_id = self._zk.client.client_id
            session = client_id[0] if client_id else None
            if not self._loaded:
                return  # start() does the first load
            if session != self._session:
                self._session = session
                log.info("zookeeper session renewed broker_id=%d session=%x", self.broker_id, session or 0)
                self._spawn(self._new_session_setup())
            elif not was:
                log.info("zookeeper connection restored broker_id=%d", self.broker_id)
                self._spawn(self._reload())

    async def _bootstrap(self) -> None:
        for path in L.PERSISTENT_PATHS:
            await self._zk.ensure_path(path)
        try:
            await self._zk.create(L.CONTROLLER_EPOCH, b"0")
        except NodeExistsError:
            pass
        try:
            new_id = self.settings.cluster_id or _new_cluster_id()
            await self._zk.create(L.CLUSTER_ID, b'{"version":"1","id":"%s"}' % new_id.encode())
        except NodeExistsError:
            pass
        data, _ = await self._zk.get(L.CLUSTER_ID)
        self._cluster_id = L.decode_cluster_id(data)
        check_cluster_id(self.settings.cluster_id, self._cluster_id, f"ZooKeeper {L.CLUSTER_ID}")

    async def _new_session_setup(self) -> None:
        """Register, re-create this broker's suspicions, re-read everything, try to be controller."""
        await self._register()
        await self._reload()
        await self._try_elect()

    async def _reload(self) -> None:
        """After a (re)connection: bring this broker's suspicion znodes in line with its detector
        (a change while it was disconnected was not written), re-read everything; a fenced broker
        serves again only then."""
        await self._sync_suspicions()
        await self._load_all()
        if self.fenced and self._connected:
            self.fenced = False
            log.info("broker fence lifted broker_id=%d", self.broker_id)
            self._schedule_publish()

    async def _register(self) -> None:
        path = L.broker_path(self.broker_id)
        data = L.encode_broker(self._registration, self._heartbeat_address())
        for _ in range(5):
            try:
                await self._zk.create(path, data, ephemeral=True)
                log.info("broker registered broker_id=%d endpoints=%s", self.broker_id,
                         [f"{e.listener}://{e.host}:{e.port}" for e in self._registration.endpoints])
                return
            except NodeExistsError:
                # a previous incarnation's session has not expired yet (kill -9, quick restart)
                stat = await self._zk.exists(path)
                if stat is not None and stat.ephemeralOwner == self._session:
                    return
                log.info("replacing stale registration broker_id=%d", self.broker_id)
                try:
                    await self._zk.delete(path)
                except NoNodeError:
                    pass
        raise RuntimeError(f"could not register broker {self.broker_id}")

    # -- watched reads ----------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            e = task.exception()
            if isinstance(e, KazooException):
                log.info("zookeeper operation failed broker_id=%d error=%r", self.broker_id, e)
            else:
                log.error("controller task failed broker_id=%d", self.broker_id, exc_info=e)

    def _watcher(self, kind: str, path: str) -> Callable[..., None]:
        key = (kind, path)
        w = self._watchers.get(key)
        if w is None:
            gen = self._session_gen

            def fired(_event: Any) -> None:
                self._watchers.pop(key, None)
                if gen == self._session_gen and not self._stopping:
                    self._spawn(self._read(kind, path))

            w = self._watchers[key] = self._zk.bridge(fired)
        return w

    async def _read(self, kind: str, path: str) -> None:
        """Read one znode (data or children) with a watch and apply it to the cache."""
        gen = self._session_gen
        watch = self._watcher(kind, path)
        children = kind in (
            "broker_ids", "topics", "suspects", "reporters", "shutdowns", "broker_config_entities", *QUOTA_CHILDREN,
            *GROUP_CONFIG_CHILDREN,
        )
        try:
            if children:
                value: Any = await self._zk.children(path, watch)
                stat = None
            else:
                value, stat = await self._zk.get(path, watch)
        except NoNodeError:
            stat = await self._zk.exists(path, watch)
            if stat is not None:
                return await self._read(kind, path)
            value, stat = None, None
        if gen != self._session_gen:
            return
        await self._apply(kind, path, value, stat)
        self._schedule_publish()

    async def _apply(self, kind: str, path: str, value: Any, stat: Any) -> None:
        name = path.rsplit("/", 1)[-1]
        reads: list[Awaitable[None]] = []
        if kind == "broker_ids":
            ids = {BrokerId(int(c)) for c in value or ()}
            for b in list(self._brokers):
                if b not in ids:
                    del self._brokers[b]
                    self._registered_at.pop(b, None)
            reads = [self._read("broker", L.broker_path(b)) for b in ids if b not in self._brokers]
        elif kind == "broker":
            b = BrokerId(int(name))
            if value is None:
                self._brokers.pop(b, None)
                self._registered_at.pop(b, None)
            else:
                info = L.decode_broker(b, value, stat.czxid)
                known = self._brokers.get(b)
                if known is None or known.czxid != info.czxid:
                    self._registered_at[b] = time.monotonic()
                if b != self.broker_id:
                    info = L.apply_override(info, self.settings.inter_broker_listener, self.settings.peer_overrides.get(b))
                self._brokers[b] = info
        elif kind == "topics":
            names = set(value or ())
            for t in self._topic_names - names:
                self._assignments.pop(t, None)
                self._reassigning.pop(t, None)
                self._configs.pop(t, None)
                for key in [k for k in self._states if k[0] == t]:
                    del self._states[key]
            new = names - self._topic_names
            self._topic_names = names
            for t in new:
                reads += [self._read("topic", L.topic_path(t)), self._read("config", L.config_path(t))]
        elif kind == "topic":
            if name in self._topic_names and value is not None:
                topic_id, assignments = L.decode_topic(value)
                old = self._assignments.get(name)
                self._assignments[name] = (topic_id, assignments)
                self._reassigning[name] = L.decode_reassigning(value)
                reads = [
                    self._read("state", L.state_path(name, p))
                    for p in assignments
                    if old is None or p not in old[1]
                ]
        elif kind == "state":
            topic, p = path.split("/")[3], int(path.split("/")[5])
            if topic in self._topic_names:
                if value is None:
                    self._states.pop((topic, p), None)
                else:
                    self._states[(topic, p)] = L.decode_state(value, stat.version)
        elif kind == "config":
            if name in self._topic_names:
                self._configs[name] = L.decode_config(value)
        elif kind == "broker_config_entities":
            entities = {L.broker_config_entity(c) for c in value or ()}
            for e in [e for e in self._broker_configs if e not in entities]:
                del self._broker_configs[e]
            reads = [self._read("broker_config", L.broker_config_path(e)) for e in entities - set(self._broker_configs)]
        elif kind == "broker_config":
            self._broker_configs[L.broker_config_entity(name)] = L.decode_config(value)
        elif kind == "controller":
            self._controller_id = L.decode_controller(value) or NO_BROKER
            self._controller_stat_version = stat.version if stat is not None else -1
            if self.state is ControllerState.CONTROLLER and self._controller_id != self.broker_id:
                self._resign(f"/controller now names {self._controller_id}")
            if value is None:
                self._spawn(self._try_elect())
        elif kind == "controller_epoch":
            self._controller_epoch_seen = int(value or b"0")
            if self.state is ControllerState.CONTROLLER and self._controller_epoch_seen > self.epoch:
                self._resign(f"controller epoch {self._controller_epoch_seen} > {self.epoch}")
        elif kind == "suspects":
            ids = {BrokerId(int(c)) for c in value or ()}
            for b in list(self._suspicions):
                if b not in ids:
                    del self._suspicions[b]
            reads = [self._read("reporters", L.suspicion_path(b)) for b in ids if b not in self._suspicions]
            for b in ids:
                self._suspicions.setdefault(b, set())
        elif kind == "reporters":
            b = BrokerId(int(name))
            if value is None:
                self._suspicions.pop(b, None)
            else:
                self._suspicions[b] = {BrokerId(int(c)) for c in value}
        elif kind == "shutdowns":
            self._shutting_down = {BrokerId(int(c)) for c in value or ()}
        elif kind.startswith("quota"):
            reads = self._apply_quota(kind, path, value)
        elif kind.startswith("group_config"):
            reads = self._apply_group_config(kind, path, value)
        if reads:
            await asyncio.gather(*reads)

    async def _load_all(self) -> None:
        """Re-read every watched path (first start, reconnection, new session)."""
        await asyncio.gather(
            self._read("broker_ids", L.BROKER_IDS),
            self._read("topics", L.TOPICS),
            self._read("controller", L.CONTROLLER),
            self._read("controller_epoch", L.CONTROLLER_EPOCH),
            self._read("suspects", L.SUSPICIONS),
            self._read("shutdowns", L.CONTROLLED_SHUTDOWN),
            self._read("broker_config_entities", L.BROKER_CONFIGS),
            *(self._read("broker_config", L.broker_config_path(e)) for e in list(self._broker_configs)),
            *(self._read("broker", L.broker_path(b)) for b in list(self._brokers)),
            *(self._read("topic", L.topic_path(t)) for t in list(self._topic_names)),
            *(self._read("config", L.config_path(t)) for t in list(self._topic_names)),
            *(self._read("state", L.state_path(t, p)) for (t, p) in list(self._states)),
            *(self._read("reporters", L.suspicion_path(b)) for b in list(self._suspicions)),
            *self._quota_reads(),
            *self._group_config_reads(),
        )

    # -- the image --------------------------------------------------------------------------------

    def _schedule_publish(self) -> None:
        if not self._publish_scheduled and self._loaded and self._loop is not None:
            self._publish_scheduled = True
            self._loop.call_soon(self._publish)

    def _build_image(self) -> ClusterImage:
        topics: dict[str, TopicRegistration] = {}
        for name in sorted(self._topic_names):
            assigned = self._assignments.get(name)
            if assigned is None:
                continue
            topic_id, assignments = assigned
            partitions: dict[int, PartitionRegistration] = {}
            for p, replicas in assignments.items():
                st = self._states.get((name, p))
                if st is None:
                    break
                partitions[p] = st.registration(replicas, self._reassigning.get(name, {}).get(p, ((), ())))
                if self.fenced and partitions[p].leader == self.broker_id:
                    partitions[p] = replace(partitions[p], leader=NO_BROKER)
            else:
                topics[name] = TopicRegistration(
                    name, topic_id, MappingProxyType(partitions), MappingProxyType(dict(self._configs.get(name, {})))
                )
        registered = list(self._brokers)
        return ClusterImage(
            cluster_id=self._cluster_id,
            controller_id=self._controller_id,
            controller_epoch=ControllerEpoch(self._controller_epoch_seen),
            brokers=MappingProxyType({b: i.registration for b, i in sorted(self._brokers.items())}),
            topics=MappingProxyType(topics),
            broker_configs=MappingProxyType(
                {e: MappingProxyType(dict(c)) for e, c in sorted(self._broker_configs.items()) if c}
            ),
            client_quotas=MappingProxyType({e: MappingProxyType(q) for e, q in self._client_quotas().items()}),
            group_configs=MappingProxyType({g: MappingProxyType(c) for g, c in self._group_config_image().items()}),
            fenced=frozenset(
                b
                for b in registered
                if majority_suspects(b, self._suspicions.get(b, set()), registered)
                or (b == self.broker_id and self.fenced)
            ),
        )

    def _publish(self) -> None:
        """Replace the image and tell the subscribers (on the loop, no awaits)."""
        self._publish_scheduled = False
        first = not self._listeners_primed
        new = self._build_image()
        old = self._image
        if new == old and not first:
            self._after_change()
            return
        self._image = new
        self._listeners_primed = True
        for listener in self._listeners:
            listener(None if first else old, new)
        self.failure_detector.set_peers(
            {b: i.heartbeat for b, i in self._brokers.items() if b != self.broker_id and i.heartbeat}
        )
        for pred, fut in list(self._image_waiters):
            if not fut.done() and pred(new):
                fut.set_result(None)
        self._after_change()

    async def _wait_image(self, pred: Callable[[ClusterImage], bool], timeout_s: float) -> bool:
        if pred(self._image):
            return True
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        entry = (pred, fut)
        self._image_waiters.append(entry)
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._image_waiters.remove(entry)

    def _after_change(self) -> None:
        self._maybe_depose_controller()
        if self.state is ControllerState.CONTROLLER:
            self._kick()

    # -- election -------------------------------------------------------------------------------

    async def _try_elect(self) -> None:
        if self.state is ControllerState.CONTROLLER or not self._connected or self._stopping:
            return
        if await self._zk.exists(L.CONTROLLER) is not None:
            return
        data, stat = await self._zk.get(L.CONTROLLER_EPOCH)
        epoch = int(data or b"0") + 1
        tx = self._zk.transaction()
        tx.check(L.CONTROLLER_EPOCH, stat.version)
        tx.create(L.CONTROLLER, L.encode_controller(self.broker_id), ephemeral=True)
        tx.set_data(L.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
        try:
            await self._zk.commit(tx)
        except TransactionFailed as e:
            log.info("controller election lost broker_id=%d reason=%r", self.broker_id, e.error)
            return
        if self._stopping or not self._connected:
            return
        self.state = ControllerState.CONTROLLER
        self.epoch = epoch
        self._epoch_version = stat.version + 1
        self._controller_id = self.broker_id
        log.info("became controller broker_id=%d controller_epoch=%d", self.broker_id, epoch)
        self._kick()
        self._spawn(self.generate_min_insync_replicas_default())

    def _resign(self, reason: str) -> None:
        if self.state is ControllerState.CONTROLLER:
            self.state = ControllerState.NOT_CONTROLLER
            log.warning("controller resigned broker_id=%d controller_epoch=%d reason=%s", self.broker_id, self.epoch, reason)
            if self._reconcile_task is not None:
                self._reconcile_task.cancel()

    def _active(self) -> bool:
        return self.state is ControllerState.CONTROLLER and self._connected

    def _kick(self) -> None:
        self._dirty = True
        if self._reconcile_task is None or self._reconcile_task.done():
            assert self._loop is not None
            self._reconcile_task = self._loop.create_task(self._reconcile())

    def _unclean(self, topic: TopicRegistration) -> bool:
        v = _truthy(topic.configs.get("unclean.leader.election.enable"))
        return self.settings.unclean_default if v is None else v

    async def _reconcile(self) -> None:
        """CONTROLLER only: write every state `plan_partition` asks for; complete reassignments."""
        while self._dirty and self.state is ControllerState.CONTROLLER and self._connected:
            self._dirty = False
            image = self._image
            live, offline = set(image.brokers), offline_replicas(image.brokers)
            suspicions = {b: frozenset(r) for b, r in self._suspicions.items()}
            writes = []
            for topic in image.topics.values():
                unclean = self._unclean(topic)
                for p, reg in topic.partitions.items():
                    planned = plan_partition(  # a replica in a failed log dir is not live
                        reg, live - offline.get((topic.name, p), set()), shutting_down=self._shutting_down,
                        suspicions=suspicions, unclean=unclean)
                    if planned is not None:
                        writes.append(self._write_state(topic.name, p, reg, *planned))
                    elif reg.reassigning:
                        writes.append(self._complete_reassignment(topic.name, p, reg))
            if writes:
                await asyncio.gather(*writes)

    async def _leader_balance_loop(self) -> None:
        """Every leader.imbalance.check.interval.seconds, as CONTROLLER: preferred leaders back."""
        while True:
            await asyncio.sleep(self.settings.leader_imbalance_check_interval_s)
            if self.state is not ControllerState.CONTROLLER or not self._connected:
                continue
            moves = preferred_leader_moves(
                self._image,
                self._shutting_down,
                self.settings.leader_imbalance_percentage,
                doubted=self._settling(),
                out_of_touch=self._out_of_touch(),
            )
            if moves:
                log.info("preferred leader election partitions=%d controller_epoch=%d", len(moves), self.epoch)
                results = await asyncio.gather(
                    *(self._write_state(t, p, old, new, "preferred leader election") for t, p, old, new in moves),
                    return_exceptions=True,
                )
                for error in (r for r in results if isinstance(r, Exception)):
                    log.error("preferred leader election write failed broker_id=%d", self.broker_id, exc_info=error)

    async def _write_state(
        self, topic: str, p: int, old: PartitionRegistration, new: PartitionRegistration, reason: str
    ) -> None:
        tx = self._zk.transaction()
        tx.check(L.CONTROLLER_EPOCH, self._epoch_version)
        tx.set_data(L.state_path(topic, p), L.encode_state(new, self.epoch), version=old.partition_epoch)
        try:
            await self._zk.commit(tx)
        except TransactionFailed as e:
            if e.index == 0:
                self._resign("controller epoch check failed")
            return  # a stale partition epoch: the watch brings the new state and another pass
        except KazooException as e:
            log.info("partition state write failed topic=%s partition=%d error=%r", topic, p, e)
            self._dirty = True
            return
        log.info(
            "partition state changed topic=%s partition=%d leader=%d->%d leader_epoch=%d isr=%s reason=%s controller_epoch=%d",
            topic, p, old.leader, new.leader, new.leader_epoch, list(new.isr), reason, self.epoch,
        )  # fmt: skip

    async def write_state_as_controller(self, topic: str, p: int, new: PartitionRegistration) -> None:
        """A controller write exactly as `_reconcile` makes it (tests use it to show fencing):
        raises TransactionFailed when the epoch check (index 0) or the CAS (index 1) fails."""
        tx = self._zk.transaction()
        tx.check(L.CONTROLLER_EPOCH, self._epoch_version)
        tx.set_data(L.state_path(topic, p), L.encode_state(new, self.epoch), version=new.partition_epoch)
        await self._zk.commit(tx)
