"""UDP heartbeats between brokers, for failover faster than a ZooKeeper session timeout.

Every broker binds one UDP socket (`samsa.heartbeat.port`, 0 = any free port, on the host of its
first listener), advertises it in its /brokers/ids registration, and every
`samsa.heartbeat.interval.ms` sends each registered peer a datagram
`b"SMHB" | broker_id i32 | incarnation i64 | sequence i64` (asyncio-dgram).

Per peer the detector keeps the monotonic time it last heard from it. States of a peer, as seen
from this broker:

    ALIVE     --no heartbeat for samsa.heartbeat.timeout.ms-->  SUSPECTED  (on_change(peer, True))
    SUSPECTED --a heartbeat arrives-->                           ALIVE      (on_change(peer, False))
    any       --peer leaves the registry-->                      forgotten
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
    ) -> None:
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.interval_s = interval_ms / 1000
        self.timeout_s = timeout_ms / 1000
        self._on_change = on_change
        self._incarnation = int.from_bytes(os.urandom(7), "big")
        self._seq = 0
        self._peers: dict[BrokerId, tuple[str, int]] = {}
        self._last_heard: dict[BrokerId, float] = {}
        self.suspected: set[BrokerId] = set()
        self._stream: asyncio_dgram.aio.DatagramServer | None = None
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
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def set_peers(self, peers: Mapping[BrokerId, tuple[str, int]]) -> None:
        """The registered brokers (other than this one) and their heartbeat addresses. No awaits."""
        now = time.monotonic()
        for gone in [b for b in self._peers if b not in peers]:
            self._peers.pop(gone)
            self._last_heard.pop(gone, None)
            if gone in self.suspected:
                self.suspected.discard(gone)
                self._on_change(gone, False)
        for b, addr in peers.items():
            if b == self.broker_id:
                continue
            if b not in self._peers:
                self._last_heard.setdefault(b, now)
            self._peers[b] = addr

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
            payload = _FORMAT.pack(_MAGIC, self.broker_id, self._incarnation, self._seq)
            stream = self._stream
            if stream is None:
                return
            for addr in list(self._peers.values()):
                try:
                    await stream.send(payload, addr)
                except OSError:
                    pass  # unreachable peer: it will be suspected, nothing to do here
            self._check(now)

    def _check(self, now: float) -> None:
        for b, heard in list(self._last_heard.items()):
            if b not in self.suspected and now - heard > self.timeout_s:
                self.suspected.add(b)
                log.warning(
                    "peer suspected broker_id=%d peer=%d silent_ms=%.0f",
                    self.broker_id, b, (now - heard) * 1000,
                )  # fmt: skip
                self._on_change(b, True)

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
            magic, peer, _incarnation, _seq = _FORMAT.unpack(data)
            if magic != _MAGIC:
                continue
            peer = BrokerId(peer)
            if peer not in self._peers:
                continue
            self._last_heard[peer] = time.monotonic()
            if peer in self.suspected:
                self.suspected.discard(peer)
                log.info("peer heard again broker_id=%d peer=%d", self.broker_id, peer)
                self._on_change(peer, False)
