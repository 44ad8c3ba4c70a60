# Over 700 lines: one connection's loop (framing, pipelined produces, throttling, writes and sendfile) is one state machine over one read state.
"""Connections: frames in, responses out, in request order.

Like Kafka's SocketServer, a connection handles one request at a time, so responses go out in
request order; one exception, below (pipelined produces). A frame that cannot be parsed, is larger than
socket.request.max.bytes, or names an unknown API key or version closes that one connection with
a log line; every other connection keeps being served.

Reading (`Connection` is an asyncio BufferedProtocol, so bytes land where they are needed):
small frames are received into one scratch buffer shared by the broker's connections and copied
out once;
a frame larger than what has arrived gets a buffer of its own that the socket is read into
directly, allocated in steps as its bytes arrive (up to 1 MiB at first, then doubling), so a
declared size costs memory only once it is sent. queued.max.request.bytes (`MemoryPool`) is
reserved when a size prefix is read and returned when the response is written. While a request is
handled, the next frame is read ahead; once it is complete the connection stops reading, so a
client pipelining requests has at most two frames in the broker (Kafka's processor reads none
ahead; reading one ahead overlaps receiving the next produce with appending the current one).

Pipelined produces: a Produce with acks=all whose records are appended waits in the produce
purgatory for the followers, often for most of its time (one with acks 0 or 1 never waits there:
it is handled like any other request unless produces wait before it). Kafka's processor reads
nothing from the connection meanwhile, so a client with several requests in flight (the Java
producer sends up to five) queues them behind each replication round trip. Samsa reads on once
the append is done (the handler calls `RequestContext.release`): a next request that is a Produce
is handled at once (appended in request order, so the log holds the records as Kafka would have
them), up to `MAX_PIPELINED_PRODUCES` waiting at a time; any other request waits until every
earlier one is answered, as in Kafka. Responses are written in request order whatever order the waits end in.

Two deadlines are checked by the broker's sweep (`Broker._sweep_connections`), at the cost of a
few attribute assignments per request and no timer per read: a connection with no request in
flight and no frame started for connections.max.idle.ms is closed (`idle_since`); a frame not
received whole within samsa.request.receive.timeout.ms of its first byte is closed and its
buffer released (`frame_started`).

Responses are written as bytes chunks and zero-copy file regions: a region (FileRecords) goes
from the segment file to the socket with os.sendfile (asyncio's loop.sendfile), so fetched record
bytes never pass through Python. On a TLS connection the bytes must go through OpenSSL, so a region
is read into memory and written to the TLS transport instead.

Authentication (broker/security/session.py): each connection has a `Session`; until it is
authenticated only the requests its state admits are read (ApiVersions, SaslHandshake,
SaslAuthenticate, in Kafka's order), frames are bounded by sasl.server.max.receive.size, and after
SaslHandshake v0 frames are bare SASL tokens. A session whose lifetime has passed closes at its
next request other than SaslHandshake; a failed authentication closes after its response.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
import os
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.static.primitive import i32Timedelta

from broker import api_stats
from broker.context import CloseConnection, RequestContext, connection_id
from broker.handlers import registry
from broker.memory_pool import MemoryPool
from broker.metrics.stats import REMOTE_TIME, RemoteTime, RequestMetrics, camel_case
from broker.security.sasl import SaslFailure
from broker.security.session import PLAINTEXT, ListenerSecurity, SaslState, Session
from protocol import frames, messages
from protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.services import BrokerServices

log = logging.getLogger("samsa.network")

# Bytes chunks of one response up to this total are joined into one transport write.
_COALESCE_MAX = 256 * 1024
SCRATCH_SIZE = 256 * 1024
"""The receive buffer shared by every connection that has no large frame in progress."""
FIRST_CHUNK = 1 << 20
"""A large frame's buffer starts at this size (or the frame's) and doubles as bytes arrive."""
_SIZE = struct.Struct(">i")
_REQUEST_NAMES: dict[int, str] = {}
"""Kafka's request name (ApiKeys.name) of each API key, as RequestMetrics labels requests."""


def receive_buffer() -> memoryview:
    """The scratch buffer the connections of one broker (one event loop) share. Each fill is
    parsed at once in buffer_updated, before any other connection can read into it: asyncio calls
    get_buffer, recv_into and buffer_updated back to back on the loop's one thread."""
    return memoryview(bytearray(SCRATCH_SIZE))


