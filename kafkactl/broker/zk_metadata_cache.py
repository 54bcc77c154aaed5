"""The metadata cache of a broker in a ZooKeeper cluster (Kafka's ZkMetadataCache): the
whole cluster as the controller last described it in UpdateMetadata (live brokers,
controller, every topic's partitions with leader, epoch, replicas and ISR). Each request
carries the complete picture and replaces the previous one, so a topic the controller
deleted disappears with the next update. Requests from an older controller epoch are
refused by the caller (handlers/controller_requests.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafkactl.broker.metadata_cache import (
    BrokerEndpoint,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)

NULL_UUID = uuid.UUID(int=0)


class ZkMetadataCache(MetadataCache):
    def __init__(self, cluster_id: str, broker: BrokerEndpoint) -> None:
        self.cluster_id = cluster_id
        self.broker_id = broker.node_id
        self._me = broker
        self._brokers: dict[int, BrokerEndpoint] = {broker.node_id: broker}
        self._controller_id = -1
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self.updated = False  # True once the first UpdateMetadata arrived
        self._waiters: list[asyncio.Future[None]] = []

    # ---- reads ---------------------------------------------------------------------------
    def brokers(self) -> list[BrokerEndpoint]:
        return [self._brokers[b] for b in sorted(self._brokers)]

    def broker(self, node_id: int) -> BrokerEndpoint | None:
        return self._brokers.get(node_id)

    def controller_id(self) -> int:
        return self._controller_id

    def update_broker(self, broker: BrokerEndpoint) -> None:
        """This broker's own endpoint (known before any UpdateMetadata arrives)."""
        self._me = broker
        self.broker_id = broker.node_id
        self._brokers[broker.node_id] = broker

    # ---- the controller's update ---------------------------------------------------------
    def apply_update_metadata(self, request: dict[str, Any]) -> None:
        brokers: dict[int, BrokerEndpoint] = {}
        for b in request.get("live_brokers") or []:
            endpoints = b.get("endpoints") or []
            if endpoints:
                ep = endpoints[0]
                brokers[b["id"]] = BrokerEndpoint(
                    b["id"], ep["host"], ep["port"], b.get("rack"),
                    tuple((e["listener"], e["host"], e["port"]) for e in endpoints))
        topics: dict[str, TopicMetadata] = {}
        for t in request.get("topic_states") or []:
            name = t["topic_name"]
            parts = {
                p["partition_index"]: PartitionMetadata(
                    p["partition_index"], p["leader"], p["leader_epoch"],
                    list(p["replicas"]), list(p["isr"]), list(p.get("offline_replicas") or []))
                for p in t["partition_states"]}
            topic_id = t.get("topic_id") or NULL_UUID
            topics[name] = TopicMetadata(name, topic_id, parts,
                                         is_internal=name.startswith("__"))
        self._brokers = brokers or {self._me.node_id: self._me}
        self._controller_id = request.get("controller_id", -1)
        self._topics = topics
        self._by_id = {m.topic_id: m for m in topics.values() if m.topic_id != NULL_UUID}
        self.updated = True
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def wait_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Wait (woken by each update, no polling) until `condition()` holds; False when
        `timeout_s` passes first."""
        deadline = time.monotonic() + timeout_s
        loop = asyncio.get_running_loop()
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return condition()
        return True
