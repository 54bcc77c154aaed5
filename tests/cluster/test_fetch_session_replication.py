"""Replication through incremental fetch sessions (KIP-227) on real brokers and ZooKeeper.

Followers keep one fetch session per leader: after the first full fetch, their fetches list
only changed partitions, so idle partitions are left out of every request for far longer
than replica.lag.time.max.ms; the leader must still count each fetch as the follower's
position on every partition of the session, or the ISR would shrink. Leader changes, a
follower restart, a reassignment away and back, and a leader restart (its sessions lost)
lose no record and leave the ISR whole."""

from __future__ import annotations

import time
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.cluster.cluster_helpers import request
from tests.cluster.isr_cluster import start_metered_cluster
from tests.cluster.test_replication import (
    consume_all,
    create,
    full_isr,
    partition_state,
    produce_acks_all,
)
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

# long enough that a follower slowed by a loaded machine (the suite on 2 cores) is not
# out of the ISR by its own delay; the writes below still outlast it three times
LAG_MS = 3000
OVERRIDES = {"replica_lag_time_max_ms": str(LAG_MS), "replica_fetch_backoff_ms": "100",
             "default_replication_factor": "3", "offsets_topic_replication_factor": "3"}
SHRINKS = "kafka_server_replicamanager_isrshrinks_total"
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


def _produce(bootstrap: str, topic: str, lines: list[str]) -> None:
    r = produce_acks_all(bootstrap, topic, lines)
    assert r.returncode == 0, r.stderr


def test_idle_partitions_stay_in_sync_while_incremental_fetches_omit_them(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_metered_cluster(broker_factory, zookeeper, **OVERRIDES)
    create(cluster, "idle", 60)
    create(cluster, "hot", 1)
    full_isr(cluster, "idle", 60)
    full_isr(cluster, "hot", 1)
    shrinks = {b: cluster.metric(b, SHRINKS) for b in cluster.brokers}
    # each leader holds a session of each of its two followers, with its idle partitions
    wait_until(lambda: all(cluster.metric(b, SESSIONS) >= 2 for b in cluster.brokers), 30,
               "every leader holding its followers' fetch sessions")
    assert all(cluster.metric(b, CACHED) >= 20 for b in cluster.brokers)
    lines: list[str] = []
    start = time.monotonic()
    # writes to one partition for several lag times: every follower fetch is incremental
    # and lists "hot" alone (the idle partitions' fetch state never changes)
    while time.monotonic() - start < 3 * LAG_MS / 1000:
        batch = [f"r{len(lines) + i}" for i in range(20)]
        _produce(cluster.bootstrap, "hot", batch)
        lines += batch
    assert {b: cluster.metric(b, SHRINKS) for b in cluster.brokers} == shrinks
    full_isr(cluster, "idle", 60, timeout=1)
    assert sorted(consume_all(cluster.bootstrap, "hot")) == sorted(lines)


def _reassign(port: int, topic: str, partition: int, replicas: list[int]) -> None:
    resp = request(port, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, {
        "timeout_ms": 30000, "topics": [{"name": topic, "partitions": [
            {"partition_index": partition, "replicas": replicas}]}]})
    assert resp["error_code"] == 0, resp
    assert resp["responses"][0]["partitions"][0]["error_code"] == 0, resp


def test_sessions_through_leader_changes_restarts_and_reassignment(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_metered_cluster(broker_factory, zookeeper, **OVERRIDES)
    create(cluster, "moves", 4)
    create(cluster, "quiet", 30)
    full_isr(cluster, "moves", 4)
    full_isr(cluster, "quiet", 30)
    lines: list[str] = []

    def write(tag: str) -> None:
        batch = [f"{tag}{i}" for i in range(100)]
        _produce(cluster.bootstrap, "moves", batch)
        lines.extend(batch)

    write("a")
    # a follower restart: broker 3 stops (its leaderships move), comes back as a follower
    # of everything and starts new sessions with full fetches
    third = cluster.brokers[3]
    assert third.stop() == 0
    wait_until(lambda: all(s["leader"] in (1, 2) for s in
                           partition_state(cluster, "moves").values()), 30,
               "leaders off broker 3")
    write("b")
    third.start()
    full_isr(cluster, "moves", 4, timeout=60)
    full_isr(cluster, "quiet", 30, timeout=60)
    write("c")
    # the restarted broker leads again (preferred leaders): its followers' sessions with
    # the old process are gone (FETCH_SESSION_ID_NOT_FOUND, or a full fetch after the
    # connection broke) and are made again
    r = zygote.run(["rebalance", "--preferred-leaders", "-b", cluster.bootstrap],
                   text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: 3 in {s["leader"] for s in partition_state(cluster, "moves").values()}
               and 3 in {s["leader"] for s in partition_state(cluster, "quiet").values()},
               30, "broker 3 leading again")
    write("d")
    wait_until(lambda: cluster.metric(3, SESSIONS) >= 2, 30,
               "broker 3 holding its followers' new sessions")
    # a partition reassigned away from a follower and back (forgotten, then re-added)
    controller = cluster.brokers[cluster.controller()]
    state = partition_state(cluster, "moves")[0]
    leader = state["leader"]
    away = [leader, *[b for b in (1, 2, 3) if b != leader][:1]]
    _reassign(controller.port, "moves", 0, away)
    wait_until(lambda: partition_state(cluster, "moves")[0]["replicas"] == sorted(away), 30,
               "partition 0 moved off a follower")
    write("e")
    _reassign(controller.port, "moves", 0, [leader, *[b for b in (1, 2, 3) if b != leader]])
    full_isr(cluster, "moves", 4, timeout=60)
    write("f")
    # a leader killed: its partitions move, and it comes back as a follower
    victim = partition_state(cluster, "moves")[1]["leader"]
    cluster.brokers[victim].kill()  # type: ignore[index]
    wait_until(lambda: all(s["leader"] not in (-1, victim) for s in
                           partition_state(cluster, "moves").values()), 60,
               "new leaders after the kill")
    write("g")
    cluster.brokers[victim].start()  # type: ignore[index]
    full_isr(cluster, "moves", 4, timeout=60)
    full_isr(cluster, "quiet", 30, timeout=60)
    write("h")
    got = consume_all(cluster.bootstrap, "moves")
    assert sorted(got) == sorted(lines), (len(got), len(lines))
