"""A real broker takes a produced batch's max timestamp from its records, as Kafka's
LogValidator does (batch.setMaxTimestamp), not from the producer's header; and a producer
batch with the LogAppendTime attribute bit is refused on a LogAppendTime topic
(INVALID_TIMESTAMP) and has the bit cleared on a CreateTime one.

The lying producer is kafka-python with its batch builder patched (in this process only,
undone after each test): the header's MaxTimestamp is the first record's, or the
attributes carry bit 3. ListOffsets goes over the wire (by time, and MAX_TIMESTAMP -3);
the stored batch header is read back with a Fetch."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch_header import BATCH_HEADER
from tests.cluster.cluster_helpers import request
from tests.conftest import BrokerProcess
from tests.polling import wait_until

T = 1_700_000_000_000
MAX_TIMESTAMP = -3
EARLIEST, LATEST = -2, -1


@pytest.fixture
def lying_max(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python writes each batch's first timestamp as its max timestamp."""
    import kafka.record.default_records as dr

    write_header = dr.DefaultRecordBatchBuilder.write_header

    def lie(self: Any, *args: Any, **kwargs: Any) -> Any:
        self._max_timestamp = self._first_timestamp
        return write_header(self, *args, **kwargs)

    monkeypatch.setattr(dr.DefaultRecordBatchBuilder, "write_header", lie)


@pytest.fixture
def log_append_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python sets the LogAppendTime attribute bit on every batch."""
    import kafka.record.default_records as dr

    attributes = dr.DefaultRecordBatchBuilder._get_attributes

    def with_bit(self: Any, include_compression_type: bool = True) -> int:
        return int(attributes(self, include_compression_type)) | 0x08

    monkeypatch.setattr(dr.DefaultRecordBatchBuilder, "_get_attributes", with_bit)


def _create(broker: BrokerProcess, topic: str, **configs: str) -> None:
    resp = request(broker.port, ApiKey.CREATE_TOPICS, 5, {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": [{"name": k, "value": v}
                                                   for k, v in configs.items()]}],
        "timeout_ms": 30000, "validate_only": False})
    assert resp["topics"][0]["error_code"] == ErrorCode.NONE, resp


def _send(broker: BrokerProcess, topic: str, timestamps: list[int],
          compression: str | None = None) -> list[Any]:
    """One batch (linger, one flush) of these records; the futures' results or errors."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=60_000, retries=0,
                      compression_type=compression, batch_size=1 << 20)
    try:
        futures = [p.send(topic, b"m%d" % i, timestamp_ms=ts, partition=0)
                   for i, ts in enumerate(timestamps)]
        p.flush(30)
        out: list[Any] = []
        for f in futures:
            try:
                out.append(f.get(30))
            except Exception as e:  # noqa: BLE001 - the error is what some tests expect
                out.append(e)
        return out
    finally:
        p.close(5)


def _offset_for(broker: BrokerProcess, topic: str, timestamp: int) -> tuple[int, int]:
    resp = request(broker.port, ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    p = resp["topics"][0]["partitions"][0]
    assert p["error_code"] == ErrorCode.NONE, p
    return int(p["offset"]), int(p["timestamp"])


def _stored_header(broker: BrokerProcess, topic: str) -> tuple[Any, ...]:
    """The header of the first batch stored in the partition (read with a Fetch)."""
    resp = request(broker.port, ApiKey.FETCH, 4, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
    records = resp["responses"][0]["partitions"][0]["records"]
    return tuple(BATCH_HEADER.unpack_from(bytes(records), 0))


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_list_offsets_answer_from_the_records_not_the_header(
        broker: BrokerProcess, lying_max: None, compression: str | None) -> None:
    topic = f"lie-{compression}"
    _create(broker, topic)
    got = _send(broker, topic, [T + 100, T + 900, T + 500], compression)
    assert [m.offset for m in got] == [0, 1, 2], got
    header = _stored_header(broker, topic)
    assert (header[7], header[8]) == (T + 100, T + 900)  # first, max: the records'
    # Kafka: the first offset whose timestamp is >= the one asked for
    assert _offset_for(broker, topic, T + 50)[0] == 0
    assert _offset_for(broker, topic, T + 150)[0] == 1
    assert _offset_for(broker, topic, T + 600)[0] == 1
    assert _offset_for(broker, topic, T + 900)[0] == 1
    assert _offset_for(broker, topic, T + 901)[0] == -1
    assert _offset_for(broker, topic, MAX_TIMESTAMP) == (1, T + 900)


def test_retention_keeps_records_stamped_now_behind_an_old_header_max(
        broker_factory: Any, lying_max: None) -> None:
    """retention.ms=60 s; one batch [2 h ago, now, now] whose header says 2 h ago. Kafka
    keeps it (its max is now). A second topic of truly old records is deleted by the same
    retention pass, which proves the pass ran over the first."""
    broker = broker_factory(log_retention_check_interval_ms="100",
                            log_segment_delete_delay_ms="0")
    now = int(time.time() * 1000)
    _create(broker, "kept", **{"retention.ms": "60000"})
    _create(broker, "old", **{"retention.ms": "60000"})
    got = _send(broker, "kept", [now - 7_200_000, now, now])
    assert [m.offset for m in got] == [0, 1, 2], got
    assert _offset_for(broker, "kept", MAX_TIMESTAMP)[1] == now
    got = _send(broker, "old", [now - 7_200_000] * 3)
    assert [m.offset for m in got] == [0, 1, 2], got
    wait_until(lambda: _offset_for(broker, "old", EARLIEST)[0] == 3, 30,
               "retention to delete the old records")
    assert _offset_for(broker, "kept", EARLIEST)[0] == 0  # nothing deleted
    assert _offset_for(broker, "kept", LATEST)[0] == 3


def test_the_log_append_time_bit_from_a_producer(broker: BrokerProcess,
                                                 log_append_bit: None) -> None:
    from kafka.errors import InvalidTimestampError

    _create(broker, "lat", **{"message.timestamp.type": "LogAppendTime"})
    _create(broker, "ct", **{"message.timestamp.type": "CreateTime"})
    (got,) = _send(broker, "lat", [T + 123])
    assert isinstance(got, InvalidTimestampError), got  # Kafka refuses it
    assert _offset_for(broker, "lat", LATEST)[0] == 0  # nothing stored
    (got,) = _send(broker, "ct", [T + 123])
    assert got.offset == 0, got
    header = _stored_header(broker, "ct")
    assert not header[5] & 0x08, header  # the bit is cleared: a CreateTime batch
    assert header[8] == T + 123
    assert _offset_for(broker, "ct", MAX_TIMESTAMP) == (0, T + 123)