PRODUCE_KEY = 0
FETCH_KEY = 1


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _releaser(released: asyncio.Future[None]) -> Callable[[], None]:
    """RequestContext.release for a Produce: let its connection read on."""

    def release() -> None:
        if not released.done():
            released.set_result(None)

    return release


class ConnectionClosed(Exception):
    """Raised to end a connection after a protocol violation (already logged)."""


class EndOfStream(Exception):
    """The peer closed the connection, or it was lost; `truncated` when inside a frame."""

    def __init__(self, truncated: bool) -> None:
        super().__init__("end of stream")
        self.truncated = truncated


class ReadState(enum.Enum):
    READING = "reading"
    WAITING_MEMORY = "waiting_memory"
    FULL = "full"
    CLOSED = "closed"


Frame = tuple[bytes | memoryview, int, float]
"""A request frame's payload, the bytes it reserved in the memory pool, and when it was received
whole (time.monotonic())."""

MAX_PIPELINED_PRODUCES = 5
"""Produces of one connection waiting for their replicas at once (the Java producer's default
max.in.flight.requests.per.connection); a further one waits for the oldest to be answered."""


class _InFlight:
    """A request being handled: what it holds until its response is written."""

    __slots__ = ("reserved", "received_at", "remote")

    def __init__(self, reserved: int, received_at: float) -> None:
        self.reserved = reserved
        """Bytes of queued.max.request.bytes the frame holds (returned once answered)."""
        self.received_at = received_at
        self.remote = RemoteTime()
        """Its time in purgatories (REMOTE_TIME in its task)."""


