"""A stopped replica fetcher stops even when its cancellation is swallowed.

On CPython < 3.12, `asyncio.wait_for` returns (or raises) the inner result when a cancellation
arrives in the same loop iteration as the inner future completes, and the cancellation is lost.
`ReplicaFetcher.stop()` closes the leader connection and cancels the task at once, which is
exactly that moment: the round ended with a connection error, the loop went on fetching for good
and the broker's shutdown, which awaits the fetcher, hung until it was killed (found by
tests/cluster/test_chaos.py: every clean restart under traffic was a SIGKILL after 20 s).
"""

from __future__ import annotations

import asyncio

from broker.replication.fetcher import ReplicaFetcher
from broker.replication.settings import FetcherSettings
from protocol.types import BrokerId


def test_stop_ends_the_fetcher_when_wait_for_swallows_the_cancellation() -> None:
    async def run() -> int:
        settings = FetcherSettings(broker_id=BrokerId(1), listener_name="REPLICATION")
        fetcher = ReplicaFetcher(settings, BrokerId(2), 0, lambda tp: None, lambda broker_id: None)
        reads: list[asyncio.Future[bytes]] = []

        async def run_once() -> None:  # one round: a long-poll read as LeaderClient.request does it
            read = asyncio.get_running_loop().create_future()
            reads.append(read)
            try:
                await asyncio.wait_for(read, 30)
            except ConnectionResetError:
                pass  # the round ends with a connection error; the fetcher delays and goes on

        fetcher._run_once = run_once  # type: ignore[method-assign]
        fetcher.start()
        while not reads:
            await asyncio.sleep(0.01)
        # closing the connection completes the pending read in the same iteration as the cancel
        reads[0].set_exception(ConnectionResetError("closed by stop()"))
        task = fetcher.stop()
        assert task is not None
        try:
            await asyncio.wait_for(asyncio.shield(task), 2)
        except asyncio.CancelledError:
            pass  # cancelled normally (CPython >= 3.12): fine too
        except TimeoutError:
            task.cancel()
            raise AssertionError(f"the fetcher kept running after stop(): {len(reads)} rounds") from None
        return len(reads)

    assert asyncio.run(run()) == 1
