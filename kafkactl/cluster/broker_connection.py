"""One asyncio connection from a broker to another broker (the controller's requests, a
follower's fetches, a leader's AlterPartition), on the sans-IO codec: one request in flight
at a time, made lazily, closed on any error (the caller decides whether to retry)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from typing import Any

from kafkactl.protocol import codec

CONNECT_TIMEOUT_S = 5.0
MAX_RESPONSE_BYTES = 256 << 20

# What a failed exchange raises: the connection is closed and may be tried again.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError, EOFError, asyncio.IncompleteReadError, TimeoutError)


class BrokerConnection:
    def __init__(self, host: str, port: int, *, client_id: str) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)

    async def request(self, api_key: int, version: int, body: dict[str, Any],
                      timeout_s: float) -> dict[str, Any]:
        """Send one request and return its decoded response; on any failure the
        connection is closed and the error raised (OSError, EOFError, TimeoutError, or the
        codec's KafkaError for a response that does not decode)."""
        try:
            return await asyncio.wait_for(self._exchange(api_key, version, body), timeout_s)
        except BaseException:
            self.close()
            raise

    async def _exchange(self, api_key: int, version: int,
                        body: dict[str, Any]) -> dict[str, Any]:
        if self._reader is None or self._writer is None:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), CONNECT_TIMEOUT_S)
            self._reader, self._writer = reader, writer
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

    def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self._reader = self._writer = None


async def request_once(host: str, port: int, api_key: int, version: int,
                       body: dict[str, Any], *, client_id: str,
                       timeout_s: float = 30.0) -> dict[str, Any]:
    """One request on a connection of its own (e.g. a stopping broker asking the
    controller for a controlled shutdown)."""
    conn = BrokerConnection(host, port, client_id=client_id)
    try:
        return await conn.request(api_key, version, body, timeout_s)
    finally:
        conn.close()
