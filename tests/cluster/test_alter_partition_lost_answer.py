"""An ISR change the controller applied but whose answer the leader never got (ZooKeeper
away longer than the leader's AlterPartition timeout): the leader sends the same request
again, at the partition epoch it knows, now stale, and the controller answers it with the
state the partition is in and its partition epoch (Kafka's processAlterPartition checks
LeaderAndIsr.equalsAllowStalePartitionEpoch before fencing on the partition epoch), so
the leader's ISR and partition epoch become ZooKeeper's. It used to refuse the repeat with
INVALID_UPDATE_VERSION, every retry for ever: the leader kept the dead follower in its ISR
(under-replicated 0 while ZooKeeper said otherwise) and acks=all writes never completed.

Real ZooKeeper and three real brokers: first the controller's answer to a raw
AlterPartition, as the leader sends it; then the whole story with a ZooKeeper outage."""

from __future__ import annotations

import signal
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.cluster.cluster_helpers import request, start_cluster
from tests.cluster.isr_cluster import partition_state, produce_acks_all, start_metered_cluster
from tests.cluster.test_config_changes import create_topic
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

URP = "kafka_server_replicamanager_underreplicatedpartitions"
SHRINKS = "kafka_server_replicamanager_isrshrinks_total"
EXPANDS = "kafka_server_replicamanager_isrexpands_total"


def alter_partition(port: int, broker_id: int, broker_epoch: int, topic: str,
                    leader_epoch: int, isr: list[int], partition_epoch: int
                    ) -> dict[str, Any]:
    """A leader's AlterPartition (v1, as the IsrChanger sends it) for partition 0 of
    `topic`: the partition's answer."""
    resp = request(port, ApiKey.ALTER_PARTITION, 1, {
        "broker_id": broker_id, "broker_epoch": broker_epoch, "topics": [{
            "topic_name": topic, "partitions": [{
                "partition_index": 0, "leader_epoch": leader_epoch, "new_isr": isr,
                "leader_recovery_state": 0, "partition_epoch": partition_epoch}]}]})
    assert resp["error_code"] == ErrorCode.NONE, resp
    answer: dict[str, Any] = resp["topics"][0]["partitions"][0]
    return answer


def test_a_request_sent_again_after_it_was_applied_gets_the_current_state(
        broker_factory: Any, zookeeper: ZooKeeperServer, zk: Any) -> None:
    cluster = start_cluster(broker_factory, zookeeper)
    controller = wait_until(lambda: c if (c := cluster.controller()) in cluster.brokers
                            else None, 30, "every broker naming the controller")
    leader, follower = sorted(b for b in cluster.brokers if b != controller)
    create_topic(cluster, "lost", {0: [leader, follower, controller]})
    wait_until(lambda: len(partition_state(zk, cluster.chroot, "lost", 0)[0]["isr"]) == 3,
               30, "the full ISR")
    state, version = partition_state(zk, cluster.chroot, "lost", 0)
    epoch = state["leader_epoch"]
    port = cluster.brokers[controller].port
    broker_epoch = zk.exists(f"{cluster.chroot}/brokers/ids/{leader}").czxid
    shrunk = [leader, controller]

    first = alter_partition(port, leader, broker_epoch, "lost", epoch, shrunk, version)
    assert (first["error_code"], first["partition_epoch"]) == (ErrorCode.NONE, version + 1)

    # the same request again (its answer lost): the state it asked for, no second write
    again = alter_partition(port, leader, broker_epoch, "lost", epoch, shrunk, version)
    assert ErrorCode(again["error_code"]) == ErrorCode.NONE, again
    assert (again["partition_epoch"], again["leader_epoch"], sorted(again["isr"])) == (
        version + 1, epoch, sorted(shrunk))
    now, now_version = partition_state(zk, cluster.chroot, "lost", 0)
    assert (now["isr"], now_version) == (shrunk, version + 1)

    # a stale partition epoch asking for another ISR is still fenced
    other = alter_partition(port, leader, broker_epoch, "lost", epoch,
                            [leader, follower, controller], version)
    assert ErrorCode(other["error_code"]) == ErrorCode.INVALID_UPDATE_VERSION
    # a partition epoch ahead of the controller's: it is behind (Kafka: NOT_CONTROLLER)
    ahead = alter_partition(port, leader, broker_epoch, "lost", epoch,
                            [leader, follower, controller], version + 5)
    assert ErrorCode(ahead["error_code"]) == ErrorCode.NOT_CONTROLLER
    assert partition_state(zk, cluster.chroot, "lost", 0)[1] == version + 1


