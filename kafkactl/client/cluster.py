"""ClusterMetadata: the client's cache of brokers, topics, partitions and leaders."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline_replicas: list[int] = field(default_factory=list)
    error_code: int = 0


@dataclass(slots=True)
class TopicMetadata:
    name: str
    partitions: dict[int, PartitionMetadata]
    error_code: int = 0
    is_internal: bool = False
    topic_id: Any = None


class ClusterMetadata:
    """Updated from Metadata responses; read by producer, consumer and admin."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.updated_at = 0.0
        self.version = 0

    def update(self, response: dict[str, Any], *, all_topics: bool = False) -> None:
        brokers = {}
        for b in response.get("brokers") or ():
            brokers[b["node_id"]] = BrokerMetadata(b["node_id"], b["host"], b["port"],
                                                   b.get("rack"))
        if brokers:
            self.brokers = brokers
        self.cluster_id = response.get("cluster_id")
        self.controller_id = response.get("controller_id", -1)
        topics = {} if all_topics else dict(self.topics)
        for t in response.get("topics") or ():
            name = t.get("name")
            if name is None:
                continue
            parts = {}
            for p in t.get("partitions") or ():
                parts[p["partition_index"]] = PartitionMetadata(
                    p["partition_index"], p.get("leader_id", -1), p.get("leader_epoch", -1),
                    list(p.get("replica_nodes") or ()), list(p.get("isr_nodes") or ()),
                    list(p.get("offline_replicas") or ()), p.get("error_code", 0))
            topics[name] = TopicMetadata(name, parts, t.get("error_code", 0),
                                         bool(t.get("is_internal", False)), t.get("topic_id"))
        self.topics = topics
        self.updated_at = time.monotonic()
        self.version += 1

    def partitions_for(self, topic: str) -> list[int] | None:
        t = self.topics.get(topic)
        if t is None or t.error_code or not t.partitions:
            return None
        return sorted(t.partitions)

    def leader_for(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is None:
            return -1
        p = t.partitions.get(partition)
        return -1 if p is None else p.leader

    def invalidate(self, topic: str | None = None) -> None:
        """Force the next lookup to refresh (after NOT_LEADER / unknown partition)."""
        self.updated_at = 0.0
        if topic is not None and topic in self.topics:
            for p in self.topics[topic].partitions.values():
                p.leader = -1
