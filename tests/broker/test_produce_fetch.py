"""Produce/fetch semantics over the wire: idempotence, validation, offsets, long poll."""

from __future__ import annotations

import threading
import time

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.memory_records import iter_batches
from tests.conftest import BrokerProcess

from .wire import Wire, batch


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only use topics of their own: one broker for the module
    (broker-wide ones use broker_factory)."""
    return module_broker


def _values(records: bytes) -> list[tuple[int, bytes]]:
    out = []
    for b in iter_batches(memoryview(records)):
        for r in b:
            out.append((r.offset, bytes(r.value)))
    return out


def test_idempotent_duplicates_and_gaps(broker) -> None:
    with Wire(broker.bootstrap) as w:
        pid = w.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                        "transaction_timeout_ms": 60000})["producer_id"]
        assert pid >= 0
        b0 = batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
        b1 = batch([b"c"], producer_id=pid, producer_epoch=0, base_sequence=2)
        assert w.produce("idem", b0)["base_offset"] == 0
        assert w.produce("idem", b1)["base_offset"] == 2
        # Retries of either batch are acknowledged with the original offsets, not appended.
        again = w.produce("idem", b0)
        assert (again["error_code"], again["base_offset"]) == (0, 0)
        assert w.produce("idem", b1)["base_offset"] == 2
        gap = w.produce("idem", batch([b"x"], producer_id=pid, producer_epoch=0,
                                      base_sequence=7))
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        data = w.fetch("idem", 0)
        assert data["high_watermark"] == 3
        assert _values(bytes(data["records"])) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_idempotent_state_survives_restart(broker_factory) -> None:
    broker = broker_factory()
    with Wire(broker.bootstrap) as w:
        pid = w.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                        "transaction_timeout_ms": 60000})["producer_id"]
        b0 = batch([b"a"], producer_id=pid, producer_epoch=0, base_sequence=0)
        assert w.produce("idem2", b0)["base_offset"] == 0
    broker.kill()  # unclean: state is replayed from the log
    broker.start()
    with Wire(broker.bootstrap) as w:
        assert w.produce("idem2", b0)["base_offset"] == 0
        nxt = w.produce("idem2", batch([b"b"], producer_id=pid, producer_epoch=0,
                                       base_sequence=1))
        assert nxt["base_offset"] == 1
        new_pid = w.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                            "transaction_timeout_ms": 60000})["producer_id"]
        assert new_pid != pid  # ids are never handed out twice
    broker.restart()  # clean: state comes from the snapshot
    with Wire(broker.bootstrap) as w:
        assert w.produce("idem2", b0)["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        dup = w.produce("idem2", batch([b"b"], producer_id=pid, producer_epoch=0,
                                       base_sequence=1))
        assert (dup["error_code"], dup["base_offset"]) == (0, 1)


def test_validation_rejects_bad_batches(broker_factory) -> None:
    broker = broker_factory(message_max_bytes="2000")
    with Wire(broker.bootstrap) as w:
        good = batch([b"ok"])
        assert w.produce("val", good)["error_code"] == 0
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF
        assert w.produce("val", bytes(corrupt))["error_code"] == ErrorCode.CORRUPT_MESSAGE
        truncated = good[:-3]
        assert w.produce("val", truncated)["error_code"] == ErrorCode.CORRUPT_MESSAGE
        big = batch([b"x" * 3000])
        assert w.produce("val", big)["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
        two = batch([b"1"]) + batch([b"2"])
        assert w.produce("val", two)["error_code"] == ErrorCode.INVALID_RECORD
        assert w.produce("val", good, acks=5)["error_code"] == ErrorCode.INVALID_REQUIRED_ACKS
        assert w.fetch("val", 0)["high_watermark"] == 1


def test_timestamp_checks_and_log_append_time(broker) -> None:
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("lat", configs={"message.timestamp.type": "LogAppendTime"})[
            "error_code"] == 0
        assert w.create_topic("strict", configs={
            "message.timestamp.difference.max.ms": "60000"})["error_code"] == 0
        before = int(time.time() * 1000)
        r = w.produce("lat", batch([b"v"], timestamp=1000))
        assert r["error_code"] == 0 and r["log_append_time_ms"] >= before
        recs = bytes(w.fetch("lat", 0)["records"])
        b = next(iter_batches(memoryview(recs)))
        assert b.timestamp_type == 1 and b.max_timestamp == r["log_append_time_ms"]
        assert b.is_valid()
        bad = w.produce("strict", batch([b"v"], timestamp=1000))
        assert bad["error_code"] == ErrorCode.INVALID_TIMESTAMP


def test_fetch_offsets_and_out_of_range(broker) -> None:
    with Wire(broker.bootstrap) as w:
        for i in range(5):
            w.produce("fr", batch([b"%d" % i, b"%d" % (i + 100)]))
        mid = w.fetch("fr", 3)  # inside the batch [2, 3]: that whole batch comes back
        assert _values(bytes(mid["records"]))[0] == (2, b"1")
        assert w.fetch("fr", 10)["records"] in (b"", None) or not bytes(
            w.fetch("fr", 10)["records"])
        assert w.fetch("fr", 11)["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert w.fetch("nope", 0)["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_long_poll_is_woken_by_append(broker) -> None:
    with Wire(broker.bootstrap) as w:
        w.produce("lp", batch([b"first"]))

        def produce_later() -> None:
            time.sleep(0.5)  # elapsed time is the point: the fetch is parked by then (if
            # not, it finds the record at once and the test still holds)
            with Wire(broker.bootstrap) as w2:
                w2.produce("lp", batch([b"second"]))

        t = threading.Thread(target=produce_later)
        t.start()
        data = w.fetch("lp", 1, max_wait_ms=20000, min_bytes=1)
        t.join()
        assert _values(bytes(data["records"])) == [(1, b"second")]


def test_list_offsets(broker) -> None:
    with Wire(broker.bootstrap) as w:
        for i, ts in enumerate([1000, 2000, 5000, 3000]):
            w.produce("lo", batch([b"%d" % i], timestamp=ts))

        def lookup(ts: int) -> tuple[int, int]:
            r = w.request(ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0,
                          "topics": [{"name": "lo", "partitions": [
                              {"partition_index": 0, "timestamp": ts,
                               "current_leader_epoch": -1}]}]})
            p = r["topics"][0]["partitions"][0]
            return p["offset"], p["timestamp"]

        assert lookup(-2)[0] == 0
        assert lookup(-1)[0] == 4
        assert lookup(-3) == (2, 5000)
        assert lookup(1500) == (1, 2000)
        assert lookup(4000) == (2, 5000)
        assert lookup(9000) == (-1, -1)
