"""kazoo on asyncio: every ZooKeeper call as an awaitable that never blocks the event loop.

kazoo runs its own threads (connection, callbacks). Each call here uses kazoo's `*_async` API,
which returns an `IAsyncResult`; its completion callback (run in a kazoo thread) hands the value
or the exception to the event loop with `loop.call_soon_threadsafe`. Watch callbacks and session
state changes are bridged the same way by `AsyncZk.bridge`. Only `start` and `close`, which kazoo
offers only as blocking calls, run in a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import KazooException, RolledBackError
from kazoo.protocol.states import ZnodeStat


class TransactionFailed(Exception):
    """A multi-op transaction was rolled back; `index` is the operation that failed."""

    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(f"transaction op {index} failed: {error!r}")
        self.index = index
        self.error = error


def _settle(fut: asyncio.Future[Any], result: Any) -> None:
    if fut.done():
        return
    if result.successful():
        fut.set_result(result.value)
    else:
        fut.set_exception(result.exception)


class AsyncZk:
    def __init__(self, client: KazooClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop

    def bridge(self, fn: Callable[..., None]) -> Callable[..., None]:
        """Wrap a callback kazoo calls in its own thread so that `fn` runs on the loop."""
        loop = self.loop

        def call(*args: Any) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(fn, *args)

        return call

    async def _await(self, async_result: Any) -> Any:
        fut: asyncio.Future[Any] = self.loop.create_future()
        loop = self.loop

        def done(result: Any) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_settle, fut, result)

        async_result.rawlink(done)
        return await fut

    async def start(self, timeout_s: float) -> None:
        await asyncio.to_thread(self.client.start, timeout_s)

    async def close(self) -> None:
        def stop() -> None:
            try:
                self.client.stop()
            finally:
                self.client.close()

        await asyncio.to_thread(stop)

    async def get(self, path: str, watch: Callable[..., None] | None = None) -> tuple[bytes, ZnodeStat]:
        return await self._await(self.client.get_async(path, watch=watch))

    async def exists(self, path: str, watch: Callable[..., None] | None = None) -> ZnodeStat | None:
        return await self._await(self.client.exists_async(path, watch=watch))

    async def children(self, path: str, watch: Callable[..., None] | None = None) -> list[str]:
        return await self._await(self.client.get_children_async(path, watch=watch))

    async def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, makepath: bool = False,
        sequence: bool = False,
    ) -> str:
        return await self._await(
            self.client.create_async(path, data, ephemeral=ephemeral, makepath=makepath, sequence=sequence)
        )

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        return await self._await(self.client.set_async(path, data, version))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._await(self.client.delete_async(path, version))

    async def ensure_path(self, path: str) -> None:
        try:
            await self.create(path, b"", makepath=True)
        except KazooException as e:
            if type(e).__name__ != "NodeExistsError":
                raise

    def transaction(self) -> TransactionRequest:
        return self.client.transaction()

    async def commit(self, tx: TransactionRequest) -> Sequence[Any]:
        """Commit a transaction; raises TransactionFailed naming the operation that failed."""
        results = await self._await(tx.commit_async())
        for i, r in enumerate(results):
            if isinstance(r, BaseException) and not isinstance(r, RolledBackError):
                raise TransactionFailed(i, r)
        for i, r in enumerate(results):
            if isinstance(r, BaseException):
                raise TransactionFailed(i, r)
        return results
