"""One asyncio connection from a broker to another broker (the controller's requests, a
follower's fetches, a leader's AlterPartition), on the sans-IO codec: one request in flight
at a time, made lazily, closed on any error (the caller decides whether to retry).

Responses are read by a buffered protocol (`_ResponseReader`): the socket is read into one
scratch buffer, and a response larger than what it holds is received straight into a
bytearray of its own size, so a follower's large fetch response is copied once, by the
kernel (a StreamReader appended each read to its buffer, then copied the frame out and
shifted the rest: three copies, a quarter of a follower's CPU at full ingest).

On a secured inter-broker listener (`InterBrokerSecurity`) the connection is TLS (the
broker's keystore as client certificate, its truststore to check the peer: the context
current when the connection is made, `InterBrokerTls`) and/or
authenticated with SASL PLAIN or SCRAM (SaslHandshake v1, SaslAuthenticate v1) before the
first request, as Kafka's brokers do with `inter.broker.listener.name`. When the other
broker's SaslAuthenticate answers a session lifetime (`connections.max.reauth.ms`), the
connection re-authenticates (SaslHandshake + SaslAuthenticate again, no request in flight)
before the first request sent past a random 85-95 % of it, as Kafka's clients do (KIP-368,
SaslClientAuthenticator), instead of being closed by the other broker at the session's
end."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import ssl
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, cast

from kafkactl.protocol import codec, scram
from kafkactl.protocol.api_keys import ApiKey

CONNECT_TIMEOUT_S = 5.0
MAX_RESPONSE_BYTES = 256 << 20

# What a failed exchange raises: the connection is closed and may be tried again.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError, EOFError, asyncio.IncompleteReadError, TimeoutError)


SASL_VERSION = 1


class AuthenticationFailed(OSError):
    """The other broker refused this broker's TLS or SASL credentials."""


class InterBrokerTls:
    """The client TLS context of this broker's connections to the others. A dynamic change
    of the inter-broker listener's keystore or truststore replaces it (Kafka registers its
    inter-broker channel builders, the controller's and the replica fetchers', as
    reconfigurable): every connection made afterwards (controller requests, follower
    fetches, AlterPartition, transaction markers) uses the new context; an open connection
    keeps the one it was made with, as in Kafka."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context

    def replace(self, context: ssl.SSLContext) -> None:
        self.context = context


@dataclass(frozen=True)
class InterBrokerSecurity:
    """How this broker connects to the others: the inter-broker listener's name and
    protocol, the SASL mechanism and credentials, the client TLS context (`tls`, read when
    a connection is made: it follows the dynamic configs)."""

    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    mechanism: str = ""
    username: str = ""
    password: str = field(default="", repr=False)
    tls: InterBrokerTls | None = None

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context for a connection made now (None: no TLS)."""
        return None if self.tls is None else self.tls.context

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = InterBrokerSecurity()


_SCRATCH = 64 << 10  # the shared read buffer of a connection; larger frames get their own


