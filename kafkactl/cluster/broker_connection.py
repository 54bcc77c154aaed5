"""One asyncio connection from a broker to another broker (the controller's requests, a
follower's fetches, a leader's AlterPartition), on the sans-IO codec: one request in flight
at a time, made lazily, closed on any error (the caller decides whether to retry).

On a secured inter-broker listener (`InterBrokerSecurity`) the connection is TLS (the
broker's keystore as client certificate, its truststore to check the peer) and/or
authenticated with SASL PLAIN or SCRAM (SaslHandshake v1, SaslAuthenticate v1) before the
first request, as Kafka's brokers do with `inter.broker.listener.name`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import struct
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class InterBrokerSecurity:
    """How this broker connects to the others: the inter-broker listener's name and
    protocol, the SASL mechanism and credentials, the client TLS context."""

    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    mechanism: str = ""
    username: str = ""
    password: str = field(default="", repr=False)
    ssl_context: ssl.SSLContext | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


PLAINTEXT = InterBrokerSecurity()


class BrokerConnection:
    def __init__(self, host: str, port: int, *, client_id: str,
                 security: InterBrokerSecurity = PLAINTEXT) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)

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
        if self._reader is None or self._writer is None:
            ctx = self.security.ssl_context
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                self.host, self.port, ssl=ctx, server_hostname=self.host if ctx else None),
                CONNECT_TIMEOUT_S)
            self._reader, self._writer = reader, writer
            if self.security.uses_sasl:
                await asyncio.wait_for(self._authenticate(), CONNECT_TIMEOUT_S)
        return await self._send(api_key, version, body)

    async def _send(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        assert self._reader is not None and self._writer is not None
        reader, writer = self._reader, self._writer
        cid = next(self._correlation) & 0x7FFFFFFF
        writer.write(codec.encode_request(api_key, version, cid, self.client_id, body))
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise EOFError(f"response size {size} out of range")
        data = await reader.readexactly(size)
        if codec.peek_correlation_id(data) != cid:
            raise EOFError("response to another request")
        return codec.decode_response(api_key, version, data)

    async def _authenticate(self) -> None:
        sec = self.security
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
            return bytes(r["auth_bytes"] or b"")

        if sec.mechanism == "PLAIN":
            await step(b"\x00" + sec.username.encode() + b"\x00" + sec.password.encode())
            return
        exchange = scram.ScramClientExchange(scram.MECHANISMS[sec.mechanism], sec.username,
                                             sec.password)
        try:
            exchange.verify(await step(exchange.final(await step(exchange.first()))))
        except scram.ScramError as e:
            raise AuthenticationFailed(f"SCRAM with {self.host}:{self.port}: {e}") from None

    def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self._reader = self._writer = None


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
