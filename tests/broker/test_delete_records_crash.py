"""An acknowledged DeleteRecords survives a crash: the log-start-offset checkpoint is written
before the answer (Kafka writes it every log.flush.offset.checkpoint.interval.ms, and a crash
in between brings the deleted records back: an operator deleting records for privacy expects
them gone once acknowledged). Real broker, SIGKILL right after the answer, with the periodic
checkpoint an hour away."""

from __future__ import annotations

from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.polling import wait_until

from .wire import Wire, batch

TOPIC = "forgotten"


def earliest(w: Wire) -> int:
    r = w.request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]})
    p = r["topics"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    return int(p["offset"])


def test_deleted_records_stay_deleted_after_sigkill(broker_factory: Any) -> None:
    b = broker_factory(log_flush_offset_checkpoint_interval_ms="3600000")
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC)["error_code"] == 0
        for i in range(10):  # one segment: nothing below the new start can be deleted
            assert w.produce(TOPIC, batch([b"secret-%d" % i]))["error_code"] == 0
        r = w.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "offset": 6}]}], "timeout_ms": 5000})
        part = r["topics"][0]["partitions"][0]
        assert (part["error_code"], part["low_watermark"]) == (0, 6), r
    b.kill()
    b.start()
    with Wire(b.bootstrap) as w:
        wait_until(lambda: w.fetch(TOPIC, 6)["error_code"] == 0, 20, "the partition loaded")
        assert earliest(w) == 6
        below = w.fetch(TOPIC, 0)
        assert below["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE, below
        assert below["log_start_offset"] == 6
