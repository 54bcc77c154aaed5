"""The network layer: one asyncio event loop doing the seed's acceptor + processor job.

Why an event loop and not acceptor/processor threads: with the GIL, a processor thread per
core buys no parallel Python work, and every hand-off between threads costs a lock and a
wake-up. One loop keeps each request on one thread from socket to log (bench/broker_*.py).

Framing: every request is a 4-byte big-endian size and a body. A size outside
0..`socket.request.max.bytes` is logged and closes the connection. Memory follows the bytes
that actually arrive, never the size a peer announces:
- every socket is read into one receive buffer the server owns (the loop reads one socket at
  a time), so an idle connection holds no buffer at all;
- complete frames are copied out into their own bytearray;
- an incomplete frame whose size is known gets its own bytearray, sized for the bytes that
  are already in the socket (FIONREAD) and grown as more arrive (at least doubling or 64 KiB
  a step, never past the announced size); its bytes are read straight into it. Fewer than
  4 bytes (a size not yet known) are kept per connection as they are.
Frames are writable bytearrays, so the log can stamp offsets into produced batches in place.

Memory of all in-flight requests together is capped by `queued.max.request.bytes`
(kafkactl.broker.memory_pool): over it, reading pauses on every socket but the one whose
request is oldest.

Accepting: each listener has an `Acceptor` (Kafka's acceptor thread) reading its listening
sockets. A new connection that takes its listener's or the broker's
max.connection.creation.rate over the bound waits, accepted but unread (no request served),
for the throttle time; one that finds its listener or the broker at max.connections waits
the same way until a connection closes or the limit is raised; meanwhile its listener
accepts nothing more, and the connections that come after it wait in the listen backlog
(Kafka's blocked acceptor). Other listeners, and the connections already open, are not
slowed: it is a timer or a callback, not a wait. The limits:
kafkactl.broker.connection_quotas.

Deadlines: a request not all in `socket.request.read.timeout.ms` after its first byte (not
counting time its own backlog held it back), or `connections.max.idle.ms` without traffic,
closes the connection.

Ordering: requests of one connection are handled one after another (as Kafka does by muting
a channel while a request is in flight), and answered in the order they came. A handler
answers at once (the fast path: no task, no queue) or returns an awaitable (long-poll fetch,
an acks=all produce waiting for its followers, a sendfile that could not finish at once);
frames that arrive meanwhile wait in the connection's backlog. One exception, where the wait
is all that is left of a request: behind Produce requests whose records are appended and
only wait for the high watermark (the handler says so with `produce_appended`), the next
Produce of the connection is handled at once (appended in arrival order) and its answer
queued behind theirs. A producer with several requests in flight (idempotent producers keep
5) then has them all replicated in one follower fetch instead of one replication round trip
after another; what ends in the log, and the order of the answers, are what strict turns give.

Listeners: each endpoint may carry a TLS context and a ConnectionSetup (the security
package's: the TLS principal, the SASL authenticator). A connection whose ConnectionInfo
has `max_receive` set (before SASL authentication) refuses larger frames, and one marked
`close_after_response` closes once its answer is written; after a failed authentication
(`failed_authentication`) the answer and the close wait `connection.failed.authentication.
delay.ms` on a timer, the connection muted meanwhile, as Kafka delays them. A TLS
handshake that fails (a client certificate refused) sends the client its TLS alert before
the connection closes (kafkactl.broker.tls_handshake), as Kafka flushes it.

Logging: the reason a bad connection is closed is a WARNING line, aggregated per peer
address (kafkactl.broker.peer_log): the first of each kind in full, then one line a minute
with a count, so a fuzzer or a flood of bad clients cannot flood the log.
Responses (bytes and file regions; sendfile, or pread on TLS): kafkactl.broker.transfer.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import socket
import ssl
import struct
import termios
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from kafkactl.broker import transfer
from kafkactl.broker.connection_quotas import ConnectionQuotas
from kafkactl.broker.memory_pool import RequestMemoryPool
from kafkactl.broker.peer_log import PeerLogLimiter
from kafkactl.broker.security.principal import ANONYMOUS, KafkaPrincipal
from kafkactl.broker.tls_handshake import start_tls_server
from kafkactl.broker.transfer import ResponseParts

log = logging.getLogger(__name__)

# The server's one receive buffer (all connections read into it, one at a time).
RECV_BUFFER_SIZE = 256 * 1024
# A larger frame's own buffer grows by at least this much (and at least doubles) per step.
MIN_FRAME_GROWTH = 64 * 1024
# Pending-frame bytes per connection before we stop reading from its socket.
MAX_BACKLOG_BYTES = 16 * 1024 * 1024
# Listening sockets: their listen backlog (where connections wait while their listener's
# Acceptor is held back), and connections accepted per wake-up at most (asyncio's own
# accept loop takes as many as its backlog).
LISTEN_BACKLOG = 1024
ACCEPT_BATCH = LISTEN_BACKLOG
ACCEPT_RETRY_S = 1.0  # accept() failed (EMFILE, ...): accepting again this much later

_SIZE = struct.Struct(">i")
_INT = struct.Struct("i")
_INT_ZERO = bytes(_INT.size)
_ZEROS = memoryview(bytes(1024 * 1024))


class CloseConnection(Exception):
    """Raised by a request handler: log `reason` once and close this connection."""


HandlerResult = ResponseParts | None | Awaitable[ResponseParts | None]
_PRODUCE_KEY = b"\x00\x00"  # a request frame's first two bytes: its API key, Produce's


@dataclass
class ConnectionInfo:
    peer: str
    connection_id: int
    listener: str = "PLAINTEXT"
    client_host: str = ""  # the peer's address, as ACLs name hosts
    principal: KafkaPrincipal = ANONYMOUS
    authenticator: Any = None  # a SaslServerAuthenticator on SASL listeners
    max_receive: int = 0  # frame size limit while authenticating (0: the server's)
    close_after_response: bool = False
    # set with close_after_response by a failed authentication: the answer and the close
    # wait connection.failed.authentication.delay.ms
    failed_authentication: bool = False
    received_at: float = 0.0  # loop time the request being handled arrived (its queue time)
    # a client quota's throttle for the response being sent: once it is written the
    # connection is muted that long (nothing read, nothing handled; KIP-219)
    throttle_ms: int = 0
    # set by the Produce handler when the awaitable it returns only waits for the high
    # watermark (its records are appended): the connection's next Produce may be handled
    # before that answer is written (see Ordering above); read and cleared per request
    produce_appended: bool = False


# Called when a connection is made (after the TLS handshake): sets up its security;
# returns a reason to refuse it, or None.
ConnectionSetup = Callable[[ConnectionInfo, asyncio.Transport], "str | None"]


class RequestHandler(Protocol):
    def handle(self, conn: ConnectionInfo, frame: bytearray) -> HandlerResult: ...


def _same(conn: KafkaConnection) -> KafkaConnection:
    return conn  # connect_accepted_socket's protocol factory


class KafkaConnection(asyncio.BufferedProtocol):
    __slots__ = (
        "server", "loop", "info", "transport", "ip", "last_active", "_sock_fd", "_counted",
        "_partial", "_big", "_big_filled", "_big_size", "frame_started", "_held",
        "_charged",
        "_backlog", "_backlog_bytes", "_backlog_full", "_full_since", "_reading_paused", "_pending",
        "_write_paused", "_closed", "_close_after_drain", "_task", "_zero_copy", "_setup",
        "_delayed_close", "_arrivals", "_muted", "_pipelining", "_queued", "_tls",
        "_quota_bound", "_raw", "_evicted")

    def __init__(self, server: SocketServer, connection_id: int, listener: str = "PLAINTEXT",
                 zero_copy: bool = True, setup: ConnectionSetup | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.server = server
        self._tls = tls  # the TLS handshake to make first (then None)
        self.loop = server.loop
        self.info = ConnectionInfo("?", connection_id, listener)
        self._zero_copy = zero_copy  # False on TLS: file regions are copied, not sendfile'd
        self._setup = setup
        self.transport: asyncio.Transport | None = None
        self.ip = "?"
        self._sock_fd = -1
        # counted in the server's connection limits (its acceptor admitted it), until
        # release_slot
        self._counted = False
        self._raw: asyncio.Transport | None = None  # the transport under TLS, until made
        self._evicted = False  # closed at once, over max.connections (evict)
        # An incomplete frame: `_partial` (under 4 bytes: its size is not known yet) or
        # `_big` (its body so far; `_big_filled` of `_big_size` bytes read). `_held` is what
        # they hold against queued.max.request.bytes.
        self._partial: bytearray | None = None
        self._big: bytearray | None = None
        self._big_filled = 0
        self._big_size = 0
        self.frame_started = 0.0
        self._held = 0
        self._charged = 0  # what the server counts for us: _held + _backlog_bytes, settled
        # once per read (_settle), not per frame
        self._backlog: deque[bytearray] = deque()
        self._arrivals: deque[float] = deque()  # each backlog frame's arrival (loop time)
        self._backlog_bytes = 0
        self._backlog_full = False
        self._full_since = 0.0
        self._reading_paused = False
        self._pending = 0  # answers not yet written: `_task`'s, then `_queued`'s
        # every pending answer is an appended Produce's (so another Produce may go ahead)
        self._pipelining = False
        # pipelined Produces' answers, in request order, behind `_task`'s: each the answer
        # or the future of it; written as soon as everything before it is
        self._queued: deque[ResponseParts | None | asyncio.Future[ResponseParts | None]] = \
            deque()
        self._write_paused = False
        self._closed = False
        self._close_after_drain = False
        self._task: asyncio.Task[None] | None = None
        # a failed authentication's answer waiting out connection.failed.authentication.delay.ms
        self._delayed_close: asyncio.TimerHandle | None = None
        self._muted: asyncio.TimerHandle | None = None  # a quota's throttle (KIP-219)
        # throttled once: no more Produces handled ahead of answers (see _drain)
        self._quota_bound = False
        self.last_active = self.loop.time()

    # ---- asyncio callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """The connection is accepted and counted in the connection limits (its listener's
        Acceptor let it in): its TLS handshake, or its security setup."""
        if self._tls is not None:  # nothing is read until the handshake has been made
            self._raw = cast(asyncio.Transport, transport)
            self._raw.pause_reading()
            if self._closed:  # evicted before the loop made it
                self._raw.abort()
                return
            self.server.handshake(self, self._raw, self._tls)
            self._tls = None
            return
        self._raw = None
        # asyncio's own transports are asyncio.Transport; uvloop's have its methods only
        self.transport = cast(asyncio.Transport, transport)
        if self.ip == "?":  # (the acceptor names it from accept())
            peer = transport.get_extra_info("peername")
            if peer:
                self.ip = str(peer[0])
                self.info.peer = f"{peer[0]}:{peer[1]}"
                self.info.client_host = self.ip
        server = self.server
        if self._closed:  # evicted (kafkactl.broker.connection_quotas) before it was made
            self.release_slot()
            self.transport.abort()
            return
        if self._setup is not None:
            reason = self._setup(self.info, cast(asyncio.Transport, transport))
            if reason is not None:
                self.release_slot()
                self._closed = True
                transport.close()
                server.bad_connection_log.event(
                    self.ip, f"{self.info.peer}: {reason}; closing the connection",
                    logging.INFO)
                return
        server.connections.add(self)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._sock_fd = sock.fileno()
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if server.pool.paused:
            self.update_reading()
        log.debug("connection %d from %s", self.info.connection_id, self.info.peer)
        if self._backlog:  # requests that came with the end of the TLS handshake
            self._drain()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._drop_queued()
        self._release_memory()
        self.release_slot()
        log.debug("connection %d from %s closed", self.info.connection_id, self.info.peer)

    def count_in(self) -> None:
        """Counted in the connection limits by its acceptor (SocketServer.let_in)."""
        self._counted = True
        self.server.counted.add(self)

    @property
    def has_transport(self) -> bool:
        """Has the event loop made this connection (its transport, or the one under its
        TLS handshake)?"""
        return self.transport is not None or self._raw is not None

    @property
    def closing_forced(self) -> bool:
        """Closed by evict (its transport aborted): gone on the loop's next turns."""
        return self._evicted

    def release_slot(self) -> None:
        """Count this connection out of the connection limits (once): its listener's
        acceptor, or another, may accept again."""
        if self._counted:
            self._counted = False
            server = self.server
            server.connections.discard(self)
            server.counted.discard(self)
            server.quotas.release(self.ip, self.info.listener)

    def evict(self) -> None:
        """Close this connection at once, unanswered requests and unsent answers dropped
        (Kafka's Processor closing a connection over max.connections); its slot is given
        back when its transport is gone (connection_lost)."""
        self._closed = self._evicted = True
        self._cancel_timers()
        transport = self.transport or self._raw
        if transport is not None:
            transport.abort()

    def get_buffer(self, sizehint: int) -> memoryview:
        big = self._big
        if big is not None:
            filled = self._big_filled
            if filled == len(big):
                step = max(filled, self._available(), MIN_FRAME_GROWTH)
                grow = min(self._big_size, filled + step) - filled
                while grow > 0:  # zeros from a shared block: no temporary allocation
                    n = min(grow, len(_ZEROS))
                    big += _ZEROS[:n]
                    grow -= n
                    self._held += n
                self._settle()
            return memoryview(big)[filled:]
        partial = self._partial
        if partial is None:
            return self.server.recv_view
        n = len(partial)
        self.server.recv_buffer[:n] = partial
        return self.server.recv_view[n:]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = self.loop.time()
        big = self._big
        if big is not None:
            self._big_filled += nbytes
            if self._big_filled < self._big_size:
                return
            # Complete: its bytes move from "incomplete" to the backlog (same total).
            self._big = None
            self._held = 0
            self._enqueue(big)
            self.server.pool.frame_finished(self)
        else:
            partial = self._partial
            self._split_frames(nbytes if partial is None else len(partial) + nbytes)
        self._drain()

    def eof_received(self) -> bool:
        # A half-closed client: answer what is already queued, then close.
        if not self._pending and not self._backlog:
            return False
        self._close_after_drain = True
        return self._zero_copy  # asyncio's TLS transport cannot half-close: it closes

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._drain()

    # ---- framing ------------------------------------------------------------------------
    def _split_frames(self, end: int) -> None:
        """Split the complete frames out of the server's receive buffer [0:end]; keep the
        incomplete rest (as `_partial` if under 4 bytes, else as a growing `_big`)."""
        server = self.server
        buf, view = server.recv_buffer, server.recv_view
        max_size = self.info.max_receive or server.max_request_size
        start = size = 0
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > max_size:
                limit = "sasl.server.max.receive.size, before authentication" \
                    if self.info.max_receive else "socket.request.max.bytes"
                self.close(f"request size {size} is outside 0..{max_size} "
                           f"({limit}); closing the connection")
                return
            if end - start - 4 >= size:
                self._enqueue(bytearray(view[start + 4:start + 4 + size]))
                start += 4 + size
                continue
            break
        rest = end - start
        # The incomplete frame we had (if any) is finished unless it is still the first one.
        finished = self._partial is not None and (start > 0 or rest == 0)
        if rest == 0:
            self._partial = None
            self._held = 0
        else:
            if start or self._partial is None:
                self.frame_started = self.loop.time()
            if rest >= 4:
                # Its size is known: the frame gets its own buffer, with room for the bytes
                # here and those waiting in the socket (FIONREAD), at least MIN_FRAME_GROWTH,
                # never past its size; the rest is read straight into it.
                have = rest - 4
                need = size - have
                if need > MIN_FRAME_GROWTH:
                    need = min(need, max(self._available(), MIN_FRAME_GROWTH))
                big = bytearray(have + need)
                big[:have] = view[start + 4:end]
                self._partial = None
                self._big, self._big_filled, self._big_size = big, have, size
                self._held = len(big)
            else:
                self._partial = bytearray(view[start:end])
                self._held = rest
        if finished:
            server.pool.frame_finished(self)

    def _available(self) -> int:
        """Bytes waiting in this socket's receive queue (0 if unknown)."""
        try:
            return int(_INT.unpack(fcntl.ioctl(self._sock_fd, termios.FIONREAD, _INT_ZERO))[0])
        except (OSError, ValueError):
            return 0

    def _settle(self) -> None:
        """Bring the server's count of in-flight request bytes up to date for us."""
        owed = self._held + self._backlog_bytes
        if owed != self._charged:
            delta, self._charged = owed - self._charged, owed
            self.server.pool.account(delta)

    def _enqueue(self, frame: bytearray) -> None:
        self._backlog.append(frame)
        self._arrivals.append(self.last_active)
        self._backlog_bytes += len(frame)
        if self._backlog_bytes > MAX_BACKLOG_BYTES and not self._backlog_full:
            self._backlog_full = True
            self._full_since = self.loop.time()
            self.update_reading()

    def _release_memory(self) -> None:
        """Give back what this connection holds against queued.max.request.bytes."""
        self._backlog.clear()
        self._arrivals.clear()
        self._partial = self._big = None
        self._held = self._backlog_bytes = 0
        self._settle()
        self.server.pool.frame_finished(self)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def backlog_full(self) -> bool:
        """Reading is paused until this connection's own queued requests are answered."""
        return self._backlog_full

    @property
    def reading_frame(self) -> bool:
        """True while a request has started to arrive but is not complete."""
        return self._partial is not None or self._big is not None

    def frame_progress(self) -> str:
        if self._big is not None:
            return f"{self._big_filled} of {self._big_size} bytes"
        return f"{len(self._partial or b'')} bytes"

    def update_reading(self) -> None:
        """Pause or resume reading from the socket: paused while this connection's backlog
        is full, or while the server is over queued.max.request.bytes (unless this is the
        connection allowed to finish its request)."""
        server = self.server
        paused = self._backlog_full or self._delayed_close is not None or \
            self._muted is not None or (server.pool.paused and server.pool.exempt is not self)
        if paused != self._reading_paused and not self._closed and self.transport is not None:
            self._reading_paused = paused
            if paused:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    # ---- request processing ---------------------------------------------------------------
    def _drain(self) -> None:
        handler = self.server.handler
        info = self.info
        backlog = self._backlog
        if self.transport is None:  # TLS: data behind the handshake, before connection_made
            return
        while backlog and not self._write_paused and not self._closed and self._muted is None:
            if self._pending and (self._quota_bound or not (
                    self._pipelining and backlog[0][:2] == _PRODUCE_KEY)):
                # a client held to a quota gets no pipelining: the Produces it queued while
                # muted would all be appended at once, before any answer's throttle is known
                # (Kafka handles one request of a connection at a time)
                break
            frame = backlog.popleft()
            info.received_at = self._arrivals.popleft()
            self._backlog_bytes -= len(frame)
            try:
                result = handler.handle(info, frame)
            except CloseConnection as e:
                self.close(str(e))
                return
            except Exception:
                log.exception("unexpected error handling a request from %s; closing it",
                              info.peer)
                self.close(None)
                return
            appended = info.produce_appended
            info.produce_appended = False
            if result is None:
                # no response (an acks=0 Produce): a quota's throttle mutes the connection
                # all the same, as Kafka does ("the channel may be throttled due to
                # bandwidth quota violation")
                if info.throttle_ms > 0:
                    self._mute_if_throttled()
            elif not self._answer(result, appended):
                return
        if self._backlog_full and self._backlog_bytes <= MAX_BACKLOG_BYTES // 2:
            # The read deadline does not run while we hold the client back.
            self.frame_started += self.loop.time() - self._full_since
            self._backlog_full = False
            self.update_reading()
        if self._close_after_drain and not self._pending and not self._backlog:
            self.close(None)
        if self._held + self._backlog_bytes != self._charged:
            self._settle()

    def _answer(self, result: ResponseParts | Awaitable[ResponseParts | None],
                appended: bool) -> bool:
        """Write one request's answer now, or start what will; False when the connection
        stops here (closed, or muted for a failed authentication)."""
        info = self.info
        parts = result.__class__ is list or isinstance(result, Sequence)
        if self._pending:  # a Produce behind appended ones: answered after them
            if parts:
                self._queued.append(cast(ResponseParts, result))
            else:
                self._queued.append(asyncio.ensure_future(
                    cast(Awaitable[ResponseParts | None], result)))
                self._pipelining = appended
            self._pending += 1
            self.server.in_flight += 1
            return True
        if not parts:
            self._run_async(self._await_and_write(cast(Awaitable[ResponseParts | None], result)))
            self._pipelining = appended
            return True
        if info.failed_authentication and self.server.failed_auth_delay > 0:
            self._delay_failed_authentication(cast(ResponseParts, result))
            return False
        pending = self._write_parts(cast(ResponseParts, result))
        if info.close_after_response:
            self.close(None)
            return False
        if pending is None:
            if info.throttle_ms > 0:
                self._mute_if_throttled()
            return True
        self._run_async(pending)
        return True

    def _delay_failed_authentication(self, parts: ResponseParts) -> None:
        """Kafka's connection.failed.authentication.delay.ms: the failed authentication's
        answer is written, and the connection closed, only after the delay. Meanwhile the
        connection is muted (nothing read, nothing handled); the event loop goes on serving
        everyone else (a timer, not a wait)."""
        self._pending += 1
        self._delayed_close = self.loop.call_later(
            self.server.failed_auth_delay, self._failed_authentication_delay_over, parts)
        self.update_reading()

    def _failed_authentication_delay_over(self, parts: ResponseParts) -> None:
        self._delayed_close = None
        if self._closed:
            return
        try:
            pending = self._write_parts(parts)
        except CloseConnection as e:
            self.close(str(e))
            return
        if pending is None:
            self.close(None)
            return
        self._pending -= 1
        self._run_async(pending)  # closes once written: close_after_response is set

    def _run_async(self, coro: Awaitable[None]) -> None:
        self._pending += 1
        self.server.in_flight += 1
        self._task = self.loop.create_task(self._finish(coro))

    def _write_queued(self) -> None:
        """Write the pipelined answers that are ready, in order, up to the first that is
        not (its completion calls this again)."""
        queued = self._queued
        while queued and (self._task is None or self._task.done()) and not self._closed:
            head = queued[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    head.add_done_callback(self._queued_ready)
                    return
                if head.cancelled() or head.exception() is not None:
                    error = None if head.cancelled() else head.exception()
                    if error is not None and not isinstance(
                            error, (CloseConnection, ConnectionError, OSError)):
                        log.error("unexpected error answering %s; closing the connection",
                                  self.info.peer, exc_info=error)
                    self.close(str(error) if isinstance(error, CloseConnection) else None)
                    return
                parts = head.result()
            else:
                parts = head
            queued.popleft()
            self._pending -= 1
            self.server.in_flight -= 1
            if parts is not None:
                pending = self._write_parts(parts)
                if pending is not None:  # a file region that must wait for the socket
                    self._run_async(pending)
                    return
        if not self._pending:
            self._pipelining = False
            self.server.notify_idle()

    def _queued_ready(self, _future: asyncio.Future[Any]) -> None:
        if self._closed:
            return
        self._write_queued()
        if not self._closed:
            self._mute_if_throttled()
            self._drain()

    def _drop_queued(self) -> None:
        """The connection is gone: its pipelined answers will not be written."""
        while self._queued:
            head = self._queued.popleft()
            if isinstance(head, asyncio.Future):
                head.cancel()
            self._pending -= 1
            self.server.in_flight -= 1

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
            self._task = None  # done: the pipelined answers behind it may be written
            self._pending -= 1
            if not self._pending:
                self._pipelining = False
            self.server.in_flight -= 1
            self.server.notify_idle()
        if self.info.close_after_response:
            self.close(None)
        if not self._closed:
            self._write_queued()
        if not self._closed:
            self._mute_if_throttled()
            self._drain()

    def _mute_if_throttled(self) -> None:
        """After a throttled response is written: mute the connection for its throttle
        time (a timer: the event loop serves everyone else meanwhile)."""
        ms = self.info.throttle_ms
        if ms <= 0 or self._closed:
            return
        self.info.throttle_ms = 0
        self._quota_bound = True
        until = self.loop.time() + ms / 1000.0
        muted = self._muted
        if muted is not None:
            # already muted (pipelined answers of acks=all Produces complete one by one):
            # the later end holds; replacing the timer let the earlier one unmute early
            if muted.when() >= until:
                return
            muted.cancel()
        self._muted = self.loop.call_at(until, self._unmute)
        self.update_reading()

    def _unmute(self) -> None:
        self._muted = None
        if self._closed:
            return
        self.update_reading()
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
        if len(parts) == 1 and parts[0].__class__ is bytes:  # most responses: one bytes
            transport.write(parts[0])
        else:
            pending = transfer.write_parts(transport, parts, self._sock_fd, self._zero_copy)
            if pending is not None:
                i, sent = pending
                if sent == transfer.SHRANK:
                    raise CloseConnection(transfer.SHRANK_REASON)
                part = parts[i]
                return self._write_rest_async(part.fd, part.position + sent, part.length - sent,
                                              parts[i + 1:])
        self.last_active = self.loop.time()
        return None

    async def _write_rest_async(self, fd: int, position: int, length: int,
                                rest: ResponseParts) -> None:
        transport = self.transport
        if transport is None or self._closed:
            return
        sent = await transfer.send_region(self.loop, transport, self._sock_fd, fd, position,
                                          length, self.server.native_sendfile)
        if sent < length:
            raise CloseConnection(transfer.SHRANK_REASON)
        if rest:
            pending = self._write_parts(rest)
            if pending is not None:
                await pending

    def _cancel_timers(self) -> None:
        """Stop a pending delayed close and a quota's throttle: the connection is closing."""
        if self._delayed_close is not None:
            self._delayed_close.cancel()
            self._delayed_close = None
        if self._muted is not None:
            self._muted.cancel()
            self._muted = None

    def close(self, reason: str | None) -> None:
        if reason:
            # one line per peer and kind of reason per interval, then a count (peer_log)
            self.server.bad_connection_log.event(self.ip, f"{self.info.peer}: {reason}")
        self._cancel_timers()
        if not self._closed and self.transport is not None:
            self._closed = True
            self._release_memory()
            self.transport.close()

    @property
    def busy(self) -> bool:
        return self._pending > 0


class Acceptor:
    """One listener's acceptor (Kafka's Acceptor thread) on the event loop: it accepts from
    its listening sockets one connection after another and lets each in
    (`SocketServer.let_in`: counted in, or refused by a per-IP limit) once the connection
    creation rates are over their throttle time for it and its listener has a slot under
    max.connections (kafkactl.broker.connection_quotas). One that must wait is `held`,
    accepted but not read and not counted yet, and meanwhile the listener stops reading its
    listening sockets: the connections that come after it wait in the listen backlog,
    unaccepted, as a blocked Kafka acceptor leaves them. Other listeners, and the open
    connections, are not slowed. `retry` goes on when the throttle time is over (`timer`)
    or a slot may have freed (a connection closed, a limit changed)."""

    __slots__ = ("server", "listener", "setup", "tls", "sockets", "reading", "held", "timer",
                 "_error_timer")

    def __init__(self, server: SocketServer, listener: str, setup: ConnectionSetup | None,
                 tls: ssl.SSLContext | None, sockets: list[socket.socket]) -> None:
        self.server = server
        self.listener = listener
        self.setup = setup
        self.tls = tls
        self.sockets = sockets
        self.reading = False
        self.held: tuple[socket.socket, Any] | None = None  # (the socket, its address)
        self.timer: asyncio.TimerHandle | None = None  # the held one's throttle time
        self._error_timer: asyncio.TimerHandle | None = None  # accept() failed: retry later

    def _read(self, on: bool) -> None:
        """Read the listening sockets (accept), or stop."""
        if on == self.reading:
            return
        loop = self.server.loop
        for sock in self.sockets:
            if on:
                loop.add_reader(sock.fileno(), self._accept, sock)
            else:
                loop.remove_reader(sock.fileno())
        self.reading = on

    def start(self) -> None:
        self._read(True)

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            if self.held is not None or not self.reading:
                return
            try:
                sock, addr = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as e:  # EMFILE and the like: try again a little later
                log.warning("listener %s: accept() failed: %s; accepting again in %.0f s",
                            self.listener, e.strerror or e, ACCEPT_RETRY_S)
                self._read(False)
                self._error_timer = self.server.loop.call_later(ACCEPT_RETRY_S,
                                                                self._error_over)
                return
            self._arrived(sock, addr)

    def _error_over(self) -> None:
        self._error_timer = None
        if self.held is None and self.sockets:
            self._read(True)

    def _arrived(self, sock: socket.socket, addr: Any) -> None:
        """Kafka's ConnectionQuotas.inc up to the per-IP limits: count the new connection
        into the creation rates, then let it in, or hold it (and stop accepting) until its
        throttle time is over and there is a slot for it."""
        try:
            sock.setblocking(False)
        except OSError:
            sock.close()
            return
        quotas = self.server.quotas
        listener = self.listener
        ms = quotas.creation_throttle_ms(listener) if quotas.rates_on and \
            quotas.rated(listener) else 0
        if ms <= 0 and quotas.slot_available(listener):
            self.server.let_in(self, sock, addr)
            return
        self.held = (sock, addr)
        self._read(False)
        if ms > 0:
            self.timer = self.server.loop.call_later(ms / 1000.0, self._throttle_over)
            log.debug("listener %s: a new connection waits %d ms "
                      "(max.connection.creation.rate)", listener, ms)
        else:
            quotas.log_blocked(listener)

    def _throttle_over(self) -> None:
        self.timer = None
        self.retry()

    def retry(self) -> None:
        """Let the held connection in if its throttle time is over and there is a slot for
        it now, and accept again."""
        if self.held is None or self.timer is not None:
            return
        quotas = self.server.quotas
        if not quotas.slot_available(self.listener):
            quotas.log_blocked(self.listener)
            return
        sock, addr = self.held
        self.held = None
        if self._error_timer is None:
            self._read(True)
        self.server.let_in(self, sock, addr)

    def close(self) -> None:
        """Stop listening; a held connection is closed."""
        self._read(False)
        for sock in self.sockets:
            sock.close()
        self.sockets = []
        for timer in (self.timer, self._error_timer):
            if timer is not None:
                timer.cancel()
        self.timer = self._error_timer = None
        if self.held is not None:
            self.held[0].close()
            self.held = None


def _listening_sockets(infos: Sequence[tuple[Any, ...]], backlog: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for getaddrinfo's `infos`, as asyncio's
    create_server makes them (SO_REUSEADDR; an IPv6 one for IPv6 only)."""
    sockets: list[socket.socket] = []
    try:
        for af, kind, proto, _name, address in dict.fromkeys(infos):
            try:
                sock = socket.socket(af, kind, proto)
            except OSError:  # a family this host cannot make
                continue
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if af == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as err:
                raise OSError(err.errno, f"error while attempting to bind on address "
                              f"{address!r}: {(err.strerror or str(err)).lower()}") from None
            sock.listen(backlog)
            sock.setblocking(False)
        if not sockets:
            raise OSError("no address to listen on")
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class SocketServer:
    """Listens on the configured endpoints and owns every open connection, the shared
    receive buffer, the in-flight request memory and the connection limits."""

    def __init__(self, handler: RequestHandler, *, max_request_size: int,
                 idle_timeout_ms: int, read_timeout_ms: int = 30_000,
                 max_queued_bytes: int = -1, max_connections: int = -1,
                 max_connections_per_ip: int = -1,
                 per_ip_overrides: dict[str, int] | None = None,
                 failed_auth_delay_ms: int = 100) -> None:
        self.handler = handler
        self.max_request_size = max_request_size
        self.idle_timeout = idle_timeout_ms / 1000.0
        self.read_timeout_ms = read_timeout_ms
        self.read_timeout = read_timeout_ms / 1000.0
        self.failed_auth_delay = failed_auth_delay_ms / 1000.0
        # WARNING lines about bad connections: aggregated per peer address and minute
        self.bad_connection_log = PeerLogLimiter(log, logging.WARNING, "bad connections")
        # every such limiter: close() writes what they still count
        self.log_limiters: list[PeerLogLimiter] = [self.bad_connection_log]
        self.quotas = ConnectionQuotas(max_connections, max_connections_per_ip,
                                       per_ip_overrides)
        self.loop = asyncio.get_running_loop()
        # asyncio's loops have loop.sendfile(); uvloop's do not (AbstractEventLoop's raises)
        self.native_sendfile = (
            type(self.loop).sendfile is not asyncio.AbstractEventLoop.sendfile)
        self.recv_buffer = bytearray(RECV_BUFFER_SIZE)
        self.recv_view = memoryview(self.recv_buffer)
        self.connections: set[KafkaConnection] = set()
        self.pool = RequestMemoryPool(max_queued_bytes, self.connections)
        self.in_flight = 0
        self.acceptors: list[Acceptor] = []  # one per listener
        # connections counted in the connection limits: these and the ones not set up yet
        # (their TLS handshake, or the loop's turn to make them)
        self.counted: set[KafkaConnection] = set()
        self._connecting: set[asyncio.Task[Any]] = set()  # connect_accepted_socket's
        # refused by their address's connection_creation_rate, closed after its throttle
        self._throttled: dict[socket.socket, asyncio.TimerHandle] = {}
        self._wake_pending = False
        self.quotas.slot_freed = self._slot_freed
        self._next_id = 0
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._handshakes: set[asyncio.Task[None]] = set()
        # a TLS handshake that failed: (listener, peer host, peer, the error)
        self.tls_failed: Callable[[str, str, str, BaseException], None] | None = None
        self._reaper: asyncio.Task[None] | None = None

    # ---- accepting (Acceptor; kafkactl.broker.connection_quotas) ------------------------
    def let_in(self, acceptor: Acceptor, sock: socket.socket, addr: Any) -> None:
        """A connection its acceptor accepted, within the creation rates and with a slot
        under max.connections: refused by a per-IP limit (closed, or kept unread and closed
        after the throttle time of its address's connection_creation_rate, as Kafka's
        acceptor does), else counted in and handed to the event loop."""
        quotas = self.quotas
        listener = acceptor.listener
        ip = str(addr[0]) if addr else "?"
        peer = f"{addr[0]}:{addr[1]}" if addr else "?"
        refusal = quotas.admit(ip, listener)
        if refusal is not None:
            if refusal.close_after_ms:  # throttled: closed later, unread meanwhile
                self._throttled[sock] = self.loop.call_later(
                    refusal.close_after_ms / 1000, self._close_throttled, sock)
            else:
                sock.close()
            quotas.log_refusal(peer, refusal.reason)
            return
        self._next_id += 1
        conn = KafkaConnection(self, self._next_id, listener, acceptor.tls is None,
                               acceptor.setup, acceptor.tls)
        conn.ip = conn.info.client_host = ip
        conn.info.peer = peer
        conn.count_in()
        try:
            task = self.loop.create_task(
                self.loop.connect_accepted_socket(functools.partial(_same, conn), sock))
        except Exception:
            log.exception("unexpected error accepting a connection on %s; closing it",
                          listener)
            conn.release_slot()
            sock.close()
            return
        self._connecting.add(task)
        task.add_done_callback(functools.partial(self._connected, conn, sock))
        if listener == quotas.protected and quotas.excess():
            self._slot_freed()  # over max.connections: another listener's connection goes

    def _connected(self, conn: KafkaConnection, sock: socket.socket,
                   task: asyncio.Task[Any]) -> None:
        self._connecting.discard(task)
        if not task.cancelled() and task.exception() is None:
            return
        if not task.cancelled():
            log.debug("connection from %s not set up: %r", conn.info.peer, task.exception())
        if not conn.has_transport:  # (a transport, once made, closes the socket itself)
            with contextlib.suppress(OSError):
                sock.close()
        conn.release_slot()

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled.pop(sock, None)
        sock.close()

    def _slot_freed(self) -> None:
        """A connection was counted out or a limit changed (ConnectionQuotas.slot_freed,
        Kafka's counts.notifyAll): on the loop's next turn, connections over
        max.connections are closed and the waiting acceptors retry."""
        if not self._wake_pending and not self.loop.is_closed():
            self._wake_pending = True
            self.loop.call_soon(self._wake)

    def _wake(self) -> None:
        self._wake_pending = False
        if self.quotas.excess():
            self._close_excess()
        for acceptor in self.acceptors:
            if acceptor.held is not None:
                acceptor.retry()

    def _close_excess(self) -> None:
        """More connections than max.connections (an inter-broker one came in at the limit,
        or the limit was lowered): close one of the other listeners' (Kafka's
        Processor.closeExcessConnections, one a turn): one already closing first, else
        the least recently active. Its release wakes this again while still over."""
        protected = self.quotas.protected
        lru: KafkaConnection | None = None
        for conn in self.counted:
            if conn.info.listener == protected or not conn.has_transport:
                continue
            if conn.closed:
                if conn.closing_forced:
                    return  # on its way out: its release comes first
                lru = conn
                break
            if lru is None or conn.last_active < lru.last_active:
                lru = conn
        if lru is None:
            return
        log.info("closing the connection from %s on listener %s, the least recently active: "
                 "%d connections are open and max.connections is %d", lru.info.peer,
                 lru.info.listener, self.quotas.total, self.quotas.max_connections)
        lru.evict()

    def handshake(self, conn: KafkaConnection, raw: asyncio.Transport,
                  context: ssl.SSLContext) -> None:
        """Make a TLS connection's handshake (the server's own, not asyncio's create_server
        TLS, whose failures nobody hears of): a failure is a failed authentication, told
        to `tls_failed` (Kafka: "Failed authentication with /ip (SSL handshake failed)"),
        and the client gets the TLS alert saying why (kafkactl.broker.tls_handshake)."""
        task = self.loop.create_task(self._handshake(conn, raw, context))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, conn: KafkaConnection, raw: asyncio.Transport,
                         context: ssl.SSLContext) -> None:
        try:
            # (loop.start_tls, writing out the TLS alert of a failed handshake first)
            tls = await start_tls_server(self.loop, raw, conn, context, self.read_timeout)
        except (TimeoutError, OSError, EOFError) as e:
            raw.close()
            conn.release_slot()
            peer = raw.get_extra_info("peername")
            host, where = (str(peer[0]), f"{peer[0]}:{peer[1]}") if peer else ("?", "?")
            gone = isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)) or \
                not isinstance(e, ssl.SSLError)
            if gone or self.tls_failed is None:  # closed or timed out mid-handshake
                log.debug("TLS handshake with %s not made: %s: %s", where,
                          type(e).__name__, e)
            else:
                self.tls_failed(conn.info.listener, host, where, e)
            return
        if tls is not None and not conn.closed:  # (not gone right after the handshake)
            conn.connection_made(tls)
            return
        (tls or raw).abort()  # gone meanwhile, or evicted (_close_excess)
        conn.release_slot()

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Errors asyncio reports from inside its own callbacks (e.g. accept() failing on a
        connection the peer already reset): one line, the loop carries on. An exception a
        task raised that nobody retrieved is a bug somewhere: its task (which coroutine)
        and traceback are logged too, or it could not be traced."""
        exc = context.get("exception")
        task = context.get("task") or context.get("future")
        where = f" in {task.get_coro()!r}" if isinstance(task, asyncio.Task) else ""
        line = (f"{context.get('message', 'error')}{where}"
                + (f": {exc.__class__.__name__}: {exc}" if exc is not None else ""))
        if isinstance(exc, OSError) and not where:
            log.warning("event loop: %s", line)
        else:
            log.warning("event loop: %s", line, exc_info=exc if exc is not None else None)

    async def start(self, host: str, port: int, *, listener: str = "PLAINTEXT",
                    ssl_context: ssl.SSLContext | None = None,
                    setup: ConnectionSetup | None = None) -> tuple[str, int]:
        """Listen on host:port for `listener` (TLS when `ssl_context` is given): on every
        address of `host` (all of them when it is empty), as asyncio's create_server would,
        read by the listener's own Acceptor."""
        self.loop.set_exception_handler(self._loop_exception)
        infos = await self.loop.getaddrinfo(host or None, port, family=socket.AF_UNSPEC,
                                            type=socket.SOCK_STREAM,
                                            flags=socket.AI_PASSIVE)
        if not infos:
            raise OSError(f"getaddrinfo({host!r}) returned empty list")
        sockets = _listening_sockets(infos, LISTEN_BACKLOG)
        acceptor = Acceptor(self, listener, setup, ssl_context, sockets)
        self.acceptors.append(acceptor)
        acceptor.start()
        if self._reaper is None:
            self._reaper = self.loop.create_task(self._reap_idle())
        sockname = sockets[0].getsockname()
        return sockname[0], sockname[1]

    async def _reap_idle(self) -> None:
        """Close connections idle past connections.max.idle.ms and requests still arriving
        after socket.request.read.timeout.ms."""
        interval = max(0.05, min(self.idle_timeout / 4, self.read_timeout / 4, 10.0))
        while True:
            await asyncio.sleep(interval)
            now = self.loop.time()
            idle_deadline = now - self.idle_timeout
            read_deadline = now - self.read_timeout
            for conn in list(self.connections):
                if conn.reading_frame and conn.frame_started < read_deadline and not (
                        conn.backlog_full):
                    conn.close(f"request incomplete after {self.read_timeout_ms} ms "
                               f"({conn.frame_progress()} received; "
                               "socket.request.read.timeout.ms); closing the connection")
                elif conn.last_active < idle_deadline and not conn.busy:
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
        for acceptor in self.acceptors:
            acceptor.close()

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
        for task in list(self._handshakes):
            task.cancel()
        self.stop_accepting()
        for task in list(self._connecting):
            task.cancel()
        for sock, timer in list(self._throttled.items()):
            timer.cancel()
            sock.close()
        self._throttled.clear()
        for conn in list(self.connections):
            conn.close(None)
        for limiter in self.log_limiters:
            limiter.close()

