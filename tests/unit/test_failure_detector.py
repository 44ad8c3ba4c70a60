"""The heartbeat failure detector (controller/failure_detector.py) on loopback: two real detectors."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

from controller.failure_detector import FailureDetector
from protocol.types import BrokerId


async def until(cond: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return cond()


def test_suspicion_silence_and_the_not_registered_flag() -> None:
    async def main() -> None:
        changes: list[tuple[int, int, bool]] = []

        def detector(me: int) -> FailureDetector:
            return FailureDetector(
                BrokerId(me), "127.0.0.1", 0, interval_ms=20, timeout_ms=150,
                on_change=lambda peer, suspected: changes.append((me, peer, suspected)),
            )  # fmt: skip

        a, b = detector(1), detector(2)
        await a.start()
        await b.start()
        # a heartbeats b at a socket that reads nothing but stays open, so that b's silence, not a
        # refusal from a closed port, is what a goes by once b stops
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.bind(("127.0.0.1", 0))
        try:
            a.set_peers({BrokerId(2): sink.getsockname()})
            b.set_peers({BrokerId(1): ("127.0.0.1", a.port)})
            b.set_zookeeper_connected(True)
            assert await until(lambda: (a.silent_for(BrokerId(2)) or 1.0) < 0.1)
            assert a.peers_saying_unregistered() == set()
            # b's image loses a (a's session expired): b keeps heartbeating it, flagged
            b.set_peers({})
            assert await until(lambda: a.peers_saying_unregistered() == {2})
            b.set_zookeeper_connected(False)  # only a peer that reaches ZooKeeper is believed
            assert await until(lambda: a.peers_saying_unregistered() == set())
            b.set_peers({BrokerId(1): ("127.0.0.1", a.port)})
            assert not a.suspected
            stopped = time.monotonic()
            await b.stop()  # b goes silent: a suspects it after the timeout, not before
            assert await until(lambda: 2 in a.suspected)
            assert time.monotonic() - stopped >= 0.1 and (1, 2, True) in changes
        finally:
            await a.stop()
            await b.stop()
            sink.close()

    asyncio.run(main())


def test_a_peer_whose_port_is_closed_is_suspected_before_the_timeout() -> None:
    """Nothing listens on the peer's heartbeat port any more (its process is gone): the ICMP port
    unreachable comes back to the connected socket and the peer is suspected at the next tick, not
    after the 5 s timeout. A peer that listens again is heard again."""

    async def main() -> None:
        changes: list[tuple[int, bool]] = []
        a = FailureDetector(BrokerId(1), "127.0.0.1", 0, interval_ms=20, timeout_ms=5000,
                            on_change=lambda peer, suspected: changes.append((peer, suspected)))  # fmt: skip
        b = FailureDetector(BrokerId(2), "127.0.0.1", 0, interval_ms=20, timeout_ms=5000, on_change=lambda p, s: None)
        await a.start()
        await b.start()
        try:
            a.set_peers({BrokerId(2): ("127.0.0.1", b.port)})
            b.set_peers({BrokerId(1): ("127.0.0.1", a.port)})
            await asyncio.sleep(0.1)
            assert not a.suspected
            port = b.port
            stopped = time.monotonic()
            await b.stop()
            assert await until(lambda: 2 in a.suspected, timeout=2.0)
            assert time.monotonic() - stopped < 1.0 and changes == [(2, True)]
            again = FailureDetector(BrokerId(2), "127.0.0.1", port, interval_ms=20, timeout_ms=5000,
                                    on_change=lambda p, s: None)  # fmt: skip
            await again.start()
            again.set_peers({BrokerId(1): ("127.0.0.1", a.port)})
            try:
                assert await until(lambda: 2 not in a.suspected)
                assert changes == [(2, True), (2, False)]
            finally:
                await again.stop()
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(main())
