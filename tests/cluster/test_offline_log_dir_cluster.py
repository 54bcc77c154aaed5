"""KIP-112 in a ZooKeeper cluster: a broker restarted with one of its log dirs unusable
answers the controller's LeaderAndIsr with KAFKA_STORAGE_ERROR for the replicas that may be
there (it makes no empty log for them elsewhere); the controller moves their leadership to
another in-sync replica, takes them out of the ISR and names them offline replicas, so
writes with acks=all go on. A topic deleted meanwhile stays pending on that broker (its
StopReplica answers KAFKA_STORAGE_ERROR for them) and is deleted from the repaired dir once
it is back. Repaired and restarted, the broker catches up and rejoins."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata
from tests.cluster.test_config_changes import create_topic
from tests.cluster.test_ready_caught_up import ready
from tests.cluster.zk import ZooKeeperServer
from tests.conftest import free_port
from tests.polling import wait_until

pytest.importorskip("confluent_kafka")

PARTITIONS = 4


def _produce(bootstrap: str, values: dict[int, list[bytes]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "message.timeout.ms": 30000})
    for partition, vs in values.items():
        for v in vs:
            p.produce("t", v, partition=partition)
    assert p.flush(60) == 0


def _read(bootstrap: str, partition: int, count: int) -> list[bytes]:
    """The first `count` records of the partition (fewer if they do not come in 30 s)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("t", partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(count - len(out), timeout=1.0):
                assert m.error() is None, m.error()
                out.append(m.value())
        return out
    finally:
        c.close()


def _partitions(cluster: Cluster) -> dict[int, dict[str, Any]]:
    [t] = metadata(next(iter(cluster.live())).port, ["t"])["topics"]
    return {p["partition_index"]: p for p in t["partitions"]}


def replicas_moved(cluster: Cluster, lost: list[int], kept: list[int]
                   ) -> dict[int, dict[str, Any]] | None:
    """t's partitions once broker 2's replicas of `lost` are offline (broker 1 leads them,
    alone in the ISR) and those of `kept` are in sync on both; else None."""
    parts = _partitions(cluster)
    ok = all(parts[p]["leader_id"] == 1 and parts[p]["isr_nodes"] == [1]
             and parts[p]["offline_replicas"] == [2] for p in lost) and all(
        sorted(parts[p]["isr_nodes"]) == [1, 2] and not parts[p]["offline_replicas"]
        for p in kept)
    return parts if ok else None


def test_replicas_in_an_offline_log_dir_lose_leadership_and_isr_then_return(
        broker_factory: Any, zookeeper: ZooKeeperServer, zk: Any, tmp_path: Path) -> None:
    chroot = f"/c-{uuid.uuid4().hex[:8]}"
    connect = zookeeper.connect + chroot
    dirs = [tmp_path / "b2-a", tmp_path / "b2-b"]
    settings = {"zookeeper_connect": connect,
                "zookeeper_session_timeout_ms": str(SESSION_TIMEOUT_MS)}
    metrics_port = free_port()
    brokers = {1: broker_factory(broker_id="1", **settings),
               2: broker_factory(broker_id="2", log_dirs=",".join(map(str, dirs)),
                                 metrics_listen=f"127.0.0.1:{metrics_port}", **settings)}
    cluster = Cluster(connect, chroot, brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 2 for b in cluster.live()), 30, "a cluster")
    create_topic(cluster, "t", {p: [2, 1] for p in range(PARTITIONS)})  # led by broker 2
    create_topic(cluster, "d", {p: [2] for p in range(PARTITIONS)})  # deleted while offline
    wait_until(lambda: all(sorted(p["isr_nodes"]) == [1, 2]
                           for p in _partitions(cluster).values()), 30, "full ISRs")
    before = {p: [b"before-%d-%d" % (p, i) for i in range(20)] for p in range(PARTITIONS)}
    _produce(cluster.bootstrap, before)
    lost = sorted(p for p in range(PARTITIONS) if (dirs[1] / f"t-{p}").is_dir())
    kept = sorted(set(range(PARTITIONS)) - set(lost))
    assert lost and kept

    assert brokers[2].stop() == 0
    (dirs[1] / ".lock").unlink()
    (dirs[1] / ".lock").mkdir()  # its `.lock` cannot be opened: the dir is offline
    brokers[2].start()

    wait_until(lambda: replicas_moved(cluster, lost, kept), 30,
               "the offline dir's replicas out of leadership and ISR")
    # /ready: not ready, and why: the replicas there are not "catching up" (they cannot).
    # The controller may move them before broker 2 has finished starting or heard from
    # the controller (then /ready says that)
    wait_until(lambda: not ready(metrics_port)[1].removeprefix("not ready: ").startswith(
        ("loading logs", "no metadata from the controller")), 30, "broker 2 through its start")
    code, text = ready(metrics_port)
    assert code == 503 and "catching up" not in text, text
    assert f"log dir(s) offline since the start ({dirs[1]})" in text, text
    assert f"{len(lost)} replica(s) there cannot rejoin their ISR until the broker restarts " \
        "with the dir repaired (" \
        + ", ".join(f"t-{p}" for p in lost) + ")" in text, text
    assert not any((dirs[0] / f"t-{p}").exists() for p in lost)  # none made elsewhere
    d_lost = [p for p in range(PARTITIONS) if (dirs[1] / f"d-{p}").is_dir()]
    assert d_lost
    admin = f"{chroot}/admin/delete_topics/d"
    zk.create(admin, makepath=True)  # what `topics delete` writes
    wait_until(lambda: not any((dirs[0] / f"d-{p}").exists() for p in range(PARTITIONS)),
               30, "the online replicas of d deleted")
    assert zk.exists(admin) is not None  # pending: the offline dir's replicas are unknown
    after = {p: [b"after-%d-%d" % (p, i) for i in range(20)] for p in range(PARTITIONS)}
    _produce(cluster.bootstrap, after)  # acks=all: the ISRs left can take them
    for p in range(PARTITIONS):
        assert _read(cluster.bootstrap, p, 40) == before[p] + after[p]

    assert brokers[2].stop() == 0
    (dirs[1] / ".lock").rmdir()  # repaired
    brokers[2].start()
    wait_until(lambda: all(sorted(p["isr_nodes"]) == [1, 2] and not p["offline_replicas"]
                           for p in _partitions(cluster).values()), 30,
               "the repaired replicas back in the ISR")
    wait_until(lambda: ready(metrics_port)[0] == 200, 30, "/ready 200 once repaired")
    wait_until(lambda: zk.exists(admin) is None and not any(
        x.name.startswith("d-") and not x.name.endswith("-delete")
        for x in dirs[1].iterdir()), 30, "d deleted from the repaired dir")
