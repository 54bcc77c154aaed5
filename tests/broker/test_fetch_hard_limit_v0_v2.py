"""Fetch v0-v2 came before KIP-74: their byte limits are hard (Kafka's
`hardMaxBytesLimit = versionId <= 2`, so ReplicaManager reads with minOneMessage false).
A partition whose first batch does not fit its partition_max_bytes (or what is left of the
broker's fetch.max.bytes) gets the bytes of that batch that fit, unconverted, as Kafka's
LogSegment.read slices them and FileRecords.downConvert hands them on when no whole batch
converts: the first partition as the later ones (v3+ send the first batch whole). An old
client reads an incomplete message and reports it too large (kafka-python's
RecordTooLargeError); whole batches before the cut are down-converted (magic 0 for v0-v1,
magic 1 for v2) and the partial one after them dropped, as before."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.legacy import LegacyBatch
from kafkactl.record.memory_records import iter_batches
from tests.broker.wire import Wire, batch

RECORD = 100_000
PARTITIONS = 3
LIMIT = 10_000


def _topic(w: Wire, prefix: str, *, small_first: bool = False) -> tuple[str, list[bytes]]:
    """A topic of 3 partitions, each holding one batch of one 100 kB record (with
    `small_first`, a batch of a 10-byte record before it); returns (name, the stored bytes
    of each partition, as a v12 fetch of it alone reads them)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    r = w.create_topic(name, PARTITIONS)
    assert r["error_code"] == 0, r
    for p in range(PARTITIONS):
        if small_first:
            assert w.produce(name, batch([b"s%09d" % p]), partition=p)["error_code"] == 0
        assert w.produce(name, batch([os.urandom(RECORD)]), partition=p)["error_code"] == 0
    return name, [_fetch(w, name, 12, partition_max_bytes=1 << 20, partitions=[p])[p]
                  for p in range(PARTITIONS)]


def _fetch(w: Wire, topic: str, version: int, *, partition_max_bytes: int,
           max_bytes: int = 52_428_800, partitions: list[int] | None = None
           ) -> dict[int, bytes]:
    resp = w.request(ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "fetch_offset": 0, "partition_max_bytes": partition_max_bytes,
             "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}
            for p in (range(PARTITIONS) if partitions is None else partitions)]}],
        "forgotten_topics_data": [], "rack_id": ""})
    out = {}
    for part in resp["responses"][0]["partitions"]:
        assert part["error_code"] == 0, part
        out[part["partition_index"]] = bytes(part["records"] or b"")
    return out


@pytest.mark.parametrize("version", [0, 1, 2])
def test_every_partition_gets_the_part_of_its_batch_that_fits(module_broker: Any,
                                                              version: int) -> None:
    with Wire(module_broker.bootstrap, timeout=60) as w:
        topic, stored = _topic(w, f"hl{version}")
        got = _fetch(w, topic, version, partition_max_bytes=LIMIT)
        for p in range(PARTITIONS):
            assert len(stored[p]) > RECORD
            assert got[p] == stored[p][:LIMIT], (p, len(got[p]))  # a fragment, as stored
            assert list(iter_batches(got[p])) == []  # no whole message in it
        # at and above the batch's size it comes whole, down-converted (magic 0 / 1)
        for extra in (0, 1):
            whole = _fetch(w, topic, version, partition_max_bytes=len(stored[0]) + extra)
            for p in range(PARTITIONS):
                msgs = list(iter_batches(whole[p]))
                assert len(msgs) == 1 and isinstance(msgs[0], LegacyBatch), p
                assert msgs[0].magic == (0 if version <= 1 else 1)
                assert [bytes(r.value) for r in msgs[0]] == \
                    [bytes(r.value) for b in iter_batches(stored[p]) for r in b]


@pytest.mark.parametrize("version", [0, 2])
def test_whole_messages_before_the_cut_are_converted(module_broker: Any,
                                                     version: int) -> None:
    """A small batch, then the big one cut at the limit: the small one comes converted,
    the cut one is left out (Kafka's down-conversion drops an incomplete tail)."""
    with Wire(module_broker.bootstrap, timeout=60) as w:
        topic, _ = _topic(w, f"hs{version}", small_first=True)
        got = _fetch(w, topic, version, partition_max_bytes=LIMIT)
        for p in range(PARTITIONS):
            msgs = list(iter_batches(got[p]))
            assert [bytes(r.value) for m in msgs for r in m] == [b"s%09d" % p], p
            assert all(isinstance(m, LegacyBatch) for m in msgs)


def test_fetch_max_bytes_is_a_hard_limit_too(broker_factory: Any) -> None:
    """The broker's fetch.max.bytes bounds a v0-v2 response as Kafka's limitBytes: each
    partition gets what is left of it, cut; the first partition is not exempt."""
    b = broker_factory(fetch_max_bytes="15000")
    with Wire(b.bootstrap, timeout=60) as w:
        topic, stored = _topic(w, "hlmax")
        for version in (0, 1, 2):
            got = _fetch(w, topic, version, partition_max_bytes=LIMIT)
            assert got == {0: stored[0][:LIMIT], 1: stored[1][:5000], 2: b""}, version
        # v3+ (KIP-74): the first partition's batch whole, the others nothing
        got = _fetch(w, topic, 4, partition_max_bytes=LIMIT, max_bytes=15000)
        assert got == {0: stored[0], 1: b"", 2: b""}


@pytest.mark.parametrize("api_version", [(0, 8, 2), (0, 9), (0, 10)],
                         ids=lambda v: ".".join(map(str, v)))
def test_kafka_python_old_fetch_reports_the_record_too_large(module_broker: Any,
                                                            api_version: tuple[int, ...]
                                                            ) -> None:
    """kafka-python speaking Fetch v0 / v1 / v2 with max_partition_fetch_bytes below the
    record: RecordTooLargeError (it used to be handed the record whole, above the limit it
    asked for); with room for the record it reads it."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.consumer.fetcher import RecordTooLargeError

    with Wire(module_broker.bootstrap, timeout=60) as w:
        topic, stored = _topic(w, "hlkp")
    values = [bytes(r.value) for b in iter_batches(stored[0]) for r in b]

    def consumer(max_bytes: int) -> Any:
        c = KafkaConsumer(bootstrap_servers=module_broker.bootstrap, api_version=api_version,
                          max_partition_fetch_bytes=max_bytes, enable_auto_commit=False,
                          auto_offset_reset="earliest")
        c.assign([TopicPartition(topic, 0)])
        return c

    c = consumer(LIMIT)
    try:
        with pytest.raises(RecordTooLargeError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                assert not c.poll(500), "a record above max_partition_fetch_bytes"
    finally:
        c.close()
    c = consumer(1 << 20)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            for records in c.poll(500).values():
                got += [r.value for r in records]
        assert got == values
    finally:
        c.close()
