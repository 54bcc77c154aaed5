"""AlterReplicaLogDirs in a ZooKeeper cluster (issue 34): a follower's replica moves to the
other log dir of its broker while a producer writes with acks=all; the follower keeps
replicating into the moved log (its appends come from the replica fetcher), is back in the
ISR afterwards, and a read from it after it becomes the leader returns every acknowledged
record."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests import zygote
from tests.broker.test_alter_replica_log_dirs import BackgroundProducer, produce
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, Cluster, metadata
from tests.cluster.test_config_changes import create_topic
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

pytest.importorskip("confluent_kafka")


def isr(zk: Any, chroot: str, topic: str) -> list[int]:
    data, _ = zk.get(f"{chroot}/brokers/topics/{topic}/partitions/0/state")
    return sorted(json.loads(data)["isr"])


def test_a_followers_replica_moves_while_it_replicates(
        broker_factory: Any, zookeeper: ZooKeeperServer, zk: Any, tmp_path: Path) -> None:
    chroot = f"/c-{uuid.uuid4().hex[:8]}"
    connect = zookeeper.connect + chroot
    dirs = {i: [tmp_path / f"b{i}-a", tmp_path / f"b{i}-b"] for i in (1, 2)}
    brokers = {i: broker_factory(
        zookeeper_connect=connect, broker_id=str(i),
        zookeeper_session_timeout_ms=str(SESSION_TIMEOUT_MS),
        log_dirs=",".join(map(str, dirs[i])), log_segment_bytes=str(64 * 1024),
        file_delete_delay_ms="200") for i in (1, 2)}
    cluster = Cluster(connect, chroot, brokers)
    wait_until(lambda: cluster.controller() in brokers and all(
        len(metadata(b.port, [])["brokers"]) == 2 for b in cluster.live()), 30, "a cluster")
    create_topic(cluster, "replicated", {0: [1, 2]})  # led by 1, followed by 2
    wait_until(lambda: isr(zk, chroot, "replicated") == [1, 2], 30, "a full ISR")
    produce(brokers[1].bootstrap, "replicated",
            [b"old-%06d-" % i + b"z" * 200 for i in range(5000)])

    def follower_dir(future: bool = False) -> Path | None:
        r = zygote.run(["log-dirs", "describe", "-t", "replicated", "--broker", "2",
                        "--json", "-b", brokers[1].bootstrap], text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        for d in json.loads(r.stdout):
            for x in d["replicas"]:
                if x["future"] == future:
                    return Path(d["log_dir"])
        return None

    src = follower_dir()
    assert src is not None
    dest = next(d.absolute() for d in dirs[2] if d.absolute() != src)
    writer = BackgroundProducer(brokers[1].bootstrap, "replicated")
    writer.start()
    try:
        r = zygote.run(["log-dirs", "move", "-t", "replicated", "-p", "0", "--broker", "2",
                        "--dir", str(dest), "--wait", "-b", brokers[1].bootstrap],
                       text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    finally:
        writer.stop.set()
        writer.join(120)
    assert writer.failed == [] and writer.acked
    assert follower_dir() == dest and follower_dir(future=True) is None
    assert not (src / "replicated-0").exists()
    wait_until(lambda: isr(zk, chroot, "replicated") == [1, 2], 30, "the follower in the ISR")
    # the moved replica has everything: make it the leader and read from it
    brokers[1].stop()
    cluster.wait_for_leaders("replicated", 1, expect=lambda lead: lead[0] == 2)
    r = zygote.run(["consume", "-t", "replicated", "-p", "0", "-o", "beginning", "-e", "-q",
                    "-b", brokers[2].bootstrap], timeout=120)
    assert r.returncode == 0, r.stderr
    got = set(bytes(r.stdout).splitlines())
    assert {b"old-%06d-" % i + b"z" * 200 for i in range(5000)} <= got
    assert set(writer.acked) <= got