class Connection(asyncio.BufferedProtocol):
    """One client connection: request frames in, one handled at a time (but for pipelined
    produces, see the module docstring), responses out in request order.

    Read states (while a request is handled, the next frame is read ahead):
      READING        bytes are parsed as they arrive; the first byte of a frame starts its
                     receive deadline (`frame_started`).
      WAITING_MEMORY a size prefix was read but queued.max.request.bytes has nothing left: the
                     transport is paused and the connection waits in the pool (no deadline).
      FULL           a complete frame waits behind the request in flight: the transport is
                     paused, so at most one frame is read ahead (the rest stays in the socket).
      CLOSED         the connection is gone; every reservation and buffer is released.
    Transitions: READING -> WAITING_MEMORY (pool empty at a size prefix) -> READING (memory
    granted); READING -> FULL (a frame completes while another is handled) -> READING (`serve`
    takes it); any -> CLOSED (`connection_lost`).
    """

    def __init__(
        self,
        services: BrokerServices,
        listener: str,
        pool: MemoryPool,
        scratch: memoryview,
        max_request_bytes: int,
        security: ListenerSecurity = PLAINTEXT,
        metrics: RequestMetrics | None = None,
    ) -> None:
        self.services = services
        self._metrics = metrics
        self._in_flight: list[_InFlight] = []
        """Requests handled and not answered yet, oldest first (more than one: pipelined produces)."""
        self._muted_until = 0.0
        """time.monotonic() until which the connection is throttled (`_mute`): nothing is read
        from it before then; one deadline however many throttled responses set it."""
        self.listener = listener
        self.session = Session(security, "?")
        self._pool = pool
        self._scratch = scratch
        self._max_size = max_request_bytes
        self.transport: asyncio.Transport | None = None
        self.address = "?"
        self.zero_copy = True
        self._sock_fd = -1
        """The plain-TCP socket's descriptor, for `_sendfile_now` (-1 on TLS)."""
        self.client_id: str | None = None
        self.idle_since: float | None = time.monotonic()
        """time.monotonic() when the connection last became idle: accepted, or a response
        written with no frame started; None while a request is in flight or a frame arrives."""
        self.frame_started: float | None = None
        """time.monotonic() when the frame being received started (its first byte, or the
        moment memory was granted to it); None when no frame is being received."""
        self._state = ReadState.READING
        self._pending = bytearray()
        """Received bytes not parsed yet: a partial size prefix, or what arrived behind a frame."""
        self._body: bytearray | None = None
        self._body_size = 0
        self._body_filled = 0
        self._reserved: int | None = None
        """Pool bytes reserved by the frame being received."""
        self._inbox: Frame | None = None
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[Frame] | None = None
        self._write_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None

    # -- asyncio protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.address = self.session.address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.zero_copy = transport.get_extra_info("sslcontext") is None
        sock = transport.get_extra_info("socket")
        self._sock_fd = sock.fileno() if sock is not None and self.zero_copy else -1
        if self.session.on_tls(transport.get_extra_info("ssl_object")) is not None:
            transport.close()

    def get_buffer(self, sizehint: int) -> memoryview:
        body = self._body
        if body is None:
            return self._scratch
        if self._body_filled == len(body):  # grow: memory follows the bytes actually sent
            body.extend(bytes(min(self._body_size, 2 * len(body)) - len(body)))
        return memoryview(body)[self._body_filled :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._body is not None:
            self._body_filled += nbytes
            if self._body_filled == self._body_size:
                payload = memoryview(self._body).toreadonly()
                self._body = None
                self._deliver(payload)
                if self._pending:
                    self._parse_pending()
        elif self._state is ReadState.READING and not self._pending:
            used = self._parse(self._scratch[:nbytes])
            if used < nbytes:
                self._pending += self._scratch[used:nbytes]
        else:
            self._pending += self._scratch[:nbytes]
            self._parse_pending()
        self._update_reading()

    def eof_received(self) -> bool | None:
        return None  # the transport closes; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        # READING: what is pending is a frame begun; otherwise whole frames may wait behind one
        truncated = self._body is not None or (
            self._state is ReadState.READING and len(self._pending) >= 4)
        self._state = ReadState.CLOSED
        self._body = None
        self._pending = bytearray()
        self.frame_started = None
        for reserved in (self._reserved, *(r.reserved for r in self._in_flight),
                         self._inbox[1] if self._inbox else 0):
            if reserved:
                self._pool.release(reserved)
        for request in self._in_flight:
            request.reserved = 0
        self._reserved = None
        if self._inbox is not None:
            self._inbox = (self._inbox[0], 0, self._inbox[2])
        self._fail(EndOfStream(truncated))
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    # -- frames --------------------------------------------------------------------------------

    def _parse(self, buf: memoryview) -> int:
        """Read frames from `buf` while READING; returns the bytes consumed."""
        pos, end = 0, len(buf)
        while self._state is ReadState.READING and pos < end:
            if self.frame_started is None:
                self.frame_started = time.monotonic()
                self.idle_since = None
            if end - pos < 4:
                break
            size = _SIZE.unpack_from(buf, pos)[0]
            max_size = self._max_size if self.session.authenticated else \
                min(self._max_size, self.session.security.max_receive_size)
            if size < 0 or size > max_size:
                if self.session.authenticated:
                    log.warning("connection closed reason=frame_size client=%s size=%d max=%d "
                                "client_id=%s", self.address, size, max_size, self.client_id)
                else:  # Kafka: "Failing SASL authentication due to invalid receive size"
                    log.warning("authentication failed client=%s listener=%s reason=invalid_receive_size "
                                "size=%d max=%d", self.address, self.listener, size, max_size)
                self._state = ReadState.FULL  # nothing more is read
                self._fail(ConnectionClosed("frame_size"))
                return end
            if self._reserved is None:
                if not self._pool.try_allocate(size):
                    self._state = ReadState.WAITING_MEMORY
                    self.frame_started = None
                    self._pool.wait(self._memory_granted)
                    break
                self._reserved = size
            start = pos + 4
            if end - start >= size:
                self._deliver(bytes(buf[start : start + size]))
                pos = start + size
                continue
            body = bytearray(min(size, max(FIRST_CHUNK, end - start)))
            body[: end - start] = buf[start:]
            self._body, self._body_size, self._body_filled = body, size, end - start
            return end
        return pos

    def _parse_pending(self) -> None:
        if self._state is not ReadState.READING:
            return
        with memoryview(self._pending) as view:
            used = self._parse(view)
        if used:
            del self._pending[:used]

    def _memory_granted(self) -> None:
        """The pool released memory: read the frame whose size prefix waits in `_pending`."""
        if self._state is not ReadState.WAITING_MEMORY:
            return  # closed meanwhile
        self._state = ReadState.READING
        self._parse_pending()
        self._update_reading()

    def _deliver(self, payload: bytes | memoryview) -> None:
        frame = (payload, self._reserved or 0, time.monotonic())
        self._reserved = None
        self.frame_started = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            self._waiter = None
            waiter.set_result(frame)
        else:
            self._inbox = frame
            self._state = ReadState.FULL

    def _fail(self, error: BaseException) -> None:
        """End `serve` with `error` once it has taken any frame already complete."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            self._waiter = None
            waiter.set_exception(error)
        elif self._error is None:
            self._error = error

    async def _next_frame(self) -> Frame:
        frame = self._inbox
        if frame is not None:
            self._inbox = None
            if self._state is ReadState.FULL and self._error is None:
                self._state = ReadState.READING
                self._parse_pending()
                self._update_reading()
        elif self._error is not None:
            raise self._error
        else:
            self._waiter = asyncio.get_running_loop().create_future()
            frame = await self._waiter
        self.idle_since = None
        return frame

    def _request_done(self, request: _InFlight) -> None:
        """The response is written (or the request failed): return the frame's memory."""
        self._in_flight.remove(request)
        if request.reserved:
            reserved, request.reserved = request.reserved, 0
            self._pool.release(reserved)
        if self.frame_started is None and self._inbox is None and not self._in_flight:
            self.idle_since = time.monotonic()

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self._state is ReadState.CLOSED:
            return
        if self._state is ReadState.READING and time.monotonic() >= self._muted_until:
            transport.resume_reading()
        else:
            transport.pause_reading()

    def received_bytes(self) -> tuple[int, int]:
        """(bytes received, declared size or -1) of the frame being received."""
        if self._body is not None:
            return 4 + self._body_filled, self._body_size
        pending = len(self._pending)
        return pending, _SIZE.unpack_from(self._pending)[0] if pending >= 4 else -1

    # -- serving -------------------------------------------------------------------------------

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        behind: list[asyncio.Task[None]] = []  # released produces not answered yet, oldest first
        current: asyncio.Task[None] | None = None
        try:
            while True:
                await self._throttled()
                payload, reserved, received_at = await self._next_frame()
                request = _InFlight(reserved, received_at)
                self._in_flight.append(request)
                produce = frames.is_api_key(payload, PRODUCE_KEY)
                behind = [t for t in behind if not t.done()]
                if behind and (not produce or len(behind) >= MAX_PIPELINED_PRODUCES):
                    await (behind[0] if produce else behind[-1])  # each answers after the one before
                    behind = [t for t in behind if not t.done()]
                # Kafka's way: handled and answered before the next is read; so is a Produce that
                # will not wait for replicas (acks 0 or 1) when none waits before it: it needs no
                # task of its own (a task and a future cost a Produce ~7 µs and two loop turns)
                if not produce or (not behind and frames.produce_acks(payload) in (0, 1)):
                    REMOTE_TIME.set(request.remote)
                    try:
                        await self._handle(payload, request)
                    finally:
                        self._request_done(request)
                    del payload
                    continue
                released: asyncio.Future[None] = loop.create_future()
                current = loop.create_task(self._serve_one(payload, request, behind[-1] if behind else None, released))
                del payload
                await released
                if current.done():
                    current.result()  # ends the connection if it failed
                else:
                    current.add_done_callback(self._released_done)
                    behind.append(current)
                current = None
        except EndOfStream as e:
            if e.truncated:
                log.warning("connection closed reason=truncated_frame client=%s client_id=%s",
                            self.address, self.client_id)
        except ConnectionClosed:
            return
        except (ConnectionError, OSError) as e:
            log.debug("connection lost client=%s error=%s", self.address, e)
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug: never let it escape the connection task unlogged
            log.exception("connection closed reason=internal_error client=%s", self.address)
        finally:
            for task in (*behind, current):
                if task is not None:
                    task.cancel()
            if self.transport is not None:
                self.transport.close()
            if self.services.share_partitions is not None:  # its share session goes (records released)
                self.services.share_partitions.on_disconnect(connection_id(self.listener, self.address))

    async def _serve_one(self, payload: bytes | memoryview, request: _InFlight, after: asyncio.Task[None] | None,
                         released: asyncio.Future[None]) -> None:
        """A Produce in a task of its own (its REMOTE_TIME its own): `released` is set once its
        records are appended (ctx.release) or it ends, and it answers after `after`."""
        REMOTE_TIME.set(request.remote)
        try:
            await self._handle(payload, request, after, released)
        finally:
            self._request_done(request)
            if not released.done():
                released.set_result(None)

    def _released_done(self, task: asyncio.Task[None]) -> None:
        """A released produce ended: if it failed, end the connection (`serve` may be waiting
        for the next frame, not for it)."""
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._fail(error)
            if self.transport is not None:
                self.transport.close()

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

    def log_receive_timeout(self, elapsed_ms: float, timeout_ms: int) -> None:
        """The log line of a connection the sweep closes because its frame is late."""
        received, size = self.received_bytes()
        log.warning(
            "connection closed reason=receive_timeout client=%s client_id=%s listener=%s "
            "received_bytes=%d frame_size=%d elapsed_ms=%.0f samsa_request_receive_timeout_ms=%d",
            self.address,
            self.client_id,
            self.listener,
            received,
            size,
            elapsed_ms,
            timeout_ms,
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

    async def _raw_token(self, payload: bytes | memoryview) -> None:
        """A SASL token after SaslHandshake v0: no Kafka header, answered size-prefixed."""
        try:
            answer, _ = await self.session.authenticate(bytes(payload), 0)
        except SaslFailure:
            raise ConnectionClosed("authentication_failed") from None
        await self._write([frames.size_prefix(len(answer)), answer])

    async def _handle(self, payload: bytes | memoryview, request_state: _InFlight,
                      after: asyncio.Task[None] | None = None,
                      released: asyncio.Future[None] | None = None) -> None:
        """Handle one request and write its response, after `after`'s. A Produce may call
        `ctx.release` once appended: `released` then lets `serve` read on (pipelined produces)."""
        session = self.session
        if session.state is not SaslState.COMPLETE or session.expires_at is not None:
            if session.raw_tokens:
                await self._raw_token(payload)
                return
        try:
            api_key, api_version, correlation_id = frames.parse_request_key_version(payload)
        except KafkaError:
            raise self._close("malformed_header", size=len(payload)) from None
        if (session.state is not SaslState.COMPLETE or session.expires_at is not None) \
                and session.admit(api_key) is not None:
            raise ConnectionClosed("authentication")  # the session logged why
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
            services=self.services,
            request=request,
            session=session,
            release=_releaser(released) if released is not None and api_key == PRODUCE_KEY else None,
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
        throttle_ms = self._record_quotas(api_key, request, header.client_id, started, len(payload),
                                          request_state.remote.seconds)
        if after is not None:  # answer after the request before (pipelined produces)
            await after
        if response is None:  # acks=0 produce: no response
            if self._metrics is not None:
                self._record(handler.name, api_key, api_version, request, None, started, started,
                             len(payload) - header.header_size, request_state)
            self._mute(throttle_ms)
            return
        def encode(response: Any) -> messages.FrameBuffer:
            out = messages.FrameBuffer()
            # ApiVersions responses always use header v0 (KIP-511).
            out.write(frames.response_header(correlation_id, flexible and api_key != frames.API_VERSIONS_KEY))
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
            return out

        out = encode(response)
        if api_key == FETCH_KEY and throttle_ms >= 0 and self.services.quotas.active:
            fetch_throttle_ms = self.services.quotas.fetch(session.principal.name, header.client_id or "", out.size, _now_ms())
            if fetch_throttle_ms:  # a throttled fetch answers no data (KIP-219, getThrottledResponse)
                response = messages.replace(response, responses=())
                throttle_ms = max(throttle_ms, fetch_throttle_ms)
        if throttle_ms > 0 and hasattr(response, "throttle_time"):  # (FindCoordinator v0 has none)
            response = messages.replace(
                response, throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=throttle_ms))
            )
            out = encode(response)
        chunks = out.finish()
        sending = time.monotonic()
        await self._write([frames.size_prefix(out.size), *chunks])
        if self._metrics is not None:
            self._record(handler.name, api_key, api_version, request, response, started, sending,
                         len(payload) - header.header_size, request_state)
        if session.failed:
            raise ConnectionClosed("authentication_failed")
        if api_key == frames.API_VERSIONS_KEY and response.error_code == ErrorCode.none:
            session.versions_answered()
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
        self._mute(throttle_ms)

    def _record_quotas(self, api_key: int, request: Any, client_id: str | None, started: float, size: int,
                       remote_s: float) -> int:
        """Record the request against its client's quotas (broker/quotas.py): the throttle time in
        ms; -1 for a request no quota applies to (ApiVersions, a follower's fetch)."""
        quotas = self.services.quotas
        if (
            not quotas.active
            or api_key == frames.API_VERSIONS_KEY
            or (api_key == FETCH_KEY and getattr(request, "replica_id", -1) >= 0)
        ):
            return -1
        now_ms = _now_ms()
        user = self.session.principal.name
        throttle_ms = quotas.request(user, client_id or "", time.monotonic() - started - remote_s, now_ms)
        if api_key == PRODUCE_KEY:
            throttle_ms = max(throttle_ms, quotas.produce(user, client_id or "", size, now_ms))
        return throttle_ms

    def _mute(self, throttle_ms: int) -> None:
        """Read nothing from the client for the throttle time (Kafka mutes the channel). Pipelined
        produces answered one after another each extend the one deadline, they do not add up."""
        if throttle_ms <= 0 or self.transport is None:
            return
        now = time.monotonic()
        muted, self._muted_until = self._muted_until > now, max(self._muted_until, now + throttle_ms / 1000)
        self.transport.pause_reading()
        if not muted:  # (else the timer running reschedules itself to the new deadline)
            asyncio.get_running_loop().call_later(throttle_ms / 1000, self._unmute)

    def _unmute(self) -> None:
        left = self._muted_until - time.monotonic()
        if left > 0:  # (a timer may fire a hair early, or a later throttle moved the deadline)
            asyncio.get_running_loop().call_later(left, self._unmute)
        else:
            self._update_reading()

    async def _throttled(self) -> None:
        """Wait out the connection's throttle before the next request is taken."""
        while (left := self._muted_until - time.monotonic()) > 0:
            await asyncio.sleep(left)

    def _record(
        self, handler_name: str, api_key: int, api_version: int, request: Any, response: Any,
        started: float, sending: float, request_bytes: int, request_state: _InFlight,
    ) -> None:
        """Kafka's RequestChannel.updateRequestMetrics for this request."""
        assert self._metrics is not None
        name = _REQUEST_NAMES.get(api_key)
        if name is None:
            name = _REQUEST_NAMES[api_key] = camel_case(handler_name)
        if api_key == 1:  # Fetch: also as FetchFollower or FetchConsumer
            state = getattr(request, "replica_state", None)  # v15+ carry the replica id there
            replica_id = state.replica_id if state is not None else getattr(request, "replica_id", -1)
            names: tuple[str, ...] = ("FetchFollower" if replica_id >= 0 else "FetchConsumer", name)
        else:
            names = (name,)
        self._metrics.record(
            names, api_version, response, received=request_state.received_at, started=started,
            sending=sending, done=time.monotonic(), remote_s=request_state.remote.seconds,
            request_bytes=request_bytes,
        )

    async def _drain(self) -> None:
        if self._state is ReadState.CLOSED:
            raise ConnectionResetError("connection lost")
        if self._write_paused:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter

    async def _write(self, chunks: list[Any]) -> None:
        """Write a response: consecutive bytes chunks (size prefix, header, body up to the next
        file region) go to the transport as one write, so a response without regions costs one
        send syscall, not one per chunk; each region goes out with sendfile."""
        transport = self.transport
        assert transport is not None
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
            await self._drain()
            sent = self._sendfile_now(chunk)
            if sent < len(chunk):
                await loop.sendfile(transport, chunk.file, chunk.position + sent, len(chunk) - sent)
        self._write_bytes(pending)
        await self._drain()

    def _sendfile_now(self, region: Any) -> int:
        """Send what the socket takes of a file region at once, with os.sendfile; the bytes sent.

        asyncio's loop.sendfile waits for the transport's buffer to empty and registers the socket
        with epoll (and unregisters it) for every call; when the transport holds nothing and the
        socket's buffer has room, which is the usual case, the region goes out in one syscall from
        here and loop.sendfile only sends what the socket did not take."""
        transport = self.transport
        if (transport is None or self._sock_fd < 0 or self._state is ReadState.CLOSED
                or transport.is_closing() or transport.get_write_buffer_size()):
            return 0  # (a closing transport's descriptor is not ours to write to)
        in_fd, offset, count = region.fileno(), region.position, len(region)
        sent = 0
        while sent < count:
            try:
                n = os.sendfile(self._sock_fd, in_fd, offset + sent, count - sent)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:  # the file ends before the region does: loop.sendfile says so
                break
            sent += n
        return sent

    def _write_bytes(self, pending: list[bytes | bytearray]) -> None:
        if not pending:
            return
        if self._state is ReadState.CLOSED:
            raise ConnectionResetError("connection lost")
        transport = self.transport
        assert transport is not None
        if len(pending) == 1:
            transport.write(pending[0])
        elif sum(len(c) for c in pending) <= _COALESCE_MAX:
            transport.write(b"".join(pending))
        else:  # large chunks: joining would copy them; the transport buffers them as they are
            for c in pending:
                transport.write(c)
        pending.clear()
