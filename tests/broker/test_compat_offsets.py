"""ListOffsets MAX_TIMESTAMP (issue 12.5), zstd to old fetchers (12.6) and DeleteRecords
error rows (12.7), each with the exact request a client sends."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.codecs import Compression
from tests.conftest import BrokerProcess

from .wire import Wire, batch


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only use topics and groups of their own: one broker for the
    module (broker-wide ones use broker_factory)."""
    return module_broker

UNSUPPORTED_COMPRESSION_TYPE = 76


def _records(timestamps: list[int], compression: int = Compression.NONE) -> bytes:
    b = RecordBatchBuilder(compression=compression)
    for i, ts in enumerate(timestamps):
        b.append(ts, None, b"v%d" % i)
    return b.build()


def _list_offset(w: Wire, topic: str, timestamp: int) -> dict[str, Any]:
    r = w.request(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    return r["topics"][0]["partitions"][0]


def test_max_timestamp_is_the_record_not_its_batch(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("mt")["error_code"] == 0
        assert w.produce("mt", _records([1000, 1001, 1002]))["error_code"] == 0  # 0..2
        assert w.produce("mt", _records([2000, 5000, 3000, 5000, 4000]))["error_code"] == 0
        assert w.produce("mt", _records([1500, 1600]))["error_code"] == 0  # 8..9
        p = _list_offset(w, "mt", -3)
        assert p["error_code"] == 0
        # the first record holding 5000 is offset 4 (its batch ends at 7)
        assert (p["offset"], p["timestamp"]) == (4, 5000)


def test_max_timestamp_with_log_append_time_is_the_batch_first_record(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("lat", configs={"message.timestamp.type": "LogAppendTime"})[
            "error_code"] == 0
        assert w.produce("lat", _records([1, 2]))["error_code"] == 0
        assert w.produce("lat", _records([1, 2, 3]))["error_code"] == 0  # 2..4
        p = _list_offset(w, "lat", -3)
        assert p["error_code"] == 0 and p["timestamp"] > 1000
        assert p["offset"] in (0, 2)  # a batch's first record, never a last offset
        assert p["offset"] == (2 if p["timestamp"] > _list_offset(w, "lat", 0)["timestamp"]
                               else 0)


@pytest.mark.parametrize("via", ["batch", "topic"])
def test_zstd_is_refused_to_fetch_below_v10(broker, via: str) -> None:
    z, plain = f"z-{via}", f"plain-{via}"
    with Wire(broker.bootstrap) as w:
        configs = {"compression.type": "zstd"} if via == "topic" else {}
        assert w.create_topic(z, configs=configs)["error_code"] == 0
        assert w.create_topic(plain)["error_code"] == 0
        codec = Compression.NONE if via == "topic" else Compression.ZSTD
        assert w.produce(z, _records([1, 2, 3], codec))["error_code"] == 0
        assert w.produce(plain, batch([b"x"]))["error_code"] == 0
        for version in (4, 9):
            p = w.fetch(z, 0, version=version)
            assert p["error_code"] == UNSUPPORTED_COMPRESSION_TYPE, (version, p)
            assert not p["records"]
            assert w.fetch(plain, 0, version=version)["error_code"] == 0
        p = w.fetch(z, 0, version=10)
        assert p["error_code"] == 0 and p["records"]


def _delete_records(w: Wire, topic: str, partition: int, offset: int) -> dict[str, Any]:
    r = w.request(ApiKey.DELETE_RECORDS, 2, {"topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "offset": offset}]}], "timeout_ms": 5000})
    return r["topics"][0]["partitions"][0]


def test_delete_records_error_rows_carry_low_watermark_minus_one(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("dr")["error_code"] == 0
        assert w.create_topic("cmp", configs={"cleanup.policy": "compact"})["error_code"] == 0
        for _ in range(3):
            w.produce("dr", batch([b"x"]))
        assert _delete_records(w, "dr", 0, 1) == {
            "partition_index": 0, "low_watermark": 1, "error_code": 0}
        row = _delete_records(w, "dr", 0, 99)  # past the high watermark
        assert (row["error_code"], row["low_watermark"]) == (1, -1)
        row = _delete_records(w, "dr", 0, -5)
        assert (row["error_code"], row["low_watermark"]) == (1, -1)
        row = _delete_records(w, "dr", 7, 0)  # no such partition
        assert (row["error_code"], row["low_watermark"]) == (3, -1)
        row = _delete_records(w, "cmp", 0, 0)  # compact-only: Kafka's policy violation
        assert (row["error_code"], row["low_watermark"]) == (44, -1)
