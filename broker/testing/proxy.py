"""Fault-injecting proxies for the cluster harness: TCP and UDP relays that can be cut and healed.

All proxies run on one asyncio loop in a daemon thread (`ProxyLoop`), so a synchronous test
drives them with plain method calls. A cut TCP proxy closes every relayed connection and closes
new ones as soon as they are accepted (the peer sees a reset or EOF, like a dead link that a
keepalive noticed); a cut UDP proxy drops datagrams. `heal()` lets traffic through again.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any


class ProxyLoop:
    """One event loop in a daemon thread; `call(coro)` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="samsa-proxies", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 10.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


class TcpProxy:
    """127.0.0.1:`port` -> `target()` (resolved at each connection)."""

    def __init__(self, loops: ProxyLoop, target: Callable[[], tuple[str, int]], port: int = 0) -> None:
        self._loops = loops
        self._target = target
        self.port = port
        self.cut_off = False
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections = 0

    def start(self) -> TcpProxy:
        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port, reuse_address=True)
            self.port = self._server.sockets[0].getsockname()[1]

        self._loops.call(start())
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            writer.transport.abort()
            return
        try:
            host, port = self._target()
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        self._writers.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while True:
                    data = await src.read(65536)
                    if not data or self.cut_off:
                        break
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.transport.abort()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        finally:
            self._writers.discard(writer)
            self._writers.discard(up_writer)
            writer.transport.abort()
            up_writer.transport.abort()

    def cut(self) -> None:
        async def cut() -> None:
            self.cut_off = True
            for w in list(self._writers):
                w.transport.abort()

        self._loops.call(cut())

    def heal(self) -> None:
        self.cut_off = False

    def close(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.transport.abort()

        if not self._loops.loop.is_closed():
            self._loops.call(close())


class _Relay(asyncio.DatagramProtocol):
    def __init__(self, proxy: UdpProxy) -> None:
        self.proxy = proxy
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        if self.proxy.cut_off or self.transport is None:
            return
        try:
            self.transport.sendto(data, self.proxy.target())
        except OSError:
            pass


class UdpProxy:
    """Datagrams to 127.0.0.1:`port` are forwarded to `target()` unless cut (one-way is enough:
    heartbeats carry the sender's broker id)."""

    def __init__(self, loops: ProxyLoop, target: Callable[[], tuple[str, int]], port: int = 0) -> None:
        self._loops = loops
        self.target = target
        self.port = port
        self.cut_off = False
        self._transport: asyncio.DatagramTransport | None = None

    def start(self) -> UdpProxy:
        async def start() -> None:
            loop = asyncio.get_running_loop()
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _Relay(self), local_addr=("127.0.0.1", self.port), family=socket.AF_INET
            )
            self._transport = transport
            self.port = transport.get_extra_info("sockname")[1]

        self._loops.call(start())
        return self

    def cut(self) -> None:
        self.cut_off = True

    def heal(self) -> None:
        self.cut_off = False

    def close(self) -> None:
        if self._transport is not None and not self._loops.loop.is_closed():
            self._loops.loop.call_soon_threadsafe(self._transport.close)
