"""The leader-epoch cache follows the log start on every replica (three real brokers):
after DeleteRecords into the second of three leader epochs, each replica's
`leader-epoch-checkpoint` starts at the new log start (Kafka's truncateFromStart: the first
epoch gone, the second moved to the log start; the followers when their log start follows
the leader's), OffsetForLeaderEpoch for the old epochs answers as Kafka's does (an epoch
older than every entry ends where the first entry starts: the log start), and it stays so
after the leader dies and another replica leads from its own cache."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.builder import RecordBatchBuilder
from tests.cluster.cluster_helpers import (
    SESSION_TIMEOUT_MS,
    Cluster,
    leaders,
    request,
    start_cluster,
)
from tests.cluster.test_replication import OVERRIDES, create, full_isr
from tests.polling import wait_until

TOPIC = "epoch-trim"
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
BATCHES = 10  # a batch of one record each, per leader epoch


def _produce(cluster: Cluster, leader: int, n: int) -> None:
    for i in range(n):
        b = RecordBatchBuilder()
        b.append(int(time.time() * 1000), None, b"e%d" % i * 50)
        resp = request(cluster.brokers[leader].port, ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 10000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": 0, "records": b.build()}]}]})
        part = resp["responses"][0]["partition_responses"][0]
        assert part["error_code"] == ErrorCode.NONE, part


def _epochs(cluster: Cluster, broker: int) -> list[tuple[int, int]]:
    path = cluster.brokers[broker].data_dir / f"{TOPIC}-0" / "leader-epoch-checkpoint"
    lines = Path(path).read_text().split("\n")
    return [(int(e), int(o)) for e, o in (ln.split() for ln in lines[2:2 + int(lines[1])])]


def _end_offset_for(cluster: Cluster, broker: int, epoch: int) -> tuple[int, int]:
    resp = request(cluster.brokers[broker].port, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
        "replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch}]}]})
    p: dict[str, Any] = resp["topics"][0]["partitions"][0]
    assert p["error_code"] == ErrorCode.NONE, p
    return p["leader_epoch"], p["end_offset"]


def _list_offset(cluster: Cluster, broker: int, timestamp: int) -> tuple[int, int]:
    """ListOffsets v7 of partition 0 at `timestamp`: (offset, leader_epoch)."""
    resp = request(cluster.brokers[broker].port, ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    p: dict[str, Any] = resp["topics"][0]["partitions"][0]
    assert p["error_code"] == ErrorCode.NONE, p
    return p["offset"], p["leader_epoch"]


def _new_leader(cluster: Cluster) -> int:
    """Kill the leader (SIGKILL), wait for another replica to lead, start it again as a
    follower with the whole ISR back; the new leader."""
    old = leaders(cluster.live()[0].port, TOPIC)[0]
    cluster.brokers[old].kill()
    new = wait_until(lambda: (lead := leaders(cluster.live()[0].port, TOPIC).get(0))
                     not in (None, -1, old) and lead, SESSION_TIMEOUT_MS / 1000 + 20,
                     "a new leader from the ISR")
    cluster.brokers[old].start()
    full_isr(cluster, TOPIC, 1, timeout=60)
    return int(new)


def test_every_replica_trims_its_leader_epochs_with_the_log_start(broker_factory, zookeeper  # type: ignore[no-untyped-def]
                                                                  ) -> None:
    cluster = start_cluster(broker_factory, zookeeper, log_retention_check_interval_ms="100",
                            **OVERRIDES)
    create(cluster, TOPIC, 1, configs=("segment.bytes=2048", "file.delete.delay.ms=100"))
    full_isr(cluster, TOPIC, 1)
    leader = leaders(cluster.live()[0].port, TOPIC)[0]
    _produce(cluster, leader, BATCHES)  # epoch 0: offsets 0..9
    leader = _new_leader(cluster)
    _produce(cluster, leader, BATCHES)  # epoch 1: 10..19
    leader = _new_leader(cluster)
    _produce(cluster, leader, BATCHES)  # epoch 2: 20..29
    full = [(0, 0), (1, BATCHES), (2, 2 * BATCHES)]
    wait_until(lambda: all(_epochs(cluster, b) == full for b in cluster.brokers), 30,
               "every replica's epochs")
    assert _end_offset_for(cluster, leader, 0) == (0, BATCHES)
    # ListOffsets names the epoch that wrote the offset it answers (Kafka's), the leader's
    # own only for the log end
    assert _list_offset(cluster, leader, EARLIEST) == (0, 0)
    assert _list_offset(cluster, leader, 1) == (0, 0)  # the first record at or after 1 ms
    assert _list_offset(cluster, leader, MAX_TIMESTAMP) == (3 * BATCHES - 1, 2)
    assert _list_offset(cluster, leader, LATEST) == (3 * BATCHES, 2)

    start = BATCHES + 5  # inside epoch 1
    resp = request(cluster.brokers[leader].port, ApiKey.DELETE_RECORDS, 2, {
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "offset": start}]}],
        "timeout_ms": 20000}, timeout=30)
    row = resp["topics"][0]["partitions"][0]
    assert (row["error_code"], row["low_watermark"]) == (ErrorCode.NONE, start), row
    trimmed = [(1, start), (2, 2 * BATCHES)]
    wait_until(lambda: all(_epochs(cluster, b) == trimmed for b in cluster.brokers), 30,
               "every replica's epochs trimmed to the log start")
    # Kafka's answers: epoch 0 is older than every entry, so it ends where the first entry
    # starts, the log start (it ended at 10 before); the others as before
    assert _end_offset_for(cluster, leader, 0) == (0, start)
    assert _end_offset_for(cluster, leader, 1) == (1, 2 * BATCHES)
    assert _end_offset_for(cluster, leader, 2) == (2, 3 * BATCHES)
    assert _list_offset(cluster, leader, EARLIEST) == (start, 1)

    # the leader dies: the next one answers from its own (trimmed) cache; the old one
    # restarts with its checkpoint as it was
    leader = _new_leader(cluster)
    assert _end_offset_for(cluster, leader, 0) == (0, start)
    assert _end_offset_for(cluster, leader, 1) == (1, 2 * BATCHES)
    wait_until(lambda: all(_epochs(cluster, b)[:2] == trimmed for b in cluster.brokers), 30,
               "every replica's epochs still trimmed")
