"""The metadata cache of a broker in a ZooKeeper cluster (Kafka's ZkMetadataCache): the
whole cluster as the controller last described it in UpdateMetadata (live brokers,
controller, every topic's partitions with leader, epoch, replicas and ISR).

Updates are incremental, as Kafka's controller sends them: a request lists the partitions
whose state changed (the others keep theirs, and a topic keeps its id when the request has
none), a partition with leader -2 (LeaderDuringDelete) belongs to a deleted topic and is
dropped, and the live brokers are always the whole list. A full request replaces the whole
cache (so a deletion this broker missed cannot linger): UpdateMetadata v7 has no Type field,
and the controller sends a full one exactly as the first request of its epoch to a broker
epoch (cluster/controller_requests.py), so a request from another (controller epoch,
broker epoch) than the last one is full. A topic whose id changed (deleted and created
again) is replaced as a whole. Requests from an older controller epoch are refused by the
caller (handlers/controller_requests.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafkactl.broker.metadata_cache import (
    BrokerEndpoint,
    DeletionListener,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
    tell_deleted,
)
from kafkactl.protocol.internal_topics import is_internal

NULL_UUID = uuid.UUID(int=0)
LEADER_DURING_DELETE = -2


def removed_partitions(before: dict[str, TopicMetadata], after: dict[str, TopicMetadata]
                       ) -> list[tuple[str, int]]:
    """The partitions of `before` that `after` does not have: their topic is gone or is
    another one of the same name now (a new id), or the partition is gone."""
    out: list[tuple[str, int]] = []
    for name, old in before.items():
        new = after.get(name)
        if new is old:
            continue
        if new is None or (NULL_UUID not in (old.topic_id, new.topic_id)
                           and new.topic_id != old.topic_id):
            out.extend((name, p) for p in sorted(old.partitions))
        else:
            out.extend((name, p) for p in sorted(old.partitions) if p not in new.partitions)
    return out


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
        # told of the partitions an update removed: a topic deleted (leader -2), replaced by
        # one of the same name, or missing from a full update (a deletion missed)
        self.removal_listeners: list[DeletionListener] = []
        # (controller epoch, broker epoch) of the last update: another pair is a full one
        self._source: tuple[int, int] | None = None
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
        source = (request.get("controller_epoch", -1), request.get("broker_epoch", -1))
        full = source != self._source
        self._source = source
        topics: dict[str, TopicMetadata] = {} if full else dict(self._topics)
        for t in request.get("topic_states") or []:
            name = t["topic_name"]
            topic_id = t.get("topic_id") or NULL_UUID
            current = topics.get(name)
            # the same topic; otherwise one of the same name (deleted and created again):
            # nothing of the current one stays, unless the request only deletes the other
            same = current is not None and (NULL_UUID in (topic_id, current.topic_id)
                                            or topic_id == current.topic_id)
            parts = dict(current.partitions) if same and current is not None else {}
            for p in t["partition_states"]:
                index = p["partition_index"]
                if p["leader"] == LEADER_DURING_DELETE:
                    parts.pop(index, None)
                else:
                    parts[index] = PartitionMetadata(
                        index, p["leader"], p["leader_epoch"], list(p["replicas"]),
                        list(p["isr"]), list(p.get("offline_replicas") or []))
            if same and topic_id == NULL_UUID and current is not None:
                topic_id = current.topic_id
            if parts:
                topics[name] = TopicMetadata(name, topic_id, parts,
                                             is_internal=is_internal(name))
            elif same:
                topics.pop(name, None)
        self._brokers = brokers or {self._me.node_id: self._me}
        self._controller_id = request.get("controller_id", -1)
        before, self._topics = self._topics, topics
        self._by_id = {m.topic_id: m for m in topics.values() if m.topic_id != NULL_UUID}
        self.updated = True
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)
        if self.removal_listeners:
            removed = removed_partitions(before, topics)
            if removed:
                tell_deleted(self.removal_listeners, removed)

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
