"""Topic requests a ZooKeeper cluster must refuse, on three real brokers and a real
ZooKeeper: replica assignments Kafka calls invalid (replica lists of different lengths,
a broker twice in one list, a broker that is not registered, partitions that are not
0..N-1), a topic too large for one znode (refused at once, before anything reaches
ZooKeeper, whose connection such a write would drop), and a topic whose deletion waits
for a broker that is down (`topics delete` says it is pending; creating it again says
why it cannot be done yet, until the broker is back)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkactl.cluster import zk_paths
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests import zygote
from tests.cluster.cluster_helpers import Cluster, request, start_cluster
from tests.polling import wait_until


def kafkactl(*args: str, timeout: float = 60) -> Any:
    return zygote.run(list(args), text=True, timeout=timeout)


@pytest.fixture
def cluster(broker_factory: Any, zookeeper: Any) -> Cluster:
    return start_cluster(broker_factory, zookeeper)


def create_topic(cluster: Cluster, name: str, assignments: dict[int, list[int]],
                 validate_only: bool = False) -> dict[str, Any]:
    """CreateTopics with a replica assignment, sent to the controller: the topic's result."""
    port = cluster.brokers[cluster.controller()].port
    body = {"topics": [{"name": name, "num_partitions": -1, "replication_factor": -1,
                        "assignments": [{"partition_index": p, "broker_ids": b}
                                        for p, b in assignments.items()],
                        "configs": []}],
            "timeout_ms": 30000, "validate_only": validate_only}
    return request(port, ApiKey.CREATE_TOPICS, 5, body)["topics"][0]


def create_partitions(cluster: Cluster, name: str, count: int,
                      assignments: list[list[int]] | None) -> dict[str, Any]:
    port = cluster.brokers[cluster.controller()].port
    body = {"topics": [{"name": name, "count": count,
                        "assignments": None if assignments is None else
                        [{"broker_ids": b} for b in assignments]}],
            "timeout_ms": 30000, "validate_only": False}
    return request(port, ApiKey.CREATE_PARTITIONS, 1, body)["results"][0]


def refused(result: dict[str, Any], *words: str) -> bool:
    message = result.get("error_message") or ""
    return result["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT and all(
        w in message for w in words)


def test_invalid_replica_assignments_are_refused(cluster: Cluster, zk: Any) -> None:
    got = create_topic(cluster, "assigned4", {0: [1, 2], 1: [3]})
    assert refused(got, "inconsistent replication factor", "partition 0 has 2",
                   "partition 1 has 1"), got
    got = create_topic(cluster, "twice", {0: [1, 1], 1: [2, 3]})
    assert refused(got, "names a broker twice"), got
    got = create_topic(cluster, "unknown", {0: [1, 7], 1: [2, 3]})
    assert refused(got, "unknown broker 7"), got
    got = create_topic(cluster, "gap", {0: [1, 2], 2: [2, 3]})
    assert refused(got, "consecutive 0-based", "partition 1 is missing"), got
    got = create_topic(cluster, "empty", {0: [1, 2], 1: []})
    assert refused(got), got
    for name in ("assigned4", "twice", "unknown", "gap", "empty"):
        assert zk.exists(f"{cluster.chroot}{zk_paths.topic(name)}") is None

    got = create_topic(cluster, "assigned", {0: [1, 2], 1: [2, 3]})
    assert got["error_code"] == ErrorCode.NONE, got
    cluster.wait_for_leaders("assigned", 2)
    got = create_partitions(cluster, "assigned", 3, [[3]])
    assert refused(got, "inconsistent replication factor", "partition 0 has 2",
                   "partition 2 has 1"), got
    assert refused(create_partitions(cluster, "assigned", 3, [[3, 3]]), "twice")
    assert refused(create_partitions(cluster, "assigned", 3, [[3, 7]]), "unknown broker 7")
    assert refused(create_partitions(cluster, "assigned", 4, [[3, 1]]))  # one of two given
    assert len(json.loads(zk.get(f"{cluster.chroot}{zk_paths.topic('assigned')}")[0])[
        "partitions"]) == 2
    got = create_partitions(cluster, "assigned", 3, [[3, 1]])
    assert got["error_code"] == ErrorCode.NONE, got
    cluster.wait_for_leaders("assigned", 3)


