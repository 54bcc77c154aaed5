"""The state a new controller loads from ZooKeeper (pipelined reads) is the state the
znodes hold, read one by one; and on fail-over, replicas on brokers that are not live leave
the ISRs while offline partitions get a leader from theirs."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactl.cluster import broker_registry, zk_paths
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster import zookeeper as zkmod
from kafkactl.cluster.controller import KafkaController
from kafkactl.cluster.controller_election import try_elect
from kafkactl.cluster.controller_zk import read_topics
from kafkactl.cluster.topic_state import PartitionState
from tests.cluster.zk import ZooKeeperServer

TOPICS = {  # name -> partition -> (replicas, leader, isr); None: no state znode
    "orders": {0: ([1, 2, 3], 1, [1, 2, 3]), 1: ([2, 3, 1], 3, [3, 1, 2]),
               2: ([3, 1, 2], 3, [3])},
    "audit": {0: ([2, 1], 2, [2, 1]), 1: ([1, 2], None, None)},
}


def _put(zk: Any, path: str, value: Any) -> None:
    data = value if isinstance(value, bytes) else json.dumps(value).encode()
    zk.create(path, data, makepath=True)


@pytest.fixture
def cluster_znodes(zookeeper: ZooKeeperServer, zk: Any) -> Iterator[Any]:
    """Brokers 1 and 2 registered (3 is not), the topics above, and some garbage: a
    malformed registration, topic and partition state."""
    root = f"/t-{uuid.uuid4().hex[:8]}"
    for b in (1, 2):
        _put(zk, root + zk_paths.broker(b), {"host": "127.0.0.1", "port": 9000 + b,
                                            "version": 4})
    _put(zk, root + zk_paths.broker(7), b"{not json")
    for name, parts in TOPICS.items():
        _put(zk, root + zk_paths.topic(name), {
            "version": 3, "topic_id": str(uuid.uuid4()),
            "partitions": {str(p): r for p, (r, _, _) in parts.items()}})
        for p, (_, leader, isr) in parts.items():
            if leader is not None:
                _put(zk, root + zk_paths.partition_state(name, p), {
                    "controller_epoch": 1, "leader": leader, "version": 1,
                    "leader_epoch": 4, "isr": isr})
    _put(zk, root + zk_paths.topic("garbage"), b"\xff")
    _put(zk, root + zk_paths.topic("broken"), {"version": 3, "partitions": {"0": [1]}})
    _put(zk, root + zk_paths.partition_state("broken", 0), b'{"leader": "x"}')
    client = zkmod.connect(zookeeper.connect + root, timeout_s=10)
    yield client
    zkmod.close(client)


def _read_one_by_one(zk: Any) -> tuple[dict[int, Any], dict[str, Any],
                                       dict[tuple[str, int], PartitionState]]:
    """The reference: every znode read with its own blocking call."""
    brokers = {}
    for child in zk.get_children(zk_paths.BROKER_IDS):
        data, stat = zk.get(zk_paths.broker(int(child)))
        info = broker_registry.parse_broker(int(child),
                                            zkmod.decode_json(data, child))
        if info is not None:
            brokers[info.broker_id] = (info.host, info.port, stat.czxid)
    assignments, states = {}, {}
    for name in zk.get_children(zk_paths.BROKER_TOPICS):
        data, stat = zk.get(zk_paths.topic(name))
        found = zk_topics.parse_assignment(name, zkmod.decode_json(data, name), stat.version)
        if found is None:
            continue
        assignments[name] = found.partitions
        for p in found.partitions:
            path = zk_paths.partition_state(name, p)
            if zk.exists(path):
                data, stat = zk.get(path)
                state = zk_topics.parse_partition_state(zkmod.decode_json(data, path),
                                                        stat.version)
                if state is not None:
                    states[(name, p)] = state
    return brokers, assignments, states


def test_pipelined_load_equals_reading_each_znode(cluster_znodes: Any) -> None:
    zk = cluster_znodes
    brokers, assignments, states = _read_one_by_one(zk)
    assert set(brokers) == {1, 2} and set(assignments) == {"orders", "audit", "broken"}

    live = broker_registry.live_brokers(zk)
    assert {b: (i.host, i.port, i.epoch) for b, i in live.items()} == brokers
    controller = KafkaController(zk, 1)
    controller.view.brokers = live
    names = zk_topics.topic_names(zk)
    read = controller.apply_topics(*read_topics(zk, names))
    assert controller.view.assignments == assignments
    assert controller.view.states == states
    assert sorted(read) == sorted((t, p) for t, parts in assignments.items() for p in parts)
    assert zk_topics.read_assignments(zk, ["orders", "missing"])["missing"] is None
    assert zk_topics.read_partition_states(zk, [("audit", 1)]) == {("audit", 1): None}


def test_failover_moves_offline_leaders_and_drops_offline_replicas_from_isrs(
        cluster_znodes: Any) -> None:
    zk = cluster_znodes
    controller = KafkaController(zk, 1)
    won = try_elect(zk, 1)
    assert won.won
    controller.active, controller._active_session = True, 0
    controller.epoch_zk_version = won.epoch_zk_version
    controller.epoch = controller.view.controller_epoch = 9
    controller.view.brokers = broker_registry.live_brokers(zk)
    controller.apply_topics(*read_topics(zk, zk_topics.topic_names(zk)))
    offline = {r for s in controller.view.states.values() for r in s.isr} - {1, 2}
    assert offline == {3}

    changed = asyncio.run(controller._on_brokers_changed(offline))

    def state(t: str, p: int) -> tuple[int, int, list[int], int]:
        s = zk_topics.read_partition_state(zk, t, p)
        assert s is not None and controller.view.states[(t, p)] == s
        return s.leader, s.leader_epoch, s.isr, s.controller_epoch

    assert state("orders", 0) == (1, 5, [1, 2], 9)  # the dead follower left the ISR
    assert state("orders", 1) == (2, 5, [1, 2], 9)  # led from the ISR, by assignment order
    assert state("orders", 2) == (-1, 5, [3], 9)  # no live ISR member: offline, 3 stays
    assert state("audit", 0) == (2, 4, [2, 1], 1)  # untouched
    assert state("audit", 1) == (1, 0, [1, 2], 9)  # never started: its first state
    # broken-0's state znode holds garbage: its first state is not written over it
    assert changed - {("broken", 0)} == {("orders", 0), ("orders", 1), ("orders", 2),
                                         ("audit", 1)}
    assert ("broken", 0) not in controller.view.states
