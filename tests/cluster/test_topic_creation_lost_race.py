"""A broker that loses the race to create a topic to another broker says so quietly, on real
brokers and ZooKeeper.

At a cluster's start every broker creates __consumer_offsets and __transaction_state on
first use (auto-creation): one writes the topic, the others find it written between their
check and their ZooKeeper transaction. That transaction writes the topic's config znode,
then its topic znode; when the config znode was there already (the winner's) and the topic
znode is too, ZooKeeper answers the config write RolledBackError and the topic write
NodeExistsError, and the first was taken for a ZooKeeper failure: a WARNING "creating topic
'__consumer_offsets' failed: ZooKeeper RolledBackError" on the loser. Kafka sees the lost
race as TopicExistsException (debug only).

The race is made deterministic here on a user topic's auto-creation (the same path,
TopicAdmin.auto_create): the winner's two znodes are written before the request, the topic
znode still empty (a winner that has created it and not yet filled it, as far as the
loser's check can tell: no partition map to read)."""

from __future__ import annotations

import json
from typing import Any

from kafkactl.cluster import zk_paths
from kafkactl.protocol.api_keys import ApiKey
from tests.cluster.cluster_helpers import request, start_cluster
from tests.cluster.zk import ZooKeeperServer

TOPIC = "raced"


def test_losing_the_race_to_create_a_topic_logs_no_warning(
        broker_factory: Any, zookeeper: ZooKeeperServer, zk: Any) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1,))
    broker = cluster.brokers[1]
    # the winner's writes, seen by the loser only once its own transaction fails
    zk.create(cluster.chroot + zk_paths.topic_config(TOPIC),
              json.dumps({"version": 1, "config": {}}).encode(), makepath=True)
    zk.create(cluster.chroot + zk_paths.topic(TOPIC), b"", makepath=True)
    resp = request(broker.port, ApiKey.METADATA, 9, {
        "topics": [{"name": TOPIC}], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False})
    # answered after the creation attempt (a retriable error: no leader yet)
    [answer] = [t for t in resp["topics"] if t["name"] == TOPIC]
    assert answer["error_code"] != 0, answer
    said = [line for line in broker.log().splitlines()
            if "RolledBackError" in line or f"creating topic '{TOPIC}' failed" in line]
    assert said == []