def test_a_topic_too_large_for_zookeeper_is_refused_at_once(cluster: Cluster, zk: Any) -> None:
    """100,000 partitions of 3 replicas: a topic znode of 1.6 MB, over ZooKeeper's 1 MB
    jute.maxbuffer. Refused with INVALID_PARTITIONS (not retriable: the client does not
    try again), nothing written, and no broker's ZooKeeper session touched."""
    def sessions() -> dict[str, int]:
        out = {"controller": zk.exists(f"{cluster.chroot}{zk_paths.CONTROLLER}").ephemeralOwner}
        for b in cluster.brokers:
            out[str(b)] = zk.exists(f"{cluster.chroot}{zk_paths.broker(b)}").ephemeralOwner
        return out

    before = sessions()
    r = kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", "huge",
                 "--partitions", "100000", "--replication-factor", "3")
    assert r.returncode == 1
    assert "INVALID_PARTITIONS" in r.stderr and "jute.maxbuffer" in r.stderr, r.stderr
    assert "100,000 partitions of 3 replicas" in r.stderr, r.stderr
    assert zk.exists(f"{cluster.chroot}{zk_paths.topic('huge')}") is None

    # just under what the partition count alone rules out: the exact size, with the
    # topic's configs (written in the same request), is what is refused
    throttled = ",".join(f"{p}:{b}" for p in range(2000) for b in (1, 2, 3))
    for validate_only in (True, False):
        got = request(cluster.brokers[cluster.controller()].port, ApiKey.CREATE_TOPICS, 5, {
            "topics": [{"name": "edge", "num_partitions": 65000, "replication_factor": 3,
                        "assignments": [], "configs": [
                            {"name": "leader.replication.throttled.replicas",
                             "value": throttled}]}],
            "timeout_ms": 30000, "validate_only": validate_only})["topics"][0]
        assert got["error_code"] == ErrorCode.INVALID_PARTITIONS, got
        assert "65,000 partitions of 3 replicas" in got["error_message"], got
    assert zk.exists(f"{cluster.chroot}{zk_paths.topic('edge')}") is None
    assert zk.exists(f"{cluster.chroot}{zk_paths.topic_config('edge')}") is None

    r = kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", "grows",
                 "--partitions", "1", "--replication-factor", "3")
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("grows", 1)
    r = kafkactl("topics", "alter", "-b", cluster.bootstrap, "-t", "grows",
                 "--partitions", "100000")
    assert r.returncode == 1
    assert "INVALID_PARTITIONS" in r.stderr and "jute.maxbuffer" in r.stderr, r.stderr
    assert len(json.loads(zk.get(f"{cluster.chroot}{zk_paths.topic('grows')}")[0])[
        "partitions"]) == 1
    assert sessions() == before
    for b in cluster.live():
        assert "Connection dropped" not in b.log(), b.log()


def test_a_deletion_waiting_for_a_broker_is_said_to_be_pending(cluster: Cluster,
                                                                zk: Any) -> None:
    r = kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", "quick",
                 "--partitions", "2", "--replication-factor", "3")
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("quick", 2)
    r = kafkactl("topics", "delete", "-b", cluster.bootstrap, "-t", "quick")
    assert r.returncode == 0, r.stderr
    # said deleted only when it is: nothing left of it in ZooKeeper
    assert r.stdout.strip() == "Deleted topic quick.", r.stdout
    assert zk.exists(f"{cluster.chroot}{zk_paths.topic('quick')}") is None
    assert zk.exists(f"{cluster.chroot}{zk_paths.topic_delete_marker('quick')}") is None

    r = kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", "doomed",
                 "--partitions", "2", "--replication-factor", "3")
    assert r.returncode == 0, r.stderr
    cluster.wait_for_leaders("doomed", 2)
    victim = next(b for b in (3, 2) if b != cluster.controller())
    cluster.brokers[victim].kill()
    wait_until(lambda: str(victim) not in zk.get_children(
        f"{cluster.chroot}{zk_paths.BROKER_IDS}"), 30, f"broker {victim} to leave")

    r = kafkactl("topics", "delete", "-b", cluster.bootstrap, "-t", "doomed")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        f"Topic doomed is marked for deletion, not deleted yet: it waits for broker {victim} "
        "(not live) to delete its replicas; create it again once the deletion is done"), \
        r.stdout
    assert zk.exists(f"{cluster.chroot}{zk_paths.topic_delete_marker('doomed')}") is not None
    for extra in ((), ("--if-not-exists",)):
        r = kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", "doomed", *extra)
        assert r.returncode == 1, (extra, r.stdout)
        assert "TOPIC_ALREADY_EXISTS" in r.stderr and "is marked for deletion" in r.stderr \
            and f"waits for broker {victim}" in r.stderr, r.stderr

    cluster.brokers[victim].start()  # the deletion finishes, and the name is free again
    wait_until(lambda: zk.exists(f"{cluster.chroot}{zk_paths.topic('doomed')}") is None,
               30, "the deletion to finish")
    wait_until(lambda: kafkactl("topics", "create", "-b", cluster.bootstrap, "-t", "doomed",
                                "--partitions", "1", "--replication-factor", "3"
                                ).returncode == 0, 30, "the topic made again")
