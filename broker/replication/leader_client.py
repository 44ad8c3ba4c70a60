"""A small asyncio Kafka client a follower uses to talk to its leader (one request in flight).

Frames are `size | header | body`: request header v1 (v2 for flexible versions), bodies encoded
with kio through `protocol.messages`; the response header is v0 (v1, with an empty tagged-field
section, for flexible versions). Any failure (connect, timeout, short read, bad frame) raises
`LeaderConnectionError` and closes the connection; the next request reconnects.

With `security` (the inter-broker listener's: broker/security/client.py) the connection is TLS
and/or authenticates with SaslHandshake v1 and SaslAuthenticate v2 before any other request; a
session with a lifetime (KIP-368) is replaced by a new connection once 90% of it has passed.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.security.client import ClientSecurity, SaslClient
from broker.security.sasl import SaslFailure
from protocol import frames, messages
from protocol.types import BrokerId

if TYPE_CHECKING:
    from controller.model import ClusterImage

_I32 = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 << 20


class LeaderConnectionError(Exception):
    """The leader could not be reached or answered something unreadable."""


class LeaderClient:
    def __init__(
        self, host: str, port: int, *, client_id: str, timeout_s: float,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self._renew_at: float | None = None
        """time.monotonic() after which the authenticated session is replaced"""
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def connect(self) -> None:
        if self._writer is not None:
            if self._renew_at is None or time.monotonic() < self._renew_at:
                return
            self.close()
        tls = self.security.ssl_context if self.security is not None else None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20, ssl=tls,
                                        server_hostname=self.host if tls is not None else None),
                self.timeout_s,
            )
        except (OSError, TimeoutError) as e:
            raise LeaderConnectionError(
                f"connect to {self.host}:{self.port} failed: {e!r}"
            ) from e
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.security is not None and self.security.mechanism is not None:
            try:
                await self._authenticate(reader, writer, self.security)
            except BaseException:
                writer.close()
                raise
        self._reader, self._writer = reader, writer

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            security: ClientSecurity) -> None:
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

        handshake = await self._exchange(reader, writer, SaslHandshakeRequest(mechanism=security.mechanism or ""))
        if handshake.error_code != 0:
            raise LeaderConnectionError(
                f"{self.host}:{self.port} refused SASL mechanism {security.mechanism}: {handshake.error_code.name}")
        sasl = SaslClient(security)
        token: bytes | None = sasl.first()
        while token is not None:
            answer = await self._exchange(reader, writer, SaslAuthenticateRequest(auth_bytes=token))
            if answer.error_code != 0:
                raise LeaderConnectionError(f"authentication to {self.host}:{self.port} failed: "
                                            f"{answer.error_code.name} {answer.error_message}")
            try:
                token = sasl.next(answer.auth_bytes)
            except SaslFailure as e:
                raise LeaderConnectionError(f"{self.host}:{self.port}: {e}") from None
            lifetime_ms = answer.session_lifetime.total_seconds() * 1000
            self._renew_at = time.monotonic() + 0.9 * lifetime_ms / 1000 if lifetime_ms > 0 else None

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, entity: Any) -> Any:
        """One request and its response on a connection being set up."""
        cls = type(entity)
        key, version = int(cls.__api_key__), int(cls.__version__)
        cid, frame = self._frame(entity, version)
        try:
            writer.write(frame)
            await asyncio.wait_for(writer.drain(), self.timeout_s)
            (size,) = _I32.unpack(await asyncio.wait_for(reader.readexactly(4), self.timeout_s))
            if size < 4 or size > MAX_RESPONSE_BYTES:
                raise LeaderConnectionError(f"response frame of size {size}")
            payload = await asyncio.wait_for(reader.readexactly(size), self.timeout_s)
            got, pos = frames.parse_response_header(payload, key, messages.is_flexible(key, version))
            if got != cid:
                raise LeaderConnectionError(f"correlation id {got}, expected {cid}")
            return messages.decode_response(key, version, payload, pos)[0]
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            raise LeaderConnectionError(f"authentication to {self.host}:{self.port} failed: {e!r}") from e

    def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()

    def _frame(self, entity: Any, api_version: int) -> tuple[int, bytes]:
        cls = type(entity)
        key = int(cls.__api_key__)
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        client = self.client_id.encode()
        head = struct.pack(">hhih", key, api_version, cid, len(client)) + client
        if messages.is_flexible(key, api_version):
            head += b"\x00"
        payload = head + messages.encode_bytes(entity)
        return cid, _I32.pack(len(payload)) + payload

    async def request(self, entity: Any, *, timeout_s: float | None = None) -> Any:
        """Send a kio request entity (its class's version) and return the decoded response."""
        cls = type(entity)
        key, version = int(cls.__api_key__), int(cls.__version__)
        await self.connect()
        # this request's own stream: close() may run meanwhile (a fetcher being stopped), and the
        # closed stream then ends the request with a connection error, not an AttributeError
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None
        cid, frame = self._frame(entity, version)
        try:
            writer.write(frame)
            await asyncio.wait_for(writer.drain(), self.timeout_s)
            wait = self.timeout_s if timeout_s is None else timeout_s
            size_bytes = await asyncio.wait_for(reader.readexactly(4), wait)
            (size,) = _I32.unpack(size_bytes)
            if size < 4 or size > MAX_RESPONSE_BYTES:
                raise LeaderConnectionError(f"response frame of size {size}")
            payload = await asyncio.wait_for(reader.readexactly(size), self.timeout_s)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            self.close()
            raise LeaderConnectionError(
                f"request to {self.host}:{self.port} failed: {e!r}"
            ) from e
        except BaseException:
            self.close()  # cancelled mid-request: the connection is out of step
            raise
        try:
            got, pos = frames.parse_response_header(payload, key, messages.is_flexible(key, version))
            if got != cid:
                raise LeaderConnectionError(f"correlation id {got}, expected {cid}")
            entity_out, _used = messages.decode_response(key, version, payload, pos)
        except Exception as e:
            self.close()
            raise LeaderConnectionError(
                f"unreadable response to api_key={key} v{version}: {e!r}"
            ) from e
        return entity_out


class BrokerClients:
    """A `LeaderClient` for each other broker a component talks to, on one listener (the
    inter-broker one) with that listener's TLS/SASL (`security`, None for PLAINTEXT: required, so
    that no component forgets it), made anew when the broker's endpoint moves; and a lock per
    broker for callers that keep one request in flight (transaction markers, verifications)."""

    def __init__(
        self, image: Callable[[], ClusterImage], listener: str, *, client_id: str, timeout_s: float,
        security: ClientSecurity | None,
    ) -> None:
        self._image = image
        self._listener = listener
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._security = security
        self._clients: dict[int, LeaderClient] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def get(self, broker_id: int) -> LeaderClient | None:
        """The client of `broker_id`; None when the broker or its endpoint on the listener is unknown."""
        broker = self._image().brokers.get(BrokerId(broker_id))
        endpoint = broker.endpoint(self._listener) if broker is not None else None
        if endpoint is None:
            return None
        client = self._clients.get(broker_id)
        if client is None or (client.host, client.port) != (endpoint.host, endpoint.port):
            if client is not None:
                client.close()
            client = self._clients[broker_id] = LeaderClient(
                endpoint.host, endpoint.port, client_id=self._client_id, timeout_s=self._timeout_s,
                security=self._security,
            )
        return client

    def lock(self, broker_id: int) -> asyncio.Lock:
        return self._locks.setdefault(broker_id, asyncio.Lock())

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
