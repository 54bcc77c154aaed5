"""cleanup.policy=compact,delete on a real broker: a segment the cleaner emptied (0 bytes)
does not stop time retention for good. Kafka's deletableSegments stops only at an empty
LAST segment; an empty older one is aged by its file's mtime (the cleaner keeps the
replaced segment's), and the segments after it go too."""

from __future__ import annotations

import time
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.cluster.cluster_helpers import request
from tests.polling import wait_until

TOPIC = "cd"
TOPIC_RESOURCE, SET = 2, 0


def _offset(port: int, timestamp: int) -> int:
    resp = request(port, ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    p = resp["topics"][0]["partitions"][0]
    assert p["error_code"] == ErrorCode.NONE, p
    return int(p["offset"])


def test_time_retention_goes_past_a_segment_the_cleaner_emptied(broker_factory: Any) -> None:
    from kafka import KafkaProducer

    broker = broker_factory(log_retention_check_interval_ms="100",
                            log_cleaner_backoff_ms="100", log_segment_delete_delay_ms="0")
    resp = request(broker.port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": [
                        {"name": "cleanup.policy", "value": "compact,delete"},
                        {"name": "segment.bytes", "value": "400"},
                        {"name": "min.cleanable.dirty.ratio", "value": "0.01"},
                        {"name": "retention.ms", "value": "3600000"}]}],
        "timeout_ms": 30000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == ErrorCode.NONE, resp
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, batch_size=200)
    now = int(time.time() * 1000)
    for i in range(40):
        p.send(TOPIC, key=b"k%d" % (i % 4), value=b"v" * 50, partition=0, timestamp_ms=now)
    p.flush(30)
    p.close(5)
    first = broker.data_dir / f"{TOPIC}-0" / "00000000000000000000.log"
    wait_until(lambda: first.exists() and first.stat().st_size == 0, 60,
               "the cleaner to empty the first segment")
    assert _offset(broker.port, -2) == 0
    # every record and every file is now older than retention.ms
    resp = request(broker.port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": TOPIC, "configs": [
            {"name": "retention.ms", "config_operation": SET, "value": "1"}]}],
        "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0, resp
    wait_until(lambda: _offset(broker.port, -2) == 40, 30,
               "time retention to delete every segment (log start = log end = 40)")
