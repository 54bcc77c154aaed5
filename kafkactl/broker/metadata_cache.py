"""What the broker tells clients about the cluster: brokers, topics, partitions, leaders.

`MetadataCache` is the read interface every handler uses. `StandaloneMetadataCache` is fed
by this broker's StandaloneTopicAdmin (one broker leads every partition, leader epoch 0). A
ZooKeeper-fed cache (cluster/ controller updates) can replace it without touching handlers.
"""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from kafkactl.protocol.internal_topics import is_internal


@dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    # (listener name, host, port) of every listener the broker advertises; host/port
    # above are the first one's (or the only one a standalone broker has)
    listeners: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of `listener`; None when the broker does not have it (a broker
        known without its listeners is taken to have every one at host:port)."""
        if not self.listeners:
            return self.host, self.port
        return next(((h, p) for n, h, p in self.listeners if n == listener), None)


@dataclass
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@dataclass
class TopicMetadata:
    """Replaced as a whole (never changed in place) when the topic changes."""

    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMetadata]
    is_internal: bool = False
    # the Metadata response's partition entries, built at the first request (read-only)
    response_partitions: list[dict[str, Any]] | None = field(
        default=None, compare=False, repr=False)


class MetadataCache(ABC):
    """Topics by name and by id (kept by the subclass in `_topics` / `_by_id`), brokers and
    the controller as the subclass knows them."""

    cluster_id: str
    broker_id: int
    _topics: dict[str, TopicMetadata]
    _by_id: dict[uuid.UUID, TopicMetadata]

    @abstractmethod
    def brokers(self) -> list[BrokerEndpoint]: ...

    @abstractmethod
    def controller_id(self) -> int: ...

    def topic(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        t = self.topic(topic)
        return None if t is None else t.partitions.get(partition)


class StandaloneMetadataCache(MetadataCache):
    """One broker that is leader and only replica of everything."""

    def __init__(self, cluster_id: str, broker: BrokerEndpoint) -> None:
        self.cluster_id = cluster_id
        self.broker_id = broker.node_id
        self._broker = broker
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}

    def brokers(self) -> list[BrokerEndpoint]:
        return [self._broker]

    def controller_id(self) -> int:
        return self._broker.node_id

    def update_broker(self, broker: BrokerEndpoint) -> None:
        """Replace this broker's advertised endpoint (e.g. once an ephemeral port is bound)."""
        self._broker = broker
        self.broker_id = broker.node_id

    # ---- updates from the StandaloneTopicAdmin --------------------------------------------
    def put_topic(self, name: str, topic_id: uuid.UUID, num_partitions: int,
                  leader_epoch: int = 0, *, offline: Collection[int] = ()) -> None:
        """The topic's partitions, led here except the `offline` ones (their log dir is
        offline: no leader, this broker an offline replica)."""
        me = self._broker.node_id
        parts = {p: PartitionMetadata(p, me, leader_epoch, [me], [me])
                 for p in range(num_partitions)}
        for p in offline:
            parts[p] = PartitionMetadata(p, -1, leader_epoch, [me], [me], [me])
        meta = TopicMetadata(name, topic_id, parts, is_internal=is_internal(name))
        self._topics[name] = meta
        self._by_id[topic_id] = meta

    def remove_topic(self, name: str) -> None:
        meta = self._topics.pop(name, None)
        if meta is not None:
            self._by_id.pop(meta.topic_id, None)


# told of the partitions of deleted topics (the group coordinator: Kafka's
# onPartitionsDeleted); a standalone broker's topic admin or a cluster's metadata cache
# calls them
DeletionListener = Callable[[list[tuple[str, int]]], object]


def tell_deleted(listeners: Iterable[DeletionListener], tps: list[tuple[str, int]]) -> None:
    """Call each listener with the deleted partitions; a listener's failure is logged (the
    deletion goes on)."""
    for listener in listeners:
        try:
            listener(tps)
        except Exception:
            logging.getLogger(__name__).exception(
                "a listener failed on the deletion of %d partition(s)", len(tps))
