"""The network layer: one asyncio event loop doing the seed's acceptor + processor job.

Why an event loop and not acceptor/processor threads: with the GIL, a processor thread per
core buys no parallel Python work, and every hand-off between threads costs a lock and a
wake-up. One loop keeps each request on one thread from socket to log (bench/broker_*.py).

Framing: every request is a 4-byte big-endian size and a body. The size is checked against
`socket.request.max.bytes` before any of the body is read; a bad size closes the connection.
Small frames are parsed out of one reusable receive buffer; a frame larger than that buffer
is read straight into its own bytearray (no second copy). Frames are writable bytearrays,
so the log can stamp offsets into produced batches in place.

Ordering: requests of one connection are handled strictly one after another (as Kafka does by
muting a channel while a request is in flight). A handler answers at once (the fast path:
no task, no queue) or returns an awaitable (long-poll fetch, a sendfile that could not finish
at once); frames that arrive meanwhile wait in the connection's backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

RECV_BUFFER_SIZE = 256 * 1024
# Pending-frame bytes per connection before we stop reading from its socket.
MAX_BACKLOG_BYTES = 16 * 1024 * 1024
# Regions up to this size are copied with pread (cheaper than a sendfile round trip).
SMALL_REGION_BYTES = 16 * 1024

_SIZE = struct.Struct(">i")


class CloseConnection(Exception):
    """Raised by a request handler: log `reason` once and close this connection."""


class FileRegionLike(Protocol):
    fd: int
    position: int
    length: int


ResponseParts = Sequence[Any]  # bytes-like parts and FileRegion parts, size prefix included
HandlerResult = ResponseParts | None | Awaitable[ResponseParts | None]


@dataclass
class ConnectionInfo:
    peer: str
    connection_id: int


class RequestHandler(Protocol):
    def handle(self, conn: ConnectionInfo, frame: bytearray) -> HandlerResult: ...


class _RegionFile:
    """The minimal file object loop.sendfile() needs around a raw descriptor."""

    mode = "rb"

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, server: SocketServer, connection_id: int) -> None:
        self.server = server
        self.loop = server.loop
        self.info = ConnectionInfo("?", connection_id)
        self.transport: asyncio.Transport | None = None
        self._sock_fd = -1
        self._buf = bytearray(RECV_BUFFER_SIZE)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._backlog: deque[bytearray] = deque()
        self._backlog_bytes = 0
        self._busy = False
        self._write_paused = False
        self._read_paused = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self.last_active = self.loop.time()

    # ---- asyncio callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.info.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._sock_fd = sock.fileno()
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self)
        log.debug("connection %d from %s", self.info.connection_id, self.info.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.server.connections.discard(self)
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._backlog.clear()
        log.debug("connection %d from %s closed", self.info.connection_id, self.info.peer)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        if self._end == len(self._buf):
            self._compact()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = self.loop.time()
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled < len(self._big):
                return
            self._enqueue(self._big)
            self._big = None
        else:
            self._end += nbytes
            self._split_frames()
        self._drain()

    def eof_received(self) -> bool:
        # A half-closed client: answer what is already queued, then close.
        if not self._busy and not self._backlog:
            return False
        self._close_after_drain = True
        return True

    _close_after_drain = False

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._drain()

    # ---- framing ------------------------------------------------------------------------
    def _compact(self) -> None:
        n = self._end - self._start
        if self._start:
            self._buf[:n] = self._buf[self._start:self._end]
        self._start, self._end = 0, n

    def _split_frames(self) -> None:
        buf, start, end = self._buf, self._start, self._end
        max_size = self.server.max_request_size
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > max_size:
                self._start = self._end = 0
                self.close(f"request size {size} is outside 0..{max_size} "
                           "(socket.request.max.bytes); closing the connection")
                return
            if end - start - 4 >= size:
                self._enqueue(bytearray(self._view[start + 4:start + 4 + size]))
                start += 4 + size
                continue
            if size + 4 > len(buf):
                # A big frame: read the rest straight into its own buffer.
                big = bytearray(size)
                have = end - start - 4
                big[:have] = self._view[start + 4:end]
                self._big, self._big_filled = big, have
                start = end = 0
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def _enqueue(self, frame: bytearray) -> None:
        self._backlog.append(frame)
        self._backlog_bytes += len(frame)
        if self._backlog_bytes > MAX_BACKLOG_BYTES and not self._read_paused:
            self._read_paused = True
            if self.transport is not None:
                self.transport.pause_reading()

    # ---- request processing ---------------------------------------------------------------
    def _drain(self) -> None:
        handler = self.server.handler
        while self._backlog and not self._busy and not self._write_paused and not self._closed:
            frame = self._backlog.popleft()
            self._backlog_bytes -= len(frame)
            try:
                result = handler.handle(self.info, frame)
            except CloseConnection as e:
                self.close(str(e))
                return
            except Exception:
                log.exception("unexpected error handling a request from %s; closing it",
                              self.info.peer)
                self.close(None)
                return
            if result is None:
                continue
            if isinstance(result, Sequence):
                pending = self._write_parts(result)
                if pending is None:
                    continue
                self._run_async(pending)
            else:
                self._run_async(self._await_and_write(result))
        if self._read_paused and self._backlog_bytes <= MAX_BACKLOG_BYTES // 2:
            self._read_paused = False
            if self.transport is not None and not self._closed:
                self.transport.resume_reading()
        if self._close_after_drain and not self._busy and not self._backlog:
            self.close(None)

    def _run_async(self, coro: Awaitable[None]) -> None:
        self._busy = True
        self.server.in_flight += 1
        self._task = self.loop.create_task(self._finish(coro))  # type: ignore[arg-type]

    async def _finish(self, coro: Awaitable[None]) -> None:
        try:
            await coro
        except CloseConnection as e:
            self.close(str(e))
        except (asyncio.CancelledError, ConnectionError, OSError):
            self.close(None)
        except Exception:
            log.exception("unexpected error answering %s; closing the connection",
                          self.info.peer)
            self.close(None)
        finally:
            self._busy = False
            self.server.in_flight -= 1
            self.server.notify_idle()
        if not self._closed:
            self._drain()

    async def _await_and_write(self, awaitable: Awaitable[ResponseParts | None]) -> None:
        parts = await awaitable
        if parts is None or self._closed:
            return
        pending = self._write_parts(parts)
        if pending is not None:
            await pending

    def _write_parts(self, parts: ResponseParts) -> Awaitable[None] | None:
        """Write a response. Returns an awaitable only if a sendfile must wait for the socket."""
        transport = self.transport
        if transport is None or self._closed:
            return None
        chunks: list[Any] = []
        for i, part in enumerate(parts):
            if isinstance(part, bytes | bytearray | memoryview):
                chunks.append(part)
                continue
            length = part.length
            if length <= 0:
                continue
            if length <= SMALL_REGION_BYTES:
                chunks.append(os.pread(part.fd, length, part.position))
                continue
            if chunks:
                transport.write(b"".join(chunks))
                chunks = []
            sent = 0
            if transport.get_write_buffer_size() == 0 and self._sock_fd >= 0:
                sent = self._try_sendfile(part.fd, part.position, length)
            if sent < length:
                return self._write_rest_async(part.fd, part.position + sent, length - sent,
                                              parts[i + 1:])
        if chunks:
            transport.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        self.last_active = self.loop.time()
        return None

    def _try_sendfile(self, fd: int, position: int, length: int) -> int:
        sent = 0
        while sent < length:
            try:
                n = os.sendfile(self._sock_fd, fd, position + sent, length - sent)
            except (BlockingIOError, InterruptedError):
                break
            if n == 0:  # the file is shorter than the region (truncated under us)
                raise CloseConnection("log segment shrank while being sent; closing")
            sent += n
        return sent

    async def _write_rest_async(self, fd: int, position: int, length: int,
                                rest: ResponseParts) -> None:
        transport = self.transport
        if transport is None or self._closed:
            return
        sent = await self.loop.sendfile(transport, _RegionFile(fd), position, length)  # type: ignore[arg-type]
        if sent < length:
            raise CloseConnection("log segment shrank while being sent; closing")
        if rest:
            pending = self._write_parts(rest)
            if pending is not None:
                await pending

    def close(self, reason: str | None) -> None:
        if reason:
            log.warning("%s: %s", self.info.peer, reason)
        if not self._closed and self.transport is not None:
            self._closed = True
            self._backlog.clear()
            self.transport.close()

    @property
    def busy(self) -> bool:
        return self._busy


class SocketServer:
    """Listens on the configured endpoints and owns every open connection."""

    def __init__(self, handler: RequestHandler, *, max_request_size: int,
                 idle_timeout_ms: int) -> None:
        self.handler = handler
        self.max_request_size = max_request_size
        self.idle_timeout = idle_timeout_ms / 1000.0
        self.loop = asyncio.get_running_loop()
        self.connections: set[KafkaConnection] = set()
        self.in_flight = 0
        self._servers: list[asyncio.Server] = []
        self._next_id = 0
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._reaper: asyncio.Task[None] | None = None

    def _factory(self) -> KafkaConnection:
        self._next_id += 1
        return KafkaConnection(self, self._next_id)

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Errors asyncio reports from inside its own callbacks (e.g. accept() failing on a
        connection the peer already reset): one line, no traceback; the loop carries on."""
        exc = context.get("exception")
        log.warning("event loop: %s%s", context.get("message", "error"),
                    f": {exc.__class__.__name__}: {exc}" if exc is not None else "")

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self.loop.set_exception_handler(self._loop_exception)
        server = await self.loop.create_server(
            self._factory, host or None, port, reuse_address=True, backlog=1024)
        self._servers.append(server)
        if self._reaper is None:
            self._reaper = self.loop.create_task(self._reap_idle())
        sockname = server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def _reap_idle(self) -> None:
        interval = max(0.05, min(self.idle_timeout / 4, 10.0))
        while True:
            await asyncio.sleep(interval)
            deadline = self.loop.time() - self.idle_timeout
            for conn in list(self.connections):
                if conn.last_active < deadline and not conn.busy:
                    log.info("closing idle connection from %s (connections.max.idle.ms)",
                             conn.info.peer)
                    conn.close(None)

    def notify_idle(self) -> None:
        if self.in_flight == 0:
            for fut in self._idle_waiters:
                if not fut.done():
                    fut.set_result(None)
            self._idle_waiters.clear()

    def stop_accepting(self) -> None:
        for server in self._servers:
            server.close()

    async def drain(self, timeout: float) -> None:
        """Wait (bounded) until no request is in flight."""
        if self.in_flight:
            fut: asyncio.Future[None] = self.loop.create_future()
            self._idle_waiters.append(fut)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(fut, timeout)

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        for conn in list(self.connections):
            conn.close(None)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)


Callback = Callable[[], None]
