"""DescribeProducers (KIP-664) is answered by every replica of a partition, its leader and
its followers (a follower's producer state is rebuilt from the batches it appends), as
Kafka's ReplicaManager.activeProducerState does; `kafka-transactions describe-producers
--broker-id` relies on it. Only a broker without a replica answers NOT_LEADER_OR_FOLLOWER
(and any broker UNKNOWN_TOPIC_OR_PARTITION for a partition nobody has).

Two real brokers on a real ZooKeeper, a topic of replication factor 2, an idempotent
producer (kcat, enable.idempotence=true)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests.cluster.cluster_helpers import request, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3


def _kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], capture_output=True,
                          text=True, timeout=60)


def _describe(port: int, topic: str, partition: int = 0) -> dict[str, Any]:
    resp = request(port, ApiKey.DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": topic, "partition_indexes": [partition]}]})
    return dict(resp["topics"][0]["partitions"][0])


def _producers(entry: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(s["producer_id"], s["producer_epoch"], s["last_sequence"])
            for s in entry["active_producers"]]


def test_followers_answer_describe_producers_like_the_leader(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, (1, 2),
                            replica_fetch_backoff_ms="100")
    r = _kafkactl("topics", "create", "-t", "idem", "--partitions", "1",
                  "--replication-factor", "2", "-b", cluster.bootstrap)
    assert r.returncode == 0, r.stderr
    r = _kafkactl("topics", "create", "-t", "solo", "--replica-assignment", "1",
                  "-b", cluster.bootstrap)
    assert r.returncode == 0, r.stderr
    leader_id = cluster.wait_for_leaders("idem", 1)[0]
    cluster.wait_for_leaders("solo", 1)
    follower_id = 2 if leader_id == 1 else 1
    leader, follower = cluster.brokers[leader_id], cluster.brokers[follower_id]

    p = subprocess.run(["kcat", "-P", "-b", cluster.bootstrap, "-t", "idem", "-p", "0",
                        "-X", "enable.idempotence=true"],
                       input="".join(f"v{i}\n" for i in range(30)), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr

    on_leader = _describe(leader.port, "idem")
    assert on_leader["error_code"] == 0, on_leader
    expected = _producers(on_leader)
    assert len(expected) == 1 and expected[0][2] == 29, expected  # 30 records: seq 0..29

    # the follower: the same producer id, epoch and last sequence, once it has the batches
    def follower_agrees() -> dict[str, Any] | None:
        entry = _describe(follower.port, "idem")
        if entry["error_code"] != 0:
            return entry if entry["error_code"] == NOT_LEADER_OR_FOLLOWER else None
        return entry if _producers(entry) == expected else None

    on_follower = wait_until(follower_agrees, 30, "the follower's producer state")
    assert on_follower["error_code"] == 0, on_follower
    assert _producers(on_follower) == expected

    # a broker with no replica of the partition, and a partition nobody has
    assert _describe(cluster.brokers[2].port, "solo")["error_code"] == NOT_LEADER_OR_FOLLOWER
    assert _describe(cluster.brokers[1].port, "solo")["error_code"] == 0
    assert _describe(follower.port, "nope")["error_code"] == UNKNOWN_TOPIC_OR_PARTITION

    # kafka-transactions describe-producers --broker-id against the follower
    r = _kafkactl("transactions", "describe-producers", "--topic", "idem", "--partition", "0",
                  "--broker-id", str(follower_id), "--json", "-b", cluster.bootstrap)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(s["producer_id"], s["producer_epoch"], s["last_sequence"]) for s in rows] \
        == expected
    # and against a broker without a replica: a clear refusal
    r = _kafkactl("transactions", "describe-producers", "--topic", "solo", "--partition", "0",
                  "--broker-id", "2", "-b", cluster.bootstrap)
    assert r.returncode != 0
    assert "NOT_LEADER_OR_FOLLOWER" in r.stderr, r.stderr
