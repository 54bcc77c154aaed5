"""Fetch v3+: a partition that is not the first with data in the response, whose first batch
does not fit its partition_max_bytes (or what is left of the response's max_bytes), gets an
EMPTY record set, as Kafka's ReplicaManager.readFromLog (`firstEntryIncomplete`): the
consumer fetches it again, first in line, and gets the whole batch (KIP-74). A cut-off
fragment made aiokafka and the Java consumer raise RecordTooLargeError."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.memory_records import iter_batches
from tests.broker.wire import Wire, batch

RECORD = 3_000_000
PARTITIONS = 3
MIB = 1 << 20


def _topic(broker: Any, prefix: str, *, batches: int = 1) -> tuple[str, list[list[bytes]],
                                                                       list[int]]:
    """A topic of 3 partitions, each holding `batches` batches of one 3 MB record (random
    bytes, distinct per partition); returns (name, values per partition, batch sizes)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    values: list[list[bytes]] = []
    sizes: list[int] = []
    with Wire(broker.bootstrap, timeout=60) as w:
        r = w.create_topic(name, PARTITIONS, {"max.message.bytes": "20000000"})
        assert r["error_code"] == 0, r
        for p in range(PARTITIONS):
            vals = [os.urandom(RECORD) for _ in range(batches)]
            for v in vals:
                records = batch([v])
                sizes.append(len(records))
                resp = w.produce(name, records, partition=p)
                assert resp["error_code"] == 0, resp
            values.append(vals)
    assert len(set(sizes)) == 1
    return name, values, sizes


def _fetch(broker: Any, topic: str, version: int, *, max_bytes: int, partition_max_bytes: int,
           offsets: dict[int, int] | None = None) -> dict[int, bytes]:
    offsets = offsets or {p: 0 for p in range(PARTITIONS)}
    with Wire(broker.bootstrap, timeout=60) as w:
        resp = w.request(ApiKey.FETCH, version, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": o, "partition_max_bytes": partition_max_bytes,
                 "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}
                for p, o in offsets.items()]}],
            "forgotten_topics_data": [], "rack_id": ""})
    out = {}
    for part in resp["responses"][0]["partitions"]:
        assert part["error_code"] == 0, part
        out[part["partition_index"]] = bytes(part["records"] or b"")
    return out


def _values(records: bytes) -> list[bytes]:
    return [bytes(r.value) for b in iter_batches(records) for r in b]


@pytest.mark.parametrize("version", [4, 12])
def test_later_partition_gets_empty_not_fragment(module_broker: Any, version: int) -> None:
    topic, values, sizes = _topic(module_broker, "mp")
    got = _fetch(module_broker, topic, version, max_bytes=52_428_800, partition_max_bytes=MIB)
    assert len(got[0]) == sizes[0] == RECORD + 74  # the first partition: whole (KIP-74)
    assert _values(got[0]) == values[0]
    assert got[1] == b"" and got[2] == b""  # Kafka: empty, not a 1 MiB fragment


def test_fetch_v3_down_converted_later_partitions_empty(module_broker: Any) -> None:
    topic, values, _ = _topic(module_broker, "mp3")
    got = _fetch(module_broker, topic, 3, max_bytes=52_428_800, partition_max_bytes=MIB)
    assert got[0] and got[1] == b"" and got[2] == b""


@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_partition_max_bytes_around_the_batch_size(module_broker: Any, delta: int) -> None:
    topic, values, sizes = _topic(module_broker, "edge")
    size = sizes[0]
    got = _fetch(module_broker, topic, 12, max_bytes=52_428_800,
                 partition_max_bytes=size + delta)
    assert _values(got[0]) == values[0]
    for p in (1, 2):
        if delta < 0:
            assert got[p] == b"", (p, len(got[p]))
        else:
            assert len(got[p]) == size and _values(got[p]) == values[p]


@pytest.mark.parametrize("extra", [-1, 0, 10, MIB])
def test_response_max_bytes_exhausted(module_broker: Any, extra: int) -> None:
    """max_bytes = the first batch + `extra`: the first partition is whole (even above
    max_bytes), the next ones do not fit what is left and get nothing (never a fragment)."""
    topic, values, sizes = _topic(module_broker, "left")
    got = _fetch(module_broker, topic, 12, max_bytes=sizes[0] + extra,
                 partition_max_bytes=20 * MIB)
    assert _values(got[0]) == values[0]
    assert got[1] == b"" and got[2] == b"", (len(got[1]), len(got[2]))


def test_second_of_two_partitions_fits_what_is_left(module_broker: Any) -> None:
    topic, values, sizes = _topic(module_broker, "two")
    size = sizes[0]
    got = _fetch(module_broker, topic, 12, max_bytes=2 * size + 5, partition_max_bytes=20 * MIB)
    assert _values(got[0]) == values[0] and _values(got[1]) == values[1]
    assert got[2] == b""


def test_first_partition_with_data_is_the_one_whole(module_broker: Any) -> None:
    """Partition 0 has nothing past the fetch offset: partition 1 is the first with data
    (whole, above partition_max_bytes), partition 2 gets nothing."""
    topic, values, _ = _topic(module_broker, "skip")
    got = _fetch(module_broker, topic, 12, max_bytes=52_428_800, partition_max_bytes=MIB,
                 offsets={0: 1, 1: 0, 2: 0})
    assert got[0] == b"" and _values(got[1]) == values[1] and got[2] == b""


def test_later_batches_that_do_not_fit_are_cut_as_kafka(module_broker: Any) -> None:
    """Past the first batch, a batch that does not fit is cut at partition_max_bytes (Kafka
    sends the slice; clients drop the partial batch at its end)."""
    topic, values, sizes = _topic(module_broker, "tail", batches=2)
    size = sizes[0]
    got = _fetch(module_broker, topic, 12, max_bytes=52_428_800,
                 partition_max_bytes=size + 1000)
    assert len(got[0]) == size + 1000 and _values(got[0]) == values[0][:1]
    assert len(got[1]) == size + 1000 and _values(got[1]) == values[1][:1]


# ---- real clients with their default fetch sizes ----------------------------------------

def _expected(values: list[list[bytes]]) -> dict[int, list[bytes]]:
    return {p: v for p, v in enumerate(values)}


def test_aiokafka_default_consumer_reads_every_big_record(module_broker: Any) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, values, _ = _topic(module_broker, "aio")

    async def consume() -> dict[int, list[bytes]]:
        c = AIOKafkaConsumer(bootstrap_servers=module_broker.bootstrap,
                             enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        try:
            c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            deadline = time.monotonic() + 60
            while sum(map(len, got.values())) < PARTITIONS and time.monotonic() < deadline:
                batches = await c.getmany(timeout_ms=1000)
                for tp, msgs in batches.items():
                    got[tp.partition].extend(m.value for m in msgs)
        finally:
            await c.stop()
        return got

    assert asyncio.run(consume()) == _expected(values)


def test_kafka_python_default_consumer_reads_every_big_record(module_broker: Any) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic, values, _ = _topic(module_broker, "kp")
    c = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < PARTITIONS and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=1000).items():
                got[tp.partition].extend(m.value for m in msgs)
    finally:
        c.close()
    assert got == _expected(values)


def test_confluent_kafka_default_consumer_reads_every_big_record(module_broker: Any) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic, values, _ = _topic(module_broker, "ck")
    c = Consumer({"bootstrap.servers": module_broker.bootstrap,
                  "group.id": f"g-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
    got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < PARTITIONS and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got[m.partition()].append(m.value())
    finally:
        c.close()
    assert got == _expected(values)
