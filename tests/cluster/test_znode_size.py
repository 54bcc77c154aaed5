"""Writes ZooKeeper would refuse (over its jute.maxbuffer it drops the connection, and every
retry does the same) are refused before anything is sent: a topic's creation, a new
assignment, a controller's fenced transaction. No ZooKeeper here: a client that is never
called stands in for it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkactl.cluster import controller_zk
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster.topic_state import TopicAssignment, min_topic_znode_bytes
from kafkactl.cluster.zookeeper import WRITE_MAX_BYTES, ZnodeTooLargeError


class Untouchable:
    """A ZooKeeper client that fails the test if anything is asked of it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"ZooKeeper was called ({name}) for a write it would refuse")


@pytest.mark.parametrize(("partitions", "replicas"), [(1, 1), (10, 3), (11, 2), (1234, 5)])
def test_the_least_size_is_never_more_than_the_real_one(partitions: int, replicas: int) -> None:
    a = TopicAssignment("t", {p: list(range(replicas)) for p in range(partitions)},
                        uuid.uuid4())
    assert min_topic_znode_bytes(partitions, replicas) <= len(a.to_json())


def test_a_topic_too_large_is_never_sent() -> None:
    # under the least size of its count, over the limit with its five-digit broker ids
    a = TopicAssignment("big", {p: [10001, 10002, 10003] for p in range(50000)}, uuid.uuid4())
    assert min_topic_znode_bytes(50000, 3) < WRITE_MAX_BYTES < len(a.to_json())
    with pytest.raises(ZnodeTooLargeError, match="jute.maxbuffer"):
        zk_topics.create_topic(Untouchable(), a, {})  # type: ignore[arg-type]
    with pytest.raises(ZnodeTooLargeError):
        zk_topics.set_assignment(Untouchable(), a)  # type: ignore[arg-type]
    with pytest.raises(ZnodeTooLargeError):
        controller_zk.set_assignment(Untouchable(), 3, a)  # type: ignore[arg-type]
    small = TopicAssignment("small", {0: [1]}, uuid.uuid4())
    zk_topics.check_topic_size(small, {"retention.ms": "1000"})  # fits


def test_a_fenced_transaction_too_large_is_never_sent() -> None:
    ops = [("create", f"/brokers/topics/t/partitions/{i}/state", b"x" * 1000)
           for i in range(WRITE_MAX_BYTES // 1000)]
    with pytest.raises(ZnodeTooLargeError):
        controller_zk.commit_fenced(Untouchable(), 1, [ops[:1], ops])  # type: ignore[arg-type]
