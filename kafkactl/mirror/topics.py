"""TargetTopics: the target topic of each source topic, created when missing.

A missing target topic is created with the source topic's partition count and the target
cluster's defaults (replication factor and configs), or with the source topic's own configs
when asked. Records keep their source partition when the target topic has as many
partitions; otherwise the producer's partitioner places them by key.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kafkactl.client.admin import AdminClient
from kafkactl.protocol.errors import ErrorCode

log = logging.getLogger("kafkactl.mirror")

# DescribeConfigs config_source of a topic config set on the topic itself.
DYNAMIC_TOPIC_CONFIG = 1
# Source topic configs never copied (MirrorMaker 2's DefaultConfigPropertyFilter): they
# describe the source cluster's replicas and clocks, not the data; min.insync.replicas=2 on
# a target with fewer replicas would refuse every acks=all write there.
NOT_COPIED = frozenset({
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms", "message.timestamp.type",
    "unclean.leader.election.enable", "min.insync.replicas",
})


@dataclass(frozen=True)
class TargetTopic:
    name: str
    partitions: int
    keep_partition: bool  # same partition count: record i of source partition p -> p


class TargetTopics:
    """Thread-safe cache of target topics (every stream thread asks it)."""

    def __init__(self, target: AdminClient, source: AdminClient,
                 rename: Callable[[str], str], *, copy_configs: bool = False) -> None:
        self.target = target
        self.source = source
        self.rename = rename
        self.copy_configs = copy_configs
        self._lock = threading.Lock()
        self._topics: dict[str, TargetTopic] = {}
        self.created: list[str] = []

    def get(self, source_topic: str, source_partitions: int) -> TargetTopic:
        """The target of `source_topic`, made when missing. A source that gained
        partitions since (the target keeps its count) is copied by key from then on, as a
        mirror started now would copy it: source partition p -> p would name a partition
        the target does not have."""
        found = self._topics.get(source_topic)
        if found is not None and (not found.keep_partition
                                  or source_partitions <= found.partitions):
            return found
        with self._lock:
            found = self._topics.get(source_topic)
            if found is None:
                found = self._topics[source_topic] = self._ensure(source_topic,
                                                                  source_partitions)
            elif found.keep_partition and source_partitions > found.partitions:
                log.warning("source topic %s has %d partitions now, its target %s %d: its "
                            "records are partitioned by key from now on (add partitions to "
                            "the target with `kafkactl topics alter` to keep partitions)",
                            source_topic, source_partitions, found.name, found.partitions)
                found = self._topics[source_topic] = TargetTopic(found.name, found.partitions,
                                                                 False)
            return found

    def _ensure(self, source_topic: str, source_partitions: int) -> TargetTopic:
        name = self.rename(source_topic)
        existing = self.target.list_topics().get(name)
        if existing is None or not existing.partitions:
            configs = self._source_configs(source_topic) if self.copy_configs else {}
            errors = self.target.create_topics({name: (source_partitions, -1, configs)})
            err = errors.get(name)
            if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise err
            if err is None:
                self.created.append(name)
                log.info("created target topic %s with %d partitions", name,
                         source_partitions)
            partitions = self._wait_for_partitions(name, source_partitions)
        else:
            partitions = len(existing.partitions)
        return TargetTopic(name, partitions, partitions == source_partitions)

    def _wait_for_partitions(self, name: str, expected: int) -> int:
        topic = None
        deadline = time.monotonic() + 5.0
        while True:
            topic = self.target.list_topics().get(name)
            if topic is not None and topic.partitions and all(
                    p.leader >= 0 for p in topic.partitions.values()):
                return len(topic.partitions)
            if time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        return len(topic.partitions) if topic is not None and topic.partitions else expected

    def _source_configs(self, source_topic: str) -> dict[str, str]:
        entries = self.source.describe_configs(source_topic)
        return {k: e.value for k, e in entries.items()
                if e.value is not None and e.source == DYNAMIC_TOPIC_CONFIG
                and not e.read_only and not e.sensitive and k not in NOT_COPIED}

    def forget(self, source_topic: str) -> None:
        with self._lock:
            self._topics.pop(source_topic, None)
