"""Failure detection in the ZooKeeper controller: suspicions, deposing a suspected controller,
doubts about preferred leaders, and self-fencing. Mixed into `ZooKeeperController`
(controller/zookeeper.py), whose session, watched cache and image it uses; the heartbeats
themselves are controller/failure_detector.py, the rules that act on suspicions controller/election.py.

Suspicions. When this broker's detector stops hearing a peer it creates the ephemeral
/samsa/suspicions/<peer>/<self>, and deletes it when it hears the peer again; every broker watches
them. The controller moves a leadership, or takes a follower out of an ISR, on a majority of the
partition's ISR (election.plan_partition); any broker deletes /controller when a majority of the
other brokers suspect the controller's broker. The leader's own detector also takes a suspected
follower that holds the high watermark back out of the ISR (broker/replication/isr.py, through
`suspected_peers` and `add_suspicion_listener`).

Self-fencing. A broker cut off from ZooKeeper alone hears of its session's expiry only when it
reconnects; meanwhile the controller has moved its leaderships, and it would go on taking writes
for partitions it no longer leads, which can never commit (the followers fetch elsewhere), until
its clients' requests time out. Its peers see its registration go the moment ZooKeeper expires
the session, and keep sending it heartbeats flagged "you are not registered" (failure_detector.py).
So a broker that is not connected to ZooKeeper and hears that from a majority of the other brokers
(each of them connected to ZooKeeper) fences itself: it resigns as controller and publishes its
image with no partition led by itself (leader -1), so that waiting acks=all produces end with
NOT_LEADER_OR_FOLLOWER, and counts itself among the fenced brokers of its image, which Metadata
leaves out: a client that knows only this broker (librdkafka connects to the brokers it needs) would
otherwise keep asking it for metadata and get its stale image back; told this broker is gone, it
drops it and asks the others. With ZooKeeper itself down no session expires and nobody fences.

    SERVING --not connected, a majority of peers say "not registered"--> FENCED
    FENCED  --CONNECTED again and everything re-read-->                  SERVING
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError

from controller import zk_layout as L
from controller.election import majority_suspects
from controller.failure_detector import FailureDetector
from protocol.topic_partition import TopicPartition
from protocol.types import NO_BROKER, BrokerId

if TYPE_CHECKING:
    from controller.model import BrokerRegistration
    from controller.zk_async import AsyncZk
    from controller.zk_settings import ZkSettings

log = logging.getLogger("samsa.controller")


class ZkHealth:
    if TYPE_CHECKING:
        settings: ZkSettings
        broker_id: BrokerId
        failure_detector: FailureDetector
        fenced: bool
        _zk: AsyncZk
        _connected: bool
        _stopping: bool
        _suspended_at: float | None
        _brokers: dict[BrokerId, Any]
        _registered_at: dict[BrokerId, float]
        _suspicions: dict[BrokerId, set[BrokerId]]
        _my_suspicions: set[BrokerId]
        _suspicion_writes: asyncio.Lock
        _suspicion_listeners: list[Callable[[], None]]
        _controller_id: BrokerId
        _controller_stat_version: int

        _registration: BrokerRegistration

        def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None: ...
        def _resign(self, reason: str) -> None: ...
        def _schedule_publish(self) -> None: ...

    def _heartbeat_address(self) -> tuple[str, int]:
        """Where this broker's failure detector listens, as its registration gives it."""
        return (self.settings.heartbeat_advertised_host or self.settings.heartbeat_host, self.failure_detector.port)

    async def report_offline_replicas(self, replicas: frozenset[TopicPartition]) -> None:
        """Kafka's ZK brokers write /log_dir_event_notification and the controller asks them which
        replicas are offline; Samsa's broker puts them in its own registration (the controller
        watches it), where a restart, which starts without them, clears them."""
        self._registration = replace(self._registration, offline_replicas=replicas)
        data = L.encode_broker(self._registration, self._heartbeat_address())
        try:
            await self._zk.set(L.broker_path(self.broker_id), data)
            log.warning("offline replicas reported broker_id=%d replicas=%d", self.broker_id, len(replicas))
        except KazooException as e:  # the next registration (new session) carries them
            log.warning("reporting offline replicas failed broker_id=%d error=%r", self.broker_id, e)

    def suspected_peers(self) -> frozenset[BrokerId]:
        """The brokers that cannot follow a leader on this broker now, by its own evidence: its
        failure detector suspects them, or their heartbeats say they are cut off from ZooKeeper
        (they cannot learn of a leadership change; a follower that fetches from a leader that was
        moved meanwhile never comes to this one). The leader takes such a follower out of an ISR
        once it also holds the high watermark back (broker/replication/isr.py)."""
        fd = self.failure_detector
        return frozenset(fd.suspected | fd.peers_without_zookeeper())

    def add_suspicion_listener(self, listener: Callable[[], None]) -> None:
        """Called (on the loop, no awaits) whenever `suspected_peers` may have changed."""
        self._suspicion_listeners.append(listener)

    def _notify_suspicion_listeners(self) -> None:
        for listener in self._suspicion_listeners:
            listener()

    def _on_suspicion_change(self, peer: BrokerId, suspected: bool) -> None:
        """From the failure detector (on the loop): publish or withdraw our suspicion of `peer`."""
        if suspected:
            self._my_suspicions.add(peer)
        else:
            self._my_suspicions.discard(peer)
        if self._zk is not None and self._connected:
            self._spawn(self._write_suspicion(peer, suspected))
        self._notify_suspicion_listeners()

    async def _write_suspicion(self, peer: BrokerId, suspected: bool) -> None:
        """Write whether `peer` is suspected now. The writes run one at a time, each with the
        state as it is when its turn comes: a create still in flight when the peer was heard again
        would otherwise land after the delete and leave a stale suspicion behind."""
        async with self._suspicion_writes:
            await self._write_suspicion_now(peer)

    async def _write_suspicion_now(self, peer: BrokerId) -> None:
        path = L.suspicion_path(peer, self.broker_id)
        # the parent /samsa/suspicions/<peer> is persistent and never deleted (no create/delete race)
        if peer in self._my_suspicions:
            try:
                await self._zk.create(path, b"", ephemeral=True, makepath=True)
                log.info("suspicion reported broker_id=%d suspect=%d", self.broker_id, peer)
            except NodeExistsError:
                pass
        else:
            try:
                await self._zk.delete(path)
                log.info("suspicion withdrawn broker_id=%d suspect=%d", self.broker_id, peer)
            except NoNodeError:
                pass

    async def _sync_suspicions(self) -> None:
        """Write this broker's current view of every registered peer: a suspicion that arose or
        ended while it was cut off from ZooKeeper was not written then (seen in the chaos test: a
        broker reconnecting after ZooKeeper's restart had suspected a peer killed meanwhile, its
        suspicion never reached the controller, and the dead leader's partitions waited for its
        session to expire)."""
        peers = set(self._brokers) | self._my_suspicions
        results = await asyncio.gather(
            *(self._write_suspicion(b, b in self._my_suspicions) for b in peers if b != self.broker_id),
            return_exceptions=True,
        )
        for error in (r for r in results if isinstance(r, Exception)):
            log.info("suspicion not written broker_id=%d error=%r", self.broker_id, error)

    def _maybe_depose_controller(self) -> None:
        """Delete /controller when a majority of the other live brokers suspect its broker."""
        c = self._controller_id
        if c == NO_BROKER or c == self.broker_id or c not in self._brokers or not self._connected:
            return
        voters = [b for b in self._brokers if b != c]
        if self.broker_id in self._suspicions.get(c, set()) and majority_suspects(c, self._suspicions.get(c, set()), voters):
            version = self._controller_stat_version
            log.warning("deposing suspected controller broker_id=%d controller_id=%d", self.broker_id, c)
            self._spawn(self._delete_controller(version))

    async def _delete_controller(self, version: int) -> None:
        try:
            await self._zk.delete(L.CONTROLLER, version)
        except (NoNodeError, BadVersionError):
            pass

    def _out_of_touch(self) -> set[BrokerId]:
        """Brokers that would not take part in a leadership change now: suspected by anyone, not
        heard by this controller for two heartbeat intervals (paused a moment ago, not suspected
        yet), or cut off from ZooKeeper by their own heartbeats' word (they would not learn of it)."""
        recent_s = 2 * self.settings.heartbeat_interval_ms / 1000
        out = {b for b, reporters in self._suspicions.items() if reporters} | self._my_suspicions
        out |= self.failure_detector.peers_without_zookeeper()
        for b in self._brokers:
            silent = self.failure_detector.silent_for(b)
            if b != self.broker_id and (silent is None or silent > recent_s):
                out.add(b)
        return out

    def _settling(self) -> set[BrokerId]:
        """Brokers registered for less than samsa.preferred.leader.settle.ms: just restarted,
        their clients may still be backing off from reconnecting to them."""
        now = time.monotonic()
        return {
            b for b in self._brokers
            if now - self._registered_at.get(b, now) < self.settings.preferred_leader_settle_s
        }  # fmt: skip

    async def _fence_loop(self) -> None:
        """Every heartbeat interval: fence this broker when its session is gone."""
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval_ms / 1000)
            since = self._suspended_at
            if self.fenced or since is None or self._stopping:
                continue
            others = {b for b in self._brokers if b != self.broker_id}
            saying = self.failure_detector.peers_saying_unregistered() & others
            if len(saying) * 2 > len(others):
                self.fenced = True
                self._resign("fenced")
                log.warning(
                    "broker fenced itself broker_id=%d zookeeper_unreachable_ms=%.0f unregistered_for=%s",
                    self.broker_id, (time.monotonic() - since) * 1000, sorted(saying),
                )  # fmt: skip
                self._schedule_publish()
