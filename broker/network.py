"""Connections: frames in, responses out, one request at a time per connection.

Like Kafka's SocketServer, a connection is muted while its request is handled, so responses go
out in request order and pipelined requests wait in the socket buffer. A frame that cannot be
parsed, is larger than socket.request.max.bytes, or names an unknown API key or version closes
that one connection with a log line; every other connection keeps being served.

A connection with no request in flight and no frame started for connections.max.idle.ms is
closed by the broker's idle sweep (`Broker._close_idle_connections`); what the sweep needs costs
a request two attribute assignments (`idle_since`), no timer per read.

Responses are written as bytes chunks and zero-copy file regions: a region (FileRecords) goes
from the segment file to the socket with os.sendfile (asyncio's loop.sendfile), so fetched record
bytes never pass through Python.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from broker import api_stats
from broker.context import CloseConnection, RequestContext
from broker.handlers import registry
from protocol import frames, messages
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.server import Broker

log = logging.getLogger("samsa.network")

# Bytes chunks of one response up to this total are joined into one transport write.
_COALESCE_MAX = 256 * 1024

class ConnectionClosed(Exception):
    """Raised to end a connection after a protocol violation (already logged)."""


class Connection:
    def __init__(
        self,
        broker: Broker,
        listener: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.broker = broker
        self.listener = listener
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.zero_copy = writer.get_extra_info("sslcontext") is None
        self.client_id: str | None = None
        self.idle_since: float | None = time.monotonic()
        """time.monotonic() when the connection last became idle: accepted, or a response
        written; None from a frame's first 4 bytes read until its response is written."""

    async def serve(self) -> None:
        max_size = self.broker.config.socket_request_max_bytes
        try:
            while True:
                try:
                    prefix = await self.reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    return
                self.idle_since = None
                size = frames.read_size(prefix)
                if size < 0 or size > max_size:
                    log.warning(
                        "connection closed reason=frame_size client=%s size=%d max=%d",
                        self.address,
                        size,
                        max_size,
                    )
                    return
                try:
                    payload = await self.reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    log.warning("connection closed reason=truncated_frame client=%s", self.address)
                    return
                await self._handle(payload)
                self.idle_since = time.monotonic()
        except ConnectionClosed:
            return
        except (ConnectionError, OSError) as e:
            log.debug("connection lost client=%s error=%s", self.address, e)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: never let it escape the connection task unlogged
            log.exception("connection closed reason=internal_error client=%s", self.address)
        finally:
            self.writer.close()

    def log_idle_close(self, idle_ms: float, max_idle_ms: int) -> None:
        """The log line of a connection the idle sweep closes."""
        log.info(
            "connection closed reason=idle client=%s client_id=%s listener=%s idle_ms=%.0f "
            "connections_max_idle_ms=%d",
            self.address,
            self.client_id,
            self.listener,
            idle_ms,
            max_idle_ms,
        )

    def _close(self, reason: str, correlation_id: int = -1, **fields: Any) -> ConnectionClosed:
        extra = " ".join(f"{k}={v}" for k, v in fields.items())
        log.warning(
            "connection closed reason=%s client=%s client_id=%s correlation_id=%d %s",
            reason,
            self.address,
            self.client_id,
            correlation_id,
            extra,
        )
        return ConnectionClosed(reason)

    async def _handle(self, payload: bytes) -> None:
        try:
            api_key, api_version, correlation_id = frames.parse_request_key_version(payload)
        except KafkaError:
            raise self._close("malformed_header", size=len(payload)) from None
        handler = registry.get(api_key)
        if handler is None:
            raise self._close("unknown_api_key", correlation_id, api_key=api_key)
        if not handler.supports(api_version):
            if api_key == frames.API_VERSIONS_KEY:
                from broker.handlers.api_18_api_versions import unsupported_version_body

                head = frames.response_header(correlation_id, False)
                body = unsupported_version_body()
                await self._write([frames.size_prefix(len(head) + len(body)), head, body])
                return
            raise self._close(
                "unsupported_version", correlation_id, api_key=api_key, api_version=api_version
            )
        flexible = messages.is_flexible(api_key, api_version)
        try:
            header = frames.parse_request_header(
                payload, frames.request_header_version(api_key, api_version, flexible)
            )
            request, _ = messages.decode_request(api_key, api_version, payload, header.header_size)
        except Exception as e:  # kio raises assorted errors on malformed bodies
            raise self._close(
                "malformed_request", correlation_id, api=handler.name, api_version=api_version, error=repr(e)[:200]
            ) from None
        self.client_id = header.client_id
        api_stats.record(api_key, api_version)
        ctx = RequestContext(
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
            client_id=header.client_id,
            client_address=self.address,
            listener=self.listener,
            broker=self.broker,
            request=request,
        )
        started = time.monotonic()
        try:
            response = await handler.handle(ctx, handler.handler_request(api_version, request))
        except CloseConnection as e:
            raise self._close("handler_closed", correlation_id, api=handler.name, detail=str(e)) from None
        except Exception as e:
            if handler.error_response is None:
                log.exception(
                    "request failed api=%s api_version=%d client_id=%s correlation_id=%d",
                    handler.name,
                    api_version,
                    header.client_id,
                    correlation_id,
                )
                raise self._close("handler_error", correlation_id, api=handler.name) from None
            if not isinstance(e, KafkaError):
                log.exception(
                    "request failed api=%s api_version=%d client_id=%s correlation_id=%d",
                    handler.name,
                    api_version,
                    header.client_id,
                    correlation_id,
                )
                e = KafkaError(ErrorCode.unknown_server_error, str(e))
            try:
                response = handler.error_response(ctx, handler.handler_request(api_version, request), e)
            except Exception:
                log.exception(
                    "error response failed api=%s api_version=%d client_id=%s correlation_id=%d",
                    handler.name,
                    api_version,
                    header.client_id,
                    correlation_id,
                )
                raise self._close("handler_error", correlation_id, api=handler.name) from None
        if response is None:  # acks=0 produce: no response
            return
        out = messages.FrameBuffer()
        # ApiVersions responses always use header v0 (KIP-511).
        out.write(
            frames.response_header(
                correlation_id, flexible and api_key != frames.API_VERSIONS_KEY
            )
        )
        try:
            messages.encode(messages.convert(response, messages.response_class(api_key, api_version)), out)
        except Exception:  # a handler bug: say which API, then drop this connection only
            log.exception(
                "response encoding failed api=%s api_version=%d client_id=%s correlation_id=%d",
                handler.name,
                api_version,
                header.client_id,
                correlation_id,
            )
            raise self._close("response_encoding_error", correlation_id, api=handler.name) from None
        chunks = out.finish()
        await self._write([frames.size_prefix(out.size), *chunks])
        elapsed_ms = (time.monotonic() - started) * 1000
        if elapsed_ms > 1000 and api_key not in (1,):  # fetches long-poll by design
            log.info(
                "slow request api=%s api_version=%d client_id=%s correlation_id=%d ms=%.0f",
                handler.name,
                api_version,
                header.client_id,
                correlation_id,
                elapsed_ms,
            )

    async def _write(self, chunks: list[Any]) -> None:
        """Write a response: consecutive bytes chunks (size prefix, header, body up to the next
        file region) go to the transport as one write, so a response without regions costs one
        send syscall, not one per chunk; each region goes out with sendfile."""
        writer = self.writer
        loop = asyncio.get_running_loop()
        pending: list[bytes | bytearray] = []
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray)):
                pending.append(chunk)
                continue
            # a zero-copy region of a segment file
            if not self.zero_copy:
                pending.append(chunk.read_bytes())
                continue
            self._write_bytes(pending)
            await writer.drain()
            await loop.sendfile(writer.transport, chunk.file, chunk.position, len(chunk))
        self._write_bytes(pending)
        await writer.drain()

    def _write_bytes(self, pending: list[bytes | bytearray]) -> None:
        if not pending:
            return
        if len(pending) == 1:
            self.writer.write(pending[0])
        elif sum(len(c) for c in pending) <= _COALESCE_MAX:
            self.writer.write(b"".join(pending))
        else:  # large chunks: joining would copy them; the transport buffers them as they are
            for c in pending:
                self.writer.write(c)
        pending.clear()
