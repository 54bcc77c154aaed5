"""Retention never deletes a segment at or above the high watermark (Kafka's
UnifiedLog.deletableSegments: highWatermark >= the segment's upper bound), so the log
start never passes the high watermark. Two real brokers: the follower is frozen (SIGSTOP,
still in the ISR and registered: long lag time and session timeout), records older than
retention.ms are produced with acks=1; the leader's high watermark stays where the
follower left it and retention must leave those segments. A second topic of one replica
on the same leader, produced after, is deleted by the same retention passes: proof that
they ran. Once the follower runs again the high watermark moves and the records go."""

from __future__ import annotations

import signal
import time
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests import zygote
from tests.cluster.cluster_helpers import leaders, request, start_cluster
from tests.cluster.test_replication import create, full_isr
from tests.polling import wait_until

EARLIEST, LATEST = -2, -1
OVERRIDES = {"replica_lag_time_max_ms": "120000", "zookeeper_session_timeout_ms": "120000",
             "replica_fetch_backoff_ms": "100", "log_retention_check_interval_ms": "100",
             "log_segment_delete_delay_ms": "0", "offsets_topic_replication_factor": "2"}


def _offset(port: int, topic: str, timestamp: int) -> int:
    resp = request(port, ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    p = resp["topics"][0]["partitions"][0]
    assert p["error_code"] == ErrorCode.NONE, p
    return int(p["offset"])


def _produce_old(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    old = int(time.time() * 1000) - 3_600_000
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0,
                  "batch.size": 300, "message.timeout.ms": 30000})
    errors: list[Any] = []
    for _ in range(count):
        p.produce(topic, b"x" * 50, partition=0, timestamp=old,
                  on_delivery=lambda e, m: errors.append(e) if e else None)
    assert p.flush(60) == 0 and not errors, errors


def test_retention_stops_at_the_high_watermark(broker_factory: Any, zookeeper: Any) -> None:
    cluster = start_cluster(broker_factory, zookeeper, ids=(1, 2), **OVERRIDES)
    create(cluster, "held", 1, rf=2, configs=("retention.ms=5000", "segment.bytes=1000"))
    full_isr(cluster, "held", 1, size=2)
    leader = leaders(cluster.live()[0].port, "held")[0]
    follower = next(i for i in cluster.brokers if i != leader)
    port = cluster.brokers[leader].port
    r = zygote.run(["topics", "create", "-b", cluster.bootstrap, "-t", "probe2",
                    "--replica-assignment", str(leader), "--config", "retention.ms=5000",
                    "--config", "segment.bytes=1000"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr  # (one replica, on the same leader)
    cluster.wait_for_leaders("probe2", 1)
    proc = cluster.brokers[follower].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        _produce_old(cluster.brokers[leader].bootstrap, "held", 20)
        assert _offset(port, "held", LATEST) == 0  # the high watermark: the follower's
        _produce_old(cluster.brokers[leader].bootstrap, "probe2", 20)
        wait_until(lambda: _offset(port, "probe2", EARLIEST) == 20, 60,
                   "retention to delete the probe topic's old records")
        # the passes that did it saw "held" too: nothing above its high watermark went
        assert _offset(port, "held", EARLIEST) <= _offset(port, "held", LATEST) == 0
    finally:
        proc.send_signal(signal.SIGCONT)
    wait_until(lambda: _offset(port, "held", LATEST) == 20, 60, "the high watermark to move")
    wait_until(lambda: _offset(port, "held", EARLIEST) == 20, 60,
               "retention to delete the committed old records")
