"""The log cleaner keeps an active idempotent producer's last batch (Kafka's
isBatchLastRecordOfProducer, BatchRetention.RETAIN_EMPTY): when every record of it is
superseded, its header stays as an empty batch, so a broker that rebuilds the producer state
from the log alone (its `.snapshot` files gone: `kafkactl recover` deletes corrupt ones, a
replaced disk) still knows the producer's last sequence, and the producer's retry of its
last acknowledged batch is answered as a duplicate instead of being appended again (on a
compacted topic the stale values would then win over newer ones). Real broker, raw
idempotent produce with an explicit producer id, epoch and sequence; the empty batch is then
read by every client: confluent-kafka (librdkafka), kafka-python, kcat and kafkactl's own
consumer."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.memory_records import RecordBatch, iter_batches
from tests.polling import wait_until

from .wire import Wire

TOPIC = "compacted-idem"
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "1024",
           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"}
PAD = b"p" * 300  # ~2 batches a segment: the superseding records leave the active one


def keyed(items: list[tuple[bytes, bytes]], *, producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1) -> bytes:
    b = RecordBatchBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                           base_sequence=base_sequence)
    now = int(time.time() * 1000)
    for k, v in items:
        b.append(now, k, v)
    return b.build()


def fetched_batches(w: Wire) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    offset = 0
    while True:
        p = w.fetch(TOPIC, offset)
        assert p["error_code"] == 0, p
        got = [b for b in iter_batches(bytes(p["records"] or b""))
               if isinstance(b, RecordBatch)]
        if not got:
            return out
        out += got
        offset = got[-1].last_offset + 1


def values(w: Wire) -> dict[bytes, bytes]:
    """The latest value of each key."""
    return {bytes(r.key): bytes(r.value) for b in fetched_batches(w) for r in b}


def served(w: Wire) -> set[bytes]:
    """Every value the partition serves."""
    return {bytes(r.value) for b in fetched_batches(w) for r in b}


def produce_history(w: Wire) -> tuple[int, bytes, int]:
    """The idempotent producer's two batches (its last one: X and Y), then another client
    overwrites X and Y, then filler: (producer id, its last batch, that batch's offset)."""
    pid = int(w.request(ApiKey.INIT_PRODUCER_ID, 4, {
        "transactional_id": None, "transaction_timeout_ms": 60000})["producer_id"])
    first = w.produce(TOPIC, keyed([(b"X", b"x1")], producer_id=pid, producer_epoch=0,
                                   base_sequence=0))
    assert first["error_code"] == 0, first
    last = keyed([(b"X", b"x2"), (b"Y", b"y1")], producer_id=pid, producer_epoch=0,
                 base_sequence=1)
    r = w.produce(TOPIC, last)
    assert r["error_code"] == 0, r
    for i in range(4):
        for k in (b"X", b"Y"):
            assert w.produce(TOPIC, keyed([(k, b"other-%d" % i + PAD)]))["error_code"] == 0
    for i in range(8):
        assert w.produce(TOPIC, keyed([(b"fill-%d" % i, PAD)]))["error_code"] == 0
    return pid, last, int(r["base_offset"])


def describe_producer(w: Wire, pid: int) -> dict[str, Any] | None:
    r = w.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": TOPIC, "partition_indexes": [0]}]})
    states = r["topics"][0]["partitions"][0]["active_producers"]
    return next((s for s in states if s["producer_id"] == pid), None)


def test_a_retry_of_the_last_batch_after_cleaning_and_losing_the_snapshots_is_a_duplicate(
        broker_factory: Any) -> None:
    b = broker_factory(log_cleaner_backoff_ms="100")
    d: Path = b.data_dir / f"{TOPIC}-0"
    with Wire(b.bootstrap) as w:
        assert w.create_topic(TOPIC, configs=CONFIGS)["error_code"] == 0
        pid, last, offset = produce_history(w)
        # the cleaner ran over the producer's batches: none of its values is served
        wait_until(lambda: not {b"x1", b"x2", b"y1"} & served(w), 30,
                   "the producer's records compacted away")
    b.stop()
    for snap in d.glob("*.snapshot"):  # what `recover` does with corrupt ones
        snap.unlink()
    b.start()
    with Wire(b.bootstrap) as w:
        end = w.fetch(TOPIC, 0)["high_watermark"]
        again = w.produce(TOPIC, last)  # the producer retries its last acknowledged batch
        assert (again["error_code"], again["base_offset"]) == (0, offset), \
            f"the retry was appended again at {again['base_offset']} (log end was {end})"
        assert w.fetch(TOPIC, 0)["high_watermark"] == end
        state = describe_producer(w, pid)
        assert state is not None and state["last_sequence"] == 2, state
        assert values(w)[b"X"].startswith(b"other-3")
        # what is left of the batch: its header, empty, with the producer's fields
        kept = [bt for bt in fetched_batches(w) if bt.producer_id == pid]
        assert [(bt.base_offset, bt.last_offset, bt.record_count, bt.producer_epoch,
                 bt.base_sequence, bt.is_valid()) for bt in kept] == [
            (offset, offset + 1, 0, 0, 1, True)]
        latest = values(w)

    # every client skips the empty batch and reads the same records
    assert _confluent(b.bootstrap) == latest
    assert _kafka_python(b.bootstrap) == latest
    assert _kcat(b.bootstrap) == latest
    assert _kafkactl_consume(b.bootstrap) == latest


def _confluent(bootstrap: str) -> dict[bytes, bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out: dict[bytes, bytes] = {}
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    return out
                raise AssertionError(m.error())
            out[m.key()] = m.value()
        raise AssertionError("confluent-kafka did not reach the end of the partition")
    finally:
        c.close()


def _kafka_python(bootstrap: str) -> dict[bytes, bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=5000, auto_offset_reset="earliest")
    tp = TopicPartition(TOPIC, 0)
    c.assign([tp])
    c.seek(tp, 0)
    end = c.end_offsets([tp])[tp]
    out: dict[bytes, bytes] = {}
    try:
        for m in c:
            out[m.key] = m.value
            if m.offset + 1 >= end:
                break
    finally:
        c.close()
    return out


def _kcat(bootstrap: str) -> dict[bytes, bytes]:
    r = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-p", "0", "-o",
                        "beginning", "-e", "-J", "-q"], capture_output=True, timeout=60,
                       check=False)
    assert r.returncode == 0, r.stderr
    out: dict[bytes, bytes] = {}
    for line in r.stdout.decode().splitlines():
        m = json.loads(line)
        out[m["key"].encode()] = m["payload"].encode()
    return out


def _kafkactl_consume(bootstrap: str) -> dict[bytes, bytes]:
    from tests.groups.helpers import kafkactl

    r = kafkactl("consume", "-b", bootstrap, "-t", TOPIC, "--from-beginning", "-e", "-J")
    assert r.returncode == 0, r.stderr
    out: dict[bytes, bytes] = {}
    for line in r.stdout.splitlines():
        m = json.loads(line)
        out[m["key"].encode()] = m["payload"].encode()
    return out
