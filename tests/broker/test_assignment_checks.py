"""Replica assignments Kafka refuses with INVALID_REPLICA_ASSIGNMENT, decided alike by every
controller (kafkactl.broker.topic_admin's plans): replica lists of different lengths ("All
partitions should have the same number of replicas"; for new partitions, as many as
partition 0 has), a broker twice in one list, a broker that is not live, an empty list,
partitions that are not 0..N-1. Then a standalone broker answers them on the wire."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kafkactl.broker.topic_admin import TopicError, plan_added_partitions, plan_new_topic
from kafkactl.protocol.errors import ErrorCode

LIVE = [1, 2, 3]


def new_topic(assignments: dict[int, list[int]]) -> dict[int, list[int]]:
    return plan_new_topic(-1, -1, list(assignments.items()), live=LIVE, default_partitions=1,
                          default_replication_factor=1)


@pytest.mark.parametrize(("assignments", "said"), [
    ({0: [1, 2], 1: [3]}, "partition 0 has 2 replicas while partition 1 has 1"),
    ({1: [3], 0: [1, 2]}, "partition 0 has 2 replicas while partition 1 has 1"),
    ({0: [1, 1], 1: [2, 3]}, "partition 0 names a broker twice"),
    ({0: [1, 7], 1: [2, 3]}, "partition 0 is assigned to unknown broker 7"),
    ({0: [1], 1: []}, "partition 0 has 1 replica while partition 1 has 0"),
    ({0: []}, "partition 0 is assigned no broker"),
    ({0: [1], 2: [2]}, "partition 1 is missing"),
    ({1: [1], 2: [2]}, "partition 0 is missing"),
    ({-1: [1], 0: [2]}, "partition -1 is not valid"),
])
def test_create_topics_refuses(assignments: dict[int, list[int]], said: str) -> None:
    with pytest.raises(TopicError, match=said) as info:
        new_topic(assignments)
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_duplicate_partition_indexes_are_refused() -> None:
    with pytest.raises(TopicError, match="partition 0 is assigned twice") as info:
        plan_new_topic(-1, -1, [(0, [1]), (0, [2])], live=LIVE, default_partitions=1,
                       default_replication_factor=1)
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_a_consistent_assignment_is_taken() -> None:
    assert new_topic({1: [3, 1], 0: [1, 2]}) == {0: [1, 2], 1: [3, 1]}


@pytest.mark.parametrize(("added", "said"), [
    ([[3]], "partition 0 has 2 replicas while partition 2 has 1"),
    ([[3, 1, 2]], "partition 0 has 2 replicas while partition 2 has 3"),
    ([[3, 3]], "partition 2 names a broker twice"),
    ([[3, 9]], "partition 2 is assigned to unknown broker 9"),
    ([[3, 1], [1]], "partition 0 has 2 replicas while partition 3 has 1"),
])
def test_create_partitions_refuses(added: list[list[int]], said: str) -> None:
    with pytest.raises(TopicError, match=said) as info:
        plan_added_partitions("t", {0: [1, 2], 1: [2, 3]}, 2 + len(added), added, live=LIVE)
    assert info.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert plan_added_partitions("t", {0: [1, 2], 1: [2, 3]}, 3, [[3, 1]], live=LIVE) == {
        2: [3, 1]}


def _code(future: Any) -> int:
    return int(future.exception(10).args[0].code())


def test_a_standalone_broker_refuses_them_on_the_wire(module_broker: Any) -> None:
    admin = AdminClient({"bootstrap.servers": module_broker.bootstrap})
    fs = admin.create_topics([
        NewTopic("assigned-twice", 2, replica_assignment=[[0], [0, 0]]),
        NewTopic("assigned-elsewhere", 2, replica_assignment=[[0], [5]]),
        NewTopic("assigned-ok", 2, replica_assignment=[[0], [0]])])
    assert _code(fs["assigned-twice"]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _code(fs["assigned-elsewhere"]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert fs["assigned-ok"].result(10) is None
    fs = admin.create_partitions([NewPartitions("assigned-ok", 3, [[0, 0]])])
    assert _code(fs["assigned-ok"]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert admin.create_partitions([NewPartitions("assigned-ok", 3, [[0]])])[
        "assigned-ok"].result(10) is None
