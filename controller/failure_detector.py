"""UDP heartbeats between brokers, for failover faster than a ZooKeeper session timeout.

Every broker binds one UDP socket (`samsa.heartbeat.port`, 0 = any free port, on the host of its
first listener), advertises it in its /brokers/ids registration, and every
`samsa.heartbeat.interval.ms` sends each registered peer a datagram
`b"SMHB" | broker_id i32 | flags u8 | incarnation u56 | sequence i64` (asyncio-dgram). Flags: bit 0,
the sender is connected to ZooKeeper now; bit 1, the receiver is not registered in the sender's
image. A broker that left the registry keeps getting heartbeats, flagged so, for a minute: a broker
cut off from ZooKeeper alone learns this way that its session has expired, which its own client
can only tell it once it reconnects (self-fencing, controller/zk_health.py). A sender of the first
format, whose random incarnation filled only the low seven of its eight bytes, reads as no flags.

Heartbeats to a registered peer go out through a UDP socket connected to the peer's address, so
that an ICMP "port unreachable" in answer comes back to that socket as a refusal: nothing listens
on the port the peer registered, its process is gone (killed, crashed), and waiting out the timeout
would tell nothing more. Where ICMP is dropped or the peer's host is gone too, the timeout does it.

Per peer the detector keeps the monotonic time it last heard from it. States of a peer, as seen
from this broker:

    ALIVE     --no heartbeat for samsa.heartbeat.timeout.ms-->  SUSPECTED  (on_change(peer, True))
    ALIVE     --a heartbeat to it is refused (port unreachable)-->  SUSPECTED (on_change(peer, True))
    SUSPECTED --a heartbeat arrives-->                           ALIVE      (on_change(peer, False))
    any       --peer leaves the registry-->                      DEPARTED   (still sent heartbeats
                                                                            flagged "not registered")
    DEPARTED  --a minute passes-->                               forgotten
    DEPARTED  --back in the registry-->                          ALIVE
    (new peer) starts ALIVE with a full timeout of grace

The controller turns on_change into ephemeral znodes /samsa/suspicions/<peer>/<self>; the active
controller moves a partition's leadership when a majority of its other ISR members suspect the
leader (controller/election.py). If this broker's own loop stalled (SIGSTOP, a long GC-like pause)
for more than half the timeout, silence says nothing about the peers: every peer gets a fresh
grace period instead of being suspected.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from collections.abc import Callable, Mapping

import asyncio_dgram

from protocol.types import BrokerId

log = logging.getLogger("samsa.failure_detector")

_MAGIC = b"SMHB"
_FORMAT = struct.Struct(">4siqq")
_FLAG_ZOOKEEPER = 1
_FLAG_NOT_REGISTERED = 2
DEPARTED_GRACE_S = 60.0
"""how long a broker that left the registry still gets (flagged) heartbeats"""


class FailureDetector:
    def __init__(
        self,
        broker_id: BrokerId,
        host: str,
        port: int,
        *,
        interval_ms: int,
        timeout_ms: int,
        on_change: Callable[[BrokerId, bool], None],
        on_flags: Callable[[BrokerId], None] = lambda peer: None,
    ) -> None:
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.interval_s = interval_ms / 1000
        self.timeout_s = timeout_ms / 1000
        self._on_change = on_change
        self._on_flags = on_flags
        self._incarnation = int.from_bytes(os.urandom(7), "big")
        self._seq = 0
        self._peers: dict[BrokerId, tuple[str, int]] = {}
        self._last_heard: dict[BrokerId, float] = {}
        self._peer_flags: dict[BrokerId, int] = {}
        self._departed: dict[BrokerId, tuple[tuple[str, int], float]] = {}
        """brokers that left the registry: heartbeat address and when they left"""
        self._flags = 0
        self.suspected: set[BrokerId] = set()
        self._stream: asyncio_dgram.aio.DatagramServer | None = None
        self._links: dict[BrokerId, tuple[tuple[str, int], asyncio_dgram.aio.DatagramClient]] = {}
        """per registered peer: the socket connected to its heartbeat address"""
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._stream = await asyncio_dgram.bind((self.host, self.port))
        self.port = self._stream.sockname[1]
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._send_loop()), loop.create_task(self._recv_loop())]
        log.info(
            "failure detector started broker_id=%d address=%s:%d interval_ms=%d timeout_ms=%d",
            self.broker_id, self.host, self.port, self.interval_s * 1000, self.timeout_s * 1000,
        )  # fmt: skip

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for _addr, link in self._links.values():
            link.close()
        self._links.clear()
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def set_peers(self, peers: Mapping[BrokerId, tuple[str, int]]) -> None:
        """The registered brokers (other than this one) and their heartbeat addresses. No awaits."""
        now = time.monotonic()
        for gone in [b for b in self._peers if b not in peers]:
            self._departed[gone] = (self._peers.pop(gone), now)
            self._last_heard.pop(gone, None)
            self._peer_flags.pop(gone, None)
            if gone in self.suspected:
                self.suspected.discard(gone)
                self._on_change(gone, False)
        for b, addr in peers.items():
            if b == self.broker_id:
                continue
            if b not in self._peers:
                self._last_heard.setdefault(b, now)
            self._peers[b] = addr
            self._departed.pop(b, None)

    def set_zookeeper_connected(self, connected: bool) -> None:
        """What the next heartbeats tell the peers about this broker's ZooKeeper connection."""
        self._flags = _FLAG_ZOOKEEPER if connected else 0

    def peers_saying_unregistered(self) -> set[BrokerId]:
        """Peers heard within the timeout whose last heartbeat said they reach ZooKeeper and do
        not find this broker registered: its session is gone."""
        now = time.monotonic()
        both = _FLAG_ZOOKEEPER | _FLAG_NOT_REGISTERED
        return {
            b for b, heard in self._last_heard.items()
            if now - heard <= self.timeout_s and self._peer_flags.get(b, 0) & both == both
        }  # fmt: skip

    def peers_without_zookeeper(self) -> set[BrokerId]:
        """Peers heard within the timeout whose last heartbeat said they do not reach ZooKeeper:
        they cannot learn of a leadership change now."""
        now = time.monotonic()
        return {
            b for b, heard in self._last_heard.items()
            if now - heard <= self.timeout_s and not self._peer_flags.get(b, 0) & _FLAG_ZOOKEEPER
        }  # fmt: skip

    def silent_for(self, peer: BrokerId) -> float | None:
        """Seconds since this broker last heard `peer` (None for a broker it does not track)."""
        heard = self._last_heard.get(peer)
        return None if heard is None else time.monotonic() - heard

    # -- loops -------------------------------------------------------------------------------------

    async def _send_loop(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.interval_s)
            now = time.monotonic()
            if now - last > self.timeout_s / 2:
                # this process did not run for a while: give every peer a fresh grace period
                log.info("failure detector stalled broker_id=%d stall_ms=%.0f", self.broker_id, (now - last) * 1000)
                for b in self._last_heard:
                    self._last_heard[b] = now
            last = now
            self._seq += 1
            flags = self._flags
            payload = _FORMAT.pack(_MAGIC, self.broker_id, flags << 56 | self._incarnation, self._seq)
            departed = _FORMAT.pack(
                _MAGIC, self.broker_id, (flags | _FLAG_NOT_REGISTERED) << 56 | self._incarnation, self._seq
            )
            for b, (_addr, left) in list(self._departed.items()):
                if now - left > DEPARTED_GRACE_S:
                    del self._departed[b]
            stream = self._stream
            if stream is None:
                return
            for b, addr in list(self._peers.items()):
                await self._send_to_peer(b, addr, payload)
            for b in [b for b in self._links if b not in self._peers]:
                self._links.pop(b)[1].close()
            for addr, _ in self._departed.values():
                try:
                    await stream.send(departed, addr)
                except OSError:
                    pass  # a departed broker that is gone: nothing to tell it
            self._check(now)

    async def _send_to_peer(self, peer: BrokerId, addr: tuple[str, int], payload: bytes) -> None:
        """One heartbeat through the peer's connected socket; a refusal queued on it since the last
        one (ICMP port unreachable) makes the peer SUSPECTED now."""
        held = self._links.get(peer)
        if held is not None and held[0] != addr:
            held[1].close()  # the peer registered again with another heartbeat address
            held = None
        if held is None:
            try:
                held = (addr, await asyncio_dgram.connect(addr))
            except OSError:
                return  # no route or name now: the timeout decides
            self._links[peer] = held
        try:
            await held[1].send(payload)
        except ConnectionRefusedError:
            self._suspect(peer, "port unreachable")
        except OSError:
            pass  # unreachable peer: the timeout decides
        except asyncio_dgram.TransportClosed:
            self._links.pop(peer, None)  # a new socket at the next heartbeat

    def _suspect(self, peer: BrokerId, reason: str) -> None:
        if peer in self.suspected or peer not in self._peers:
            return
        self.suspected.add(peer)
        silent = time.monotonic() - self._last_heard.get(peer, time.monotonic())
        log.warning(
            "peer suspected broker_id=%d peer=%d silent_ms=%.0f reason=%s",
            self.broker_id, peer, silent * 1000, reason,
        )  # fmt: skip
        self._on_change(peer, True)

    def _check(self, now: float) -> None:
        for b, heard in list(self._last_heard.items()):
            if now - heard > self.timeout_s:
                self._suspect(b, "silent")

    async def _recv_loop(self) -> None:
        assert self._stream is not None
        while True:
            try:
                data, _addr = await self._stream.recv()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the socket closed: the detector stops
                return
            if len(data) != _FORMAT.size:
                continue
            magic, peer, flags_incarnation, _seq = _FORMAT.unpack(data)
            if magic != _MAGIC:
                continue
            peer = BrokerId(peer)
            if peer not in self._peers:
                continue
            self._last_heard[peer] = time.monotonic()
            flags = (flags_incarnation >> 56) & 0xFF
            if self._peer_flags.get(peer) != flags:
                self._peer_flags[peer] = flags
                self._on_flags(peer)
            if peer in self.suspected:
                self.suspected.discard(peer)
                log.info("peer heard again broker_id=%d peer=%d", self.broker_id, peer)
                self._on_change(peer, False)
