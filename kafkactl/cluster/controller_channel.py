"""The controller's connections to the brokers (Kafka's ControllerChannelManager): one
asyncio connection and one FIFO queue per live broker, one request in flight at a time, so
a broker sees the controller's LeaderAndIsr / UpdateMetadata / StopReplica in the order
they were decided. Built on the sans-IO codec; a lost connection is re-made and the request
sent again until the broker leaves the cluster (its queue is then dropped)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkactl.protocol import codec
from kafkactl.protocol.errors import KafkaError

log = logging.getLogger("kafkactl.controller")

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.2
MAX_RESPONSE_BYTES = 100 << 20

ResponseCallback = Callable[[dict[str, Any]], None]


@dataclass
class _Request:
    api_key: int
    version: int
    body: dict[str, Any]
    callback: ResponseCallback | None


@dataclass
class _BrokerQueue:
    broker_id: int
    host: str
    port: int
    queue: asyncio.Queue[_Request] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None


class ControllerChannel:
    def __init__(self, controller_id: int) -> None:
        self.client_id = f"kafkactl-controller-{controller_id}"
        self._brokers: dict[int, _BrokerQueue] = {}
        self._correlation = itertools.count(1)

    def brokers(self) -> list[int]:
        return sorted(self._brokers)

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        """Start (or re-point) the queue of a live broker."""
        b = self._brokers.get(broker_id)
        if b is not None and (b.host, b.port) == (host, port):
            return
        if b is not None:
            self.remove_broker(broker_id)
        b = _BrokerQueue(broker_id, host, port)
        b.task = asyncio.get_running_loop().create_task(self._run(b))
        self._brokers[broker_id] = b

    def remove_broker(self, broker_id: int) -> None:
        """Stop sending to a broker that left; its queued requests are dropped."""
        b = self._brokers.pop(broker_id, None)
        if b is None:
            return
        if b.task is not None:
            b.task.cancel()
        self._close(b)

    def send(self, broker_id: int, api_key: int, version: int, body: dict[str, Any],
             callback: ResponseCallback | None = None) -> bool:
        """Queue a request; False when the broker is not live (nothing is sent)."""
        b = self._brokers.get(broker_id)
        if b is None:
            return False
        b.queue.put_nowait(_Request(api_key, version, body, callback))
        return True

    async def close(self) -> None:
        for broker_id in list(self._brokers):
            self.remove_broker(broker_id)
        await asyncio.sleep(0)

    # ---- per-broker sender -------------------------------------------------------------------
    async def _run(self, b: _BrokerQueue) -> None:
        while True:
            req = await b.queue.get()
            response = await self._deliver(b, req)
            if req.callback is not None:
                try:
                    req.callback(response)
                except Exception:
                    log.exception("handling the response of broker %d failed", b.broker_id)

    async def _deliver(self, b: _BrokerQueue, req: _Request) -> dict[str, Any]:
        failures = 0
        while True:
            try:
                return await asyncio.wait_for(self._round_trip(b, req), REQUEST_TIMEOUT_S)
            except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError,
                    KafkaError) as e:
                self._close(b)
                failures += 1
                if failures == 1 or failures % 50 == 0:
                    log.warning("controller request to broker %d at %s:%d failed (%s: %s); "
                                "retrying", b.broker_id, b.host, b.port, type(e).__name__, e)
                await asyncio.sleep(RETRY_BACKOFF_S)

    async def _round_trip(self, b: _BrokerQueue, req: _Request) -> dict[str, Any]:
        if b.writer is None or b.reader is None:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(b.host, b.port), CONNECT_TIMEOUT_S)
            b.reader, b.writer = reader, writer
        else:
            reader, writer = b.reader, b.writer
        cid = next(self._correlation) & 0x7FFFFFFF
        frame = codec.encode_request(req.api_key, req.version, cid, self.client_id, req.body)
        writer.write(frame)
        await writer.drain()
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise EOFError(f"response size {size} out of range")
        data = await reader.readexactly(size)
        if codec.peek_correlation_id(data) != cid:
            raise EOFError("response to another request")
        return codec.decode_response(req.api_key, req.version, data)

    @staticmethod
    def _close(b: _BrokerQueue) -> None:
        if b.writer is not None:
            with contextlib.suppress(Exception):
                b.writer.close()
        b.reader = b.writer = None


async def request_once(host: str, port: int, api_key: int, version: int,
                       body: dict[str, Any], *, client_id: str,
                       timeout_s: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
    """One request on a fresh connection (a stopping broker asking the controller for a
    controlled shutdown). Raises OSError/TimeoutError/EOFError when it cannot be done."""
    async def exchange() -> dict[str, Any]:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port),
                                                CONNECT_TIMEOUT_S)
        try:
            writer.write(codec.encode_request(api_key, version, 1, client_id, body))
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            if not 4 <= size <= MAX_RESPONSE_BYTES:
                raise EOFError(f"response size {size} out of range")
            return codec.decode_response(api_key, version, await reader.readexactly(size))
        finally:
            writer.close()

    return await asyncio.wait_for(exchange(), timeout_s)
