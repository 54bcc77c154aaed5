"""SubscriptionWatch: when a group member must rejoin because its topics changed.

Java's ConsumerCoordinator compares metadata with what the last join used: a member
subscribed by pattern rejoins when the topics matching it change (a topic made or
deleted), and the leader rejoins when the partitions of any topic it assigned changed in
number (partitions added, a topic deleted), so the group assigns what exists now. Both are
checked every metadata.max.age.ms (Java's periodic metadata refresh, 5 minutes by
default), on the caller's poll.

It also keeps the layout the member saw when it first joined: a partition made after that
(added to a topic, or of a topic that came to match the pattern) holds nothing older than
the member, which reads it from its start rather than from wherever auto.offset.reset=latest
would put it when the group gets round to assigning it (records written in between would
be skipped).
"""

from __future__ import annotations

import logging
import re
import time

from kafkactl.client.cluster import ClusterMetadata
from kafkactl.client.errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.errors import KafkaError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Layout = dict[str, int]  # topic -> number of partitions


def layout_of(cluster: ClusterMetadata, topics: list[str]) -> Layout:
    """The number of partitions of each of `topics` (0: absent)."""
    out: Layout = {}
    for t in topics:
        tm = cluster.topics.get(t)
        out[t] = len(tm.partitions) if tm is not None else 0
    return out


def matching(cluster: ClusterMetadata, pattern: re.Pattern[str]) -> list[str]:
    return sorted(t for t, tm in cluster.topics.items()
                  if not tm.is_internal and pattern.fullmatch(t))


class SubscriptionWatch:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client
        self.start_layout: Layout | None = None  # at the first join of this subscription
        self.joined: list[str] = []  # the topics the last join subscribed
        self.led: Layout | None = None  # what the last assignment this member made used
        self.next_check = time.monotonic() + client.metadata_max_age

    def restart(self) -> None:
        """A new subscription: its topics' layout is taken again at the next join."""
        self.start_layout = None

    def joining(self, topics: list[str]) -> None:
        """The member joins subscribed to `topics` (metadata just fetched for them)."""
        self.joined = list(topics)
        self.led = None
        if self.start_layout is None:
            self.start_layout = layout_of(self.client.cluster, topics)

    def leading(self, layout: Layout) -> None:
        """The member (the leader) assigned the partitions of `layout`."""
        self.led = dict(layout)

    def born_since_start(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        start = self.start_layout
        if start is None:
            return []
        return [(t, p) for t, p in tps if p >= start.get(t, 0)]

    def changed(self, pattern: re.Pattern[str] | None) -> str:
        """Why the member must rejoin ('' when it need not), looked at once every
        metadata.max.age.ms; a cluster that does not answer is looked at next time."""
        now = time.monotonic()
        if now < self.next_check:
            return ""
        self.next_check = now + self.client.metadata_max_age
        try:
            if pattern is not None:
                cluster = self.client.refresh_metadata(None)
                topics = matching(cluster, pattern)
                if topics != self.joined:
                    return f"the topics matching its pattern are now {', '.join(topics)}"
            if self.led:
                cluster = (self.client.cluster if pattern is not None
                           else self.client.refresh_metadata(sorted(self.led)))
                now_layout = layout_of(cluster, sorted(self.led))
                if now_layout != self.led:
                    return "partitions changed: " + ", ".join(
                        f"{t} {self.led[t]} -> {n}" for t, n in sorted(now_layout.items())
                        if n != self.led[t])
        except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable, KafkaError) as e:
            log.debug("metadata check failed (%s): looked at again in %.0f s", e,
                      self.client.metadata_max_age)
        return ""