def test_after_a_zookeeper_outage_the_leader_takes_the_isr_it_asked_for(
        broker_factory: Any, own_zookeeper: ZooKeeperServer) -> None:
    """The tester's case: ZooKeeper stops, a follower dies, the leader's shrink waits at
    the controller past the leader's timeout, ZooKeeper returns and the controller
    applies it. The leader must end with ZooKeeper's ISR (under-replicated 1, one shrink
    counted: the change committed once), acks=all writes complete without the dead
    follower; the follower comes back, rejoins, dies again, and the ISR shrinks again."""
    from kazoo.client import KazooClient

    cluster = start_metered_cluster(
        broker_factory, own_zookeeper, zookeeper_session_timeout_ms="10000",
        replica_lag_time_max_ms="2000", replica_fetch_backoff_ms="100")
    controller, leader, victim = cluster.roles()
    create_topic(cluster, "st", {0: [leader, victim, controller]})
    watcher = KazooClient(hosts=cluster.zookeeper_connect)
    watcher.start(timeout=15)
    try:
        def isr() -> list[int]:
            return sorted(partition_state(watcher, "", "st", 0)[0]["isr"])

        wait_until(lambda: isr() == [1, 2, 3], 30, "the full ISR")
        assert produce_acks_all(cluster.bootstrap, "st", 0, [b"before"]) == []

        own_zookeeper.stop()
        cluster.brokers[victim].kill()
        # the leader's shrink is with the controller, which cannot write it: the leader
        # gives up waiting for this answer (REQUEST_TIMEOUT_S) while ZooKeeper is away
        wait_until(lambda: "AlterPartition to the controller failed (TimeoutError"
                   in cluster.brokers[leader].log(), 40, "the leader's request to time out")
        own_zookeeper.start()
        wait_until(lambda: watcher.connected and isr() == sorted([leader, controller]), 30,
                   "the controller to apply the shrink")
        # the leader knows it: its own ISR is ZooKeeper's
        wait_until(lambda: cluster.metric(leader, URP) == 1, 30,
                   "the leader counting its partition under-replicated")
        assert cluster.metric(leader, SHRINKS) == 1  # committed once, however often sent
        assert produce_acks_all(cluster.bootstrap, "st", 0, [b"during"]) == []

        cluster.brokers[victim].start()
        wait_until(lambda: isr() == [1, 2, 3], 60, "the follower back in the ISR")
        wait_until(lambda: cluster.metric(leader, URP) == 0, 30, "the leader's full ISR")
        cluster.brokers[victim].kill()
        wait_until(lambda: isr() == sorted([leader, controller]), 30, "the shrink again")
        assert produce_acks_all(cluster.bootstrap, "st", 0, [b"after"]) == []
        assert (cluster.metric(leader, SHRINKS), cluster.metric(leader, EXPANDS)) == (2, 1)
    finally:
        watcher.stop()
        watcher.close()


def test_a_shrink_applied_after_the_follower_came_back_is_learnt_and_undone(
        broker_factory: Any, own_zookeeper: ZooKeeperServer) -> None:
    """The answer to a shrink is lost while ZooKeeper is away, and the follower it drops
    is back and caught up before ZooKeeper returns. The leader sends the shrink again
    until answered (Kafka's AlterPartitionManager retries until a response), so it learns
    the ISR ZooKeeper holds and lets the follower rejoin. It used to drop the change on the
    timeout and keep the follower in its own ISR, so ZooKeeper's ISR stayed short for
    ever (no shrink to retry, no expansion to propose)."""
    from kazoo.client import KazooClient

    cluster = start_metered_cluster(
        broker_factory, own_zookeeper, zookeeper_session_timeout_ms="10000",
        replica_lag_time_max_ms="2000", replica_fetch_backoff_ms="100")
    controller, leader, follower = cluster.roles()
    create_topic(cluster, "back", {0: [leader, follower, controller]})
    watcher = KazooClient(hosts=cluster.zookeeper_connect)
    watcher.start(timeout=15)
    try:
        def isr() -> tuple[list[int], int]:
            state, version = partition_state(watcher, "", "back", 0)
            return sorted(state["isr"]), version

        wait_until(lambda: isr()[0] == [1, 2, 3], 30, "the full ISR")
        assert produce_acks_all(cluster.bootstrap, "back", 0, [b"before"]) == []
        version = isr()[1]
        proc = cluster.brokers[follower].proc
        assert proc is not None

        own_zookeeper.stop()
        proc.send_signal(signal.SIGSTOP)
        try:
            wait_until(lambda: f"followers [{follower}] are behind" in
                       cluster.brokers[leader].log(), 30, "the leader to propose the shrink")
        finally:
            proc.send_signal(signal.SIGCONT)  # back, and fetching, before any answer
        wait_until(lambda: "AlterPartition to the controller failed (TimeoutError"
                   in cluster.brokers[leader].log(), 40, "the leader's request to time out")
        own_zookeeper.start()
        # the controller applies the shrink; the leader learns it, then the follower
        # (caught up all along) rejoins: two writes
        wait_until(lambda: watcher.connected and isr() == ([1, 2, 3], version + 2), 30,
                   "the shrink applied, then the follower back in ZooKeeper's ISR")
        wait_until(lambda: cluster.metric(leader, URP) == 0, 30, "the leader's full ISR")
        assert (cluster.metric(leader, SHRINKS), cluster.metric(leader, EXPANDS)) == (1, 1)
        assert produce_acks_all(cluster.bootstrap, "back", 0, [b"after"]) == []
    finally:
        watcher.stop()
        watcher.close()
