"""The tester's c17 on a real cluster: a compacted partition whose idempotent producer's
last batch the cleaner reduced to an empty batch (every record superseded); the follower's
disk is replaced and it copies the leader's log again; it must know the producer's last
sequence from that empty batch (its last offset delta, not its record count of 0), so that
after the leader dies the producer's retry of its last acknowledged batch is answered as a
duplicate by the new leader instead of being appended again. Two real brokers on a real
ZooKeeper, raw idempotent produce with an explicit producer id, epoch and sequence."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.memory_records import iter_batches
from tests.broker.wire import Wire
from tests.cluster.cluster_helpers import metadata, request, start_cluster
from tests.cluster.zk import ZooKeeperServer
from tests.polling import wait_until

TOPIC = "compacted-rf2"
PAD = b"p" * 300


def _kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], capture_output=True,
                          text=True, timeout=60)


def keyed(items: list[tuple[bytes, bytes]], **producer: int) -> bytes:
    b = RecordBatchBuilder(**producer)
    now = int(time.time() * 1000)
    for k, v in items:
        b.append(now, k, v)
    return b.build()


def values(w: Wire) -> set[bytes]:
    out: set[bytes] = set()
    offset = 0
    while True:
        p = w.fetch(TOPIC, offset)
        got = list(iter_batches(bytes(p["records"] or b"")))
        if not got:
            return out
        out |= {bytes(r.value) for b in got for r in b}
        offset = got[-1].last_offset + 1


def last_sequence(port: int, pid: int) -> int | None:
    r = request(port, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": TOPIC, "partition_indexes": [0]}]})
    part = r["topics"][0]["partitions"][0]
    return next((s["last_sequence"] for s in part["active_producers"]
                 if s["producer_id"] == pid), None)


def isr(port: int) -> list[int]:
    md = metadata(port, [TOPIC])
    return list(md["topics"][0]["partitions"][0]["isr_nodes"])


def test_a_rebuilt_follower_keeps_the_sequence_of_a_cleaned_away_batch(
        broker_factory: Any, zookeeper: ZooKeeperServer) -> None:
    cluster = start_cluster(broker_factory, zookeeper, (1, 2), log_cleaner_backoff_ms="100",
                            replica_fetch_backoff_ms="100")
    r = _kafkactl("topics", "create", "-t", TOPIC, "--partitions", "1",
                  "--replication-factor", "2", "--config", "cleanup.policy=compact",
                  "--config", "segment.bytes=1024", "--config", "delete.retention.ms=0",
                  "--config", "min.cleanable.dirty.ratio=0.01", "-b", cluster.bootstrap)
    assert r.returncode == 0, r.stderr
    leader_id = cluster.wait_for_leaders(TOPIC, 1)[0]
    follower_id = 2 if leader_id == 1 else 1
    leader, follower = cluster.brokers[leader_id], cluster.brokers[follower_id]
    with Wire(leader.bootstrap) as w:
        pid = int(w.request(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000})["producer_id"])
        last = keyed([(b"X", b"x1"), (b"Y", b"y1")], producer_id=pid, producer_epoch=0,
                     base_sequence=0)
        r = w.produce(TOPIC, last, acks=-1)
        assert r["error_code"] == 0, r
        offset = int(r["base_offset"])
        for i in range(4):
            for k in (b"X", b"Y"):
                assert w.produce(TOPIC, keyed([(k, b"new-%d" % i + PAD)]), acks=-1)[
                    "error_code"] == 0
        for i in range(8):
            assert w.produce(TOPIC, keyed([(b"fill-%d" % i, PAD)]), acks=-1)[
                "error_code"] == 0
        wait_until(lambda: not {b"x1", b"y1"} & values(w), 30, "the leader's log cleaned")

    follower.stop()  # its disk is replaced
    shutil.rmtree(follower.data_dir / f"{TOPIC}-0")
    follower.start()
    wait_until(lambda: sorted(isr(leader.port)) == [1, 2], 30, "the follower back in the ISR")
    assert last_sequence(follower.port, pid) == 1

    leader.kill()
    cluster.wait_for_leaders(TOPIC, 1, expect=lambda ls: ls[0] == follower_id)
    with Wire(follower.bootstrap) as w:
        again = w.produce(TOPIC, last, acks=1)  # the producer retries its last batch
        assert (again["error_code"], again["base_offset"]) == (0, offset), again
