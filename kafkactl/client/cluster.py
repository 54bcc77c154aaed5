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

    def available_partitions(self, topic: str) -> list[int]:
        """The partitions of `topic` that have a leader now (Kafka's
        availablePartitionsForTopic), in order."""
        t = self.topics.get(topic)
        if t is None:
            return []
        return sorted(p for p, m in t.partitions.items() if m.leader >= 0)

    def reported_leaderless(self, topic: str, partition: int) -> bool:
        """True when the last Metadata answer said the partition has no leader (an offline
        partition, or one whose leader is being elected), not only that this client
        stopped trusting the leader it had."""
        t = self.topics.get(topic)
        p = None if t is None else t.partitions.get(partition)
        return p is not None and p.leader < 0 and p.error_code != 0

    @property
    def stale(self) -> bool:
        """The next lookup should refresh (never fetched, or invalidated)."""
        return self.updated_at == 0.0

    def invalidate(self, topic: str | None = None, partition: int | None = None) -> None:
        """Force the next lookup to refresh (after NOT_LEADER / unknown partition): with a
        topic, its leaders (one partition's, with `partition`) are unknown until then."""
        self.updated_at = 0.0
        self.version += 1
        t = None if topic is None else self.topics.get(topic)
        if t is None:
            return
        for p in t.partitions.values():
            if partition is None or p.partition == partition:
                p.leader = -1

    def invalidate_node(self, node_id: int) -> None:
        """Broker `node_id` could not be reached: the partitions it leads have no known
        leader until the next refresh (which may name it again: then it is tried again),
        and the next lookup refreshes."""
        self.updated_at = 0.0
        self.version += 1
        if node_id < 0:
            return
        for t in self.topics.values():
            for p in t.partitions.values():
                if p.leader == node_id:
                    p.leader = -1
