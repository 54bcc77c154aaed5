"""The controller's connections to the brokers (Kafka's ControllerChannelManager): one
asyncio connection and one FIFO queue per live broker, one request in flight at a time, so
a broker sees the controller's LeaderAndIsr / UpdateMetadata / StopReplica in the order
they were decided. Built on the sans-IO codec; a lost connection is re-made and the request
sent again until the broker leaves the cluster (its queue is then dropped)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafkactl.cluster.broker_connection import (
    CONNECTION_ERRORS,
    PLAINTEXT,
    BrokerConnection,
    InterBrokerSecurity,
)
from kafkactl.protocol.errors import KafkaError

log = logging.getLogger("kafkactl.controller")

REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.2
RETRIABLE: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, KafkaError)

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
    connection: BrokerConnection
    queue: asyncio.Queue[_Request] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None


class ControllerChannel:
    def __init__(self, controller_id: int, security: InterBrokerSecurity = PLAINTEXT) -> None:
        self.client_id = f"kafkactl-controller-{controller_id}"
        self.security = security  # the inter-broker listener's TLS / SASL
        self._brokers: dict[int, _BrokerQueue] = {}

    def brokers(self) -> list[int]:
        return sorted(self._brokers)

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        """Start (or re-point) the queue of a live broker."""
        b = self._brokers.get(broker_id)
        if b is not None and (b.connection.host, b.connection.port) == (host, port):
            return
        if b is not None:
            self.remove_broker(broker_id)
        b = _BrokerQueue(broker_id, BrokerConnection(host, port, client_id=self.client_id,
                                                     security=self.security))
        b.task = asyncio.get_running_loop().create_task(self._run(b))
        self._brokers[broker_id] = b

    def remove_broker(self, broker_id: int) -> None:
        """Stop sending to a broker that left; its queued requests are dropped."""
        b = self._brokers.pop(broker_id, None)
        if b is None:
            return
        if b.task is not None:
            b.task.cancel()
        b.connection.close()

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
                return await b.connection.request(req.api_key, req.version, req.body,
                                                  REQUEST_TIMEOUT_S)
            except RETRIABLE as e:
                failures += 1
                if failures == 1 or failures % 50 == 0:
                    log.warning("controller request to broker %d at %s:%d failed (%s: %s); "
                                "retrying", b.broker_id, b.connection.host, b.connection.port,
                                type(e).__name__, e)
                await asyncio.sleep(RETRY_BACKOFF_S)