class _ResponseReader(asyncio.BufferedProtocol):
    """Size-prefixed response frames off one connection, each a bytearray, in order; and
    the write side's flow control."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._scratch = bytearray(_SCRATCH)
        self._scratch_view = memoryview(self._scratch)
        self._filled = 0  # bytes of `_scratch` not yet parsed into frames
        self._big: bytearray | None = None  # a frame larger than the scratch buffer
        self._big_filled = 0
        self._frames: deque[bytearray] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._paused = False

    # ---- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        big = self._big
        if big is not None:
            return memoryview(big)[self._big_filled:]
        return self._scratch_view[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        big = self._big
        if big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(big):
                self._big = None
                self._frames.append(big)
                self._wake()
            return
        self._filled += nbytes
        self._split()

    def _split(self) -> None:
        buf, filled, pos = self._scratch, self._filled, 0
        while filled - pos >= 4:
            (size,) = struct.unpack_from(">i", buf, pos)
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                self._fail(EOFError(f"response size {size} out of range"))
                return
            start = pos + 4
            if filled - start >= size:  # whole: copied out of the scratch buffer
                self._frames.append(buf[start:start + size])
                pos = start + size
                continue
            if size > _SCRATCH - 4:  # the rest goes straight into a buffer of its own
                big = bytearray(size)
                have = filled - start
                big[:have] = buf[start:filled]
                self._big, self._big_filled = big, have
                pos = filled
            break
        if pos:  # what is left (part of a header or of a small frame) moves to the front
            rest = filled - pos
            buf[:rest] = buf[pos:filled]
            self._filled = rest
        if self._frames:
            self._wake()

    def eof_received(self) -> bool:
        self._fail(EOFError("the broker closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else EOFError("connection closed"))
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_exception(self._error or EOFError("connection closed"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    # ---- the connection's side ---------------------------------------------------------
    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    async def drain(self) -> None:
        if self._error is not None:
            raise self._error
        if not self._paused:
            return
        self._drained = asyncio.get_running_loop().create_future()
        try:
            await self._drained
        finally:
            self._drained = None

    async def next_frame(self) -> bytearray:
        while not self._frames:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._frames.popleft()


class BrokerConnection:
    def __init__(self, host: str, port: int, *, client_id: str,
                 security: InterBrokerSecurity = PLAINTEXT) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        self._protocol: _ResponseReader | None = None
        self._correlation = itertools.count(1)
        # time.monotonic() past which the next request re-authenticates first (KIP-368)
        self._reauth_at: float | None = None

    async def request(self, api_key: int, version: int, body: dict[str, Any],
                      timeout_s: float) -> dict[str, Any]:
        """Send one request and return its decoded response; on any failure the
        connection is closed and the error raised (OSError, EOFError, TimeoutError, or the
        codec's KafkaError for a response that does not decode)."""
        try:
            async with asyncio.timeout(timeout_s):  # no task per request, unlike wait_for
                return await self._exchange(api_key, version, body)
        except BaseException:
            self.close()
            raise

    async def _exchange(self, api_key: int, version: int,
                        body: dict[str, Any]) -> dict[str, Any]:
        if self._protocol is None:
            ctx = self.security.ssl_context
            _transport, protocol = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(
                    _ResponseReader, self.host, self.port, ssl=ctx,
                    server_hostname=self.host if ctx else None),
                CONNECT_TIMEOUT_S)
            self._protocol = protocol
            self._reauth_at = None
            if self.security.uses_sasl:
                await asyncio.wait_for(self._authenticate(), CONNECT_TIMEOUT_S)
        elif self._reauth_at is not None and time.monotonic() >= self._reauth_at:
            await asyncio.wait_for(self._authenticate(), CONNECT_TIMEOUT_S)
        return await self._send(api_key, version, body)

    async def _send(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        protocol = self._protocol
        assert protocol is not None and protocol.transport is not None
        cid = next(self._correlation) & 0x7FFFFFFF
        protocol.transport.write(codec.encode_request(api_key, version, cid, self.client_id,
                                                      body))
        await protocol.drain()
        data = await protocol.next_frame()
        if len(data) < 4 or codec.peek_correlation_id(data) != cid:
            raise EOFError("response to another request")
        return codec.decode_response(api_key, version, data)

    async def _authenticate(self) -> None:
        """SaslHandshake + SaslAuthenticate (at connect, and again to re-authenticate);
        sets when to re-authenticate from the session lifetime the broker answers."""
        self._reauth_at = None
        lifetime_ms = await self._sasl_exchange()
        if lifetime_ms > 0:
            self._reauth_at = reauthentication_time(lifetime_ms)

    async def _sasl_exchange(self) -> int:
        """The SASL exchange; returns the session lifetime (ms, 0: none) of the last
        SaslAuthenticate response."""
        sec = self.security
        lifetime = [0]
        resp = await self._send(ApiKey.SASL_HANDSHAKE, SASL_VERSION,
                                {"mechanism": sec.mechanism})
        if resp["error_code"]:
            raise AuthenticationFailed(
                f"broker {self.host}:{self.port} does not offer SASL mechanism "
                f"{sec.mechanism} (it offers {', '.join(resp['mechanisms']) or 'none'})")

        async def step(token: bytes) -> bytes:
            r = await self._send(ApiKey.SASL_AUTHENTICATE, SASL_VERSION,
                                 {"auth_bytes": token})
            if r["error_code"]:
                raise AuthenticationFailed(
                    f"broker {self.host}:{self.port} refused this broker's SASL "
                    f"{sec.mechanism} credentials: {r['error_message'] or r['error_code']}")
            lifetime[0] = int(r.get("session_lifetime_ms") or 0)
            return bytes(r["auth_bytes"] or b"")

        if sec.mechanism == "PLAIN":
            await step(b"\x00" + sec.username.encode() + b"\x00" + sec.password.encode())
            return lifetime[0]
        exchange = scram.ScramClientExchange(scram.MECHANISMS[sec.mechanism], sec.username,
                                             sec.password)
        try:
            exchange.verify(await step(exchange.final(await step(exchange.first()))))
        except scram.ScramError as e:
            raise AuthenticationFailed(f"SCRAM with {self.host}:{self.port}: {e}") from None
        return lifetime[0]

    def close(self) -> None:
        protocol = self._protocol
        if protocol is not None and protocol.transport is not None:
            with contextlib.suppress(Exception):
                protocol.transport.close()
        self._protocol = None
        self._reauth_at = None


def reauthentication_time(lifetime_ms: int, now: float | None = None) -> float:
    """The time.monotonic() to re-authenticate at after a login whose session lasts
    `lifetime_ms`: at a random 85-95 % of it (Kafka's SaslClientAuthenticator: room for
    latency and clock drift, and no storm of re-authentications at once)."""
    start = time.monotonic() if now is None else now
    return start + lifetime_ms * random.uniform(0.85, 0.95) / 1000


async def request_once(host: str, port: int, api_key: int, version: int,
                       body: dict[str, Any], *, client_id: str, timeout_s: float = 30.0,
                       security: InterBrokerSecurity = PLAINTEXT) -> dict[str, Any]:
    """One request on a connection of its own (e.g. a stopping broker asking the
    controller for a controlled shutdown)."""
    conn = BrokerConnection(host, port, client_id=client_id, security=security)
    try:
        return await conn.request(api_key, version, body, timeout_s)
    finally:
        conn.close()
