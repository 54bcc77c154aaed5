"""In a ZooKeeper cluster, deleting a topic removes its committed offsets from the groups
of every coordinator, including partitions the coordinator does not host: each broker
learns of the deletion from the controller's UpdateMetadata (Kafka's
onPartitionsDeleted), not only the brokers that hold a replica (StopReplica)."""

from __future__ import annotations

import json
from typing import Any

from tests.cluster.cluster_helpers import start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.groups.helpers import kafkactl, produce, wait_until


def _rows(bootstrap: str, group: str) -> set[tuple[str, int]] | None:
    r = kafkactl("offsets", "show", "-G", group, "--json", "-b", bootstrap)
    if r.returncode != 0:
        return None
    return {(row["topic"], row["partition"]) for row in json.loads(r.stdout)}


def _coordinator(bootstrap: str, group: str) -> int:
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.kafka_client import KafkaClient

    client = KafkaClient(bootstrap)
    try:
        return GroupAdmin(client).find_coordinator(group)[2]
    finally:
        client.close()


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    r = kafkactl("topics", "create", "-t", topic, "--partitions", str(partitions),
                 "--replication-factor", "1", "-b", bootstrap)
    assert r.returncode == 0, r.stderr


def test_cluster_deletion_cleans_offsets_on_a_coordinator_not_hosting_the_topic(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    c = start_cluster(broker_factory, zookeeper, ids=(1, 2),
                      offsets_topic_num_partitions="4", offsets_topic_replication_factor="1",
                      group_initial_rebalance_delay_ms="0")
    boot = c.bootstrap
    _create(boot, "zgone", 4)
    _create(boot, "zkept", 1)
    leaders = c.wait_for_leaders("zgone", 4)
    c.wait_for_leaders("zkept", 1)
    produce(boot, "zgone", [f"old-{i}" for i in range(40)])
    produce(boot, "zkept", [f"k-{i}" for i in range(5)])
    r = kafkactl("offsets", "reset", "-G", "gz", "--topic", "zgone", "--topic", "zkept",
                 "--to-latest", "--execute", "-b", boot)
    assert r.returncode == 0, r.stderr
    assert _rows(boot, "gz") == {("zgone", p) for p in range(4)} | {("zkept", 0)}
    # the group's coordinator leads some of the topic's partitions at most: the others
    # are on the other broker, which alone gets their StopReplica
    coordinator = _coordinator(boot, "gz")
    assert any(leader != coordinator for leader in leaders.values()), (coordinator, leaders)

    r = kafkactl("topics", "delete", "-t", "zgone", "-b", boot)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: _rows(boot, "gz") == {("zkept", 0)}, 30,
               "the offsets of zgone gone from group gz")

    # created again: it starts without the old offsets
    _create(boot, "zgone", 4)
    c.wait_for_leaders("zgone", 4)
    produce(boot, "zgone", [f"new-{i}" for i in range(10)])
    assert _rows(boot, "gz") == {("zkept", 0)}
