"""The metadata store of a ZooKeeper cluster (kafkactl.cluster.metadata_store's seam):
topic decisions as Kafka's znodes. Every method blocks on ZooKeeper (call it from a worker
thread) and raises kazoo's errors for an unreachable ZooKeeper or a lost session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kafkactl.cluster import config_changes
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster.metadata_store import ConcurrentChangeError, TopicExistsError
from kafkactl.cluster.topic_state import TopicAssignment

if TYPE_CHECKING:
    from kazoo.client import KazooClient


class ZkMetadataStore:
    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def read_assignment(self, name: str) -> TopicAssignment | None:
        return zk_topics.read_assignment(self.zk, name)

    def create_topic(self, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """The config znode and the topic znode in one transaction: the controller's watch
        sees the topic with its configs."""
        from kazoo.exceptions import NodeExistsError

        try:
            zk_topics.create_topic(self.zk, assignment, dict(configs))
        except NodeExistsError:
            raise TopicExistsError(assignment.name) from None

    def set_assignment(self, assignment: TopicAssignment) -> None:
        from kazoo.exceptions import BadVersionError

        try:
            zk_topics.set_assignment(self.zk, assignment)
        except BadVersionError:
            raise ConcurrentChangeError(assignment.name) from None

    def read_topic_config(self, name: str) -> dict[str, str]:
        return zk_topics.read_topic_config(self.zk, name)

    def write_topic_config(self, name: str, configs: Mapping[str, str]) -> int:
        """The config znode and a /config/changes notification: every broker applies it."""
        return config_changes.write_entity_config(self.zk, config_changes.TOPICS, name,
                                                  dict(configs))

    def mark_for_deletion(self, name: str) -> None:
        zk_topics.mark_for_deletion(self.zk, name)

    def marked_for_deletion(self, name: str) -> bool:
        """A deletion of the topic is asked for and not finished."""
        return zk_topics.marked_for_deletion(self.zk, name)
