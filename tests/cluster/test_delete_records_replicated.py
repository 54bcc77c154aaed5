"""DeleteRecords on a replicated partition (three real brokers): the records stay deleted
when leadership moves. The followers move their log start up to the leader's from each
fetch response and report theirs in their fetches; the DeleteRecords answers once every
live replica's log starts at the requested offset (the low watermark), REQUEST_TIMED_OUT
after its timeout_ms when a live follower does not get there; `cluster
verify-replicas` compares the replicas from there (it read from offset 0, which no replica
has any more), and a replica it cannot read is named with its partition."""

from __future__ import annotations

import json
import signal
import time

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests import zygote
from tests.cluster.cluster_helpers import SESSION_TIMEOUT_MS, leaders, request, start_cluster
from tests.cluster.test_replication import (
    OVERRIDES,
    consume_all,
    create,
    full_isr,
    produce_acks_all,
)
from tests.polling import wait_until

TOPIC = "purged"
EARLIEST = -2


def _earliest(port: int) -> int:
    resp = request(port, ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": EARLIEST}]}]})
    p = resp["topics"][0]["partitions"][0]
    assert p["error_code"] == ErrorCode.NONE, p
    return int(p["offset"])


def test_deleted_records_stay_deleted_when_the_leader_changes(broker_factory, zookeeper  # type: ignore[no-untyped-def]
                                                              ) -> None:
    cluster = start_cluster(broker_factory, zookeeper, **OVERRIDES)
    create(cluster, TOPIC, 1)
    full_isr(cluster, TOPIC, 1)
    r = produce_acks_all(cluster.bootstrap, TOPIC, [f"r{i}" for i in range(100)])
    assert r.returncode == 0, r.stderr
    leader = leaders(cluster.live()[0].port, TOPIC)[0]

    def delete_before(offset: int, timeout_ms: int) -> dict[str, int]:
        resp = request(cluster.brokers[leader].port, ApiKey.DELETE_RECORDS, 2, {
            "topics": [{"name": TOPIC, "partitions": [
                {"partition_index": 0, "offset": offset}]}],
            "timeout_ms": timeout_ms}, timeout=timeout_ms / 1000 + 10)
        (row,) = resp["topics"][0]["partitions"]
        return row  # type: ignore[no-any-return]

    # a follower that does not fetch (stopped, still live) holds the answer back until
    # timeout_ms: the records are gone on the leader, its low watermark is still 0
    follower = next(b for b in cluster.brokers if b != leader)
    proc = cluster.brokers[follower].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        row = delete_before(10, 1000)
        assert time.monotonic() - t0 >= 0.9
    finally:
        proc.send_signal(signal.SIGCONT)
    assert (row["error_code"], row["low_watermark"]) == (ErrorCode.REQUEST_TIMED_OUT, 0), row
    row = delete_before(50, 30000)
    # answered once every replica's log starts at 50 (the followers' fetches said so)
    assert (row["error_code"], row["low_watermark"]) == (ErrorCode.NONE, 50), row

    cluster.brokers[leader].stop()  # SIGTERM: a controlled shutdown moves the leadership
    port = cluster.live()[0].port
    new = wait_until(lambda: (lead := leaders(port, TOPIC).get(0)) not in (None, -1, leader)
                     and lead, SESSION_TIMEOUT_MS / 1000 + 20, "a new leader")
    assert _earliest(cluster.brokers[new].port) == 50  # its low watermark: 50, not 0
    assert consume_all(cluster.bootstrap, TOPIC) == [f"r{i}" for i in range(50, 100)]

    # the live replicas are compared from their log start, 50; the stopped one cannot be
    # read: said with its partition, without Python class names
    live = ",".join(b.bootstrap for b in cluster.live())
    v = zygote.run(["cluster", "verify-replicas", "-t", TOPIC, "--json", "-b", live],
                   text=True, timeout=60)
    assert v.returncode == 1, v.stderr
    (check,) = json.loads(v.stdout)
    assert (check["compared"], check["diverged_at"]) == (True, None)
    assert (check["checked_from"], check["checked_up_to"]) == (50, 100)
    assert list(check["errors"]) == [str(leader)]
    v = zygote.run(["cluster", "verify-replicas", "-t", TOPIC, "-b", live], text=True,
                   timeout=60)
    assert v.returncode == 1
    assert v.stdout.startswith(f"{TOPIC}-0\t"), v.stdout
    assert "from offset 50 up to offset 100" in v.stdout
    assert v.stderr.startswith(f"{TOPIC}-0: replica {leader}: "), v.stderr
    assert "Error" not in v.stderr
