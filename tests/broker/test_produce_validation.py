"""Record validation on append (Kafka's LogValidator): CRC-valid batches whose records are
garbage, whose count is wrong, whose attributes claim a codec the bytes are not, or whose
offset deltas are not 0..n-1 are refused (INVALID_RECORD / CORRUPT_MESSAGE) and nothing is
stored, so every consumer keeps reading the partition. Keyless records on a compacted topic
are refused per record (record_errors), and clients cannot write to __consumer_offsets."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import time
from typing import Any

import pytest

from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatch, assemble_batch, encode_record
from kafkactl.record.codecs import Compression, compress
from tests.conftest import BrokerProcess

from .wire import Wire, batch


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """The tests given `broker` here only create and read topics of their own (named after
    their parameters): one broker for the module. Broker-wide ones use broker_factory."""
    return module_broker


def _raw_batch(records: bytes, count: int, *, attributes: int = 0,
               last_offset_delta: int | None = None) -> bytes:
    """A batch with a correct CRC around any records section."""
    ts = int(time.time() * 1000)
    return assemble_batch(
        records, attributes=attributes,
        last_offset_delta=count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp=ts, max_timestamp=ts, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, record_count=count)


def _records(n: int, *, deltas: list[int] | None = None, key: bytes | None = None,
             keys: list[bytes | None] | None = None) -> bytes:
    return b"".join(
        encode_record(i if deltas is None else deltas[i], 0,
                      key if keys is None else keys[i], b"value-%d" % i)
        for i in range(n))


def _log_end(w: Wire, topic: str) -> int:
    return int(w.fetch(topic, 0)["high_watermark"])


def _fetched_offsets(w: Wire, topic: str) -> list[int]:
    data = w.fetch(topic, 0)["records"]
    out: list[int] = []
    pos = 0
    while pos + 61 <= len(data):
        b = RecordBatch(data, pos)
        if not b.is_in_buffer():
            break
        out.extend(r.offset for r in b)
        pos += b.size
    return out


POISON = {
    # 3 records claimed, the section is noise
    "garbage": (lambda: _raw_batch(b"\x8f\xff\xff\xff\x0f" + bytes(range(200)), 3),
                ErrorCode.INVALID_RECORD),
    # 5 well-formed records, the header says 4 (last offset delta 3): one left over
    "count-too-small": (lambda: _raw_batch(_records(5), 4), ErrorCode.INVALID_RECORD),
    # 5 well-formed records, the header says 6: premature end
    "count-too-large": (lambda: _raw_batch(_records(5), 6), ErrorCode.INVALID_RECORD),
    # a record whose length varint overruns the section
    "length-overrun": (lambda: _raw_batch(_records(2) + b"\x7e\x00\x00", 3),
                       ErrorCode.INVALID_RECORD),
    # a key length reaching past its record
    "key-overrun": (lambda: _raw_batch(
        b"\x10\x00\x00\x00\x7e" + b"k" * 3 + b"\x00\x00", 1), ErrorCode.INVALID_RECORD),
    # uncompressed records that all carry offset delta 0 (they would share one offset)
    "deltas-all-zero": (lambda: _raw_batch(_records(4, deltas=[0, 0, 0, 0]), 4),
                        ErrorCode.INVALID_RECORD),
    # attributes say gzip, the bytes are plain records
    "gzip-over-plain": (lambda: _raw_batch(_records(3), 3, attributes=int(Compression.GZIP)),
                        ErrorCode.CORRUPT_MESSAGE),
    # a valid gzip stream of garbage records
    "gzip-of-garbage": (lambda: _raw_batch(gzip.compress(bytes(range(256)) * 4), 3,
                                           attributes=int(Compression.GZIP)),
                        ErrorCode.INVALID_RECORD),
    # a decompression bomb: ~80 KB of gzip that would be 80 MiB in memory
    "gzip-bomb": (lambda: _raw_batch(gzip.compress(b"\x00" * (80 << 20), compresslevel=1),
                                     1, attributes=int(Compression.GZIP)),
                  ErrorCode.MESSAGE_TOO_LARGE),
    # lz4 whose records are one short of the count
    "lz4-count": (lambda: _raw_batch(compress(Compression.LZ4, _records(4)), 5,
                                     attributes=int(Compression.LZ4)),
                  ErrorCode.INVALID_RECORD),
}


@pytest.mark.parametrize("case", sorted(POISON))
def test_poisoned_batches_are_refused_and_nothing_is_stored(broker: Any, case: str) -> None:
    make, code = POISON[case]
    topic = f"poison-{case}"
    with Wire(broker.bootstrap) as w:
        assert w.produce(topic, batch([b"before"]))["error_code"] == 0
        r = w.produce(topic, make())
        assert r["error_code"] == code, r
        assert r["error_message"]
        assert r["record_errors"] == []  # as Kafka: only per-record rules name records
        assert _log_end(w, topic) == 1
        ok = w.produce(topic, batch([b"after-1", b"after-2"]))
        assert ok["error_code"] == 0 and ok["base_offset"] == 1
        assert _fetched_offsets(w, topic) == [0, 1, 2]
    if shutil.which("kcat"):
        out = subprocess.run(
            ["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%o:%s\n"],
            capture_output=True, timeout=30, check=True).stdout
        assert out.decode().splitlines() == ["0:before", "1:after-1", "2:after-2"]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4,
                                   Compression.ZSTD])
def test_compressed_batch_with_offset_deltas_all_zero_is_renumbered(broker: Any,
                                                                    codec: Compression) -> None:
    records = _records(5, deltas=[0] * 5)
    topic = f"renumber-{codec.name.lower()}"
    with Wire(broker.bootstrap) as w:
        r = w.produce(topic, _raw_batch(compress(codec, records), 5, attributes=int(codec)))
        assert r["error_code"] == 0, r
        assert _fetched_offsets(w, topic) == [0, 1, 2, 3, 4]
        stored = RecordBatch(w.fetch(topic, 0)["records"])
        assert stored.compression == codec
        assert [bytes(x.value) for x in stored] == [b"value-%d" % i for i in range(5)]


def test_valid_batches_of_every_shape_are_accepted(broker: Any) -> None:
    """Mixed value sizes, keys, headers, timestamp deltas of several widths, > 64 and
    > 8192 records (offset-delta varints of 1, 2 and 3 bytes): all stored."""
    from kafkactl.record.batch import RecordBatchBuilder

    shapes = []
    b = RecordBatchBuilder()
    for i in range(9000):
        b.append(1_700_000_000_000 + i * 7, None, b"x" * 20)
    shapes.append(b.build())
    b = RecordBatchBuilder()
    for i in range(300):
        b.append(1_700_000_000_000 + i, b"k%d" % i, b"v" * (i % 37),
                 [("h", b"1")] if i % 3 else [])
    shapes.append(b.build())
    with Wire(broker.bootstrap) as w:
        w.create_topic("shapes", configs={"message.timestamp.difference.max.ms":
                                          str(2**63 - 1)})
        for raw in shapes:
            assert w.produce("shapes", raw)["error_code"] == 0
        assert _log_end(w, "shapes") == 9300


def test_keyless_records_on_a_compacted_topic_get_record_errors(broker: Any) -> None:
    keys: list[bytes | None] = [b"a", None, b"c", None, None]
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("cmp", configs={"cleanup.policy": "compact,delete"})[
            "error_code"] == 0
        r = w.produce("cmp", _raw_batch(_records(5, keys=keys), 5), version=9)
        assert r["error_code"] == ErrorCode.INVALID_RECORD
        assert [e["batch_index"] for e in r["record_errors"]] == [1, 3, 4]
        assert all("Compacted topic cannot accept message without key in topic partition "
                   "cmp-0" in e["batch_index_error_message"] for e in r["record_errors"])
        assert "3 record errors" in r["error_message"]
        r7 = w.produce("cmp", _raw_batch(_records(5, keys=keys), 5), version=7)
        assert r7["error_code"] == ErrorCode.INVALID_RECORD  # no record_errors before v8
        assert _log_end(w, "cmp") == 0
        assert w.produce("cmp", _raw_batch(_records(2, key=b"k"), 2))["error_code"] == 0
        assert _log_end(w, "cmp") == 2


def test_confluent_kafka_reports_invalid_record_per_keyless_message(broker: Any) -> None:
    from confluent_kafka import KafkaError, Producer

    with Wire(broker.bootstrap) as w:
        assert w.create_topic("cmp2", configs={"cleanup.policy": "compact"})["error_code"] == 0
    # default retries: INVALID_RECORD is permanent, so the report comes at once
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    reports: dict[bytes, Any] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        reports[msg.value()] = err

    p.produce("cmp2", key=b"k1", value=b"keyed", on_delivery=on_delivery)
    p.produce("cmp2", value=b"keyless", on_delivery=on_delivery)
    assert p.flush(30) == 0
    err = reports[b"keyless"]
    assert err is not None and err.code() == KafkaError.INVALID_RECORD, err
    # librdkafka 2.x fails the whole batch the keyless record was in (with the same code)
    assert reports[b"keyed"] is not None
    p.produce("cmp2", key=b"k2", value=b"alone", on_delivery=on_delivery)
    assert p.flush(30) == 0
    assert reports[b"alone"] is None
    with Wire(broker.bootstrap) as w:
        assert _log_end(w, "cmp2") == 1


def test_clients_cannot_produce_to_the_offsets_topic(broker: Any) -> None:
    with Wire(broker.bootstrap) as w:
        r = w.produce("__consumer_offsets", batch([b"garbage"]))
        assert r["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert "internal topic" in r["error_message"]


# ---- Produce v0-v2: magic 0/1 message sets, offsets as old producers leave them ----------

def _message_set(magic: int, n: int, *, inner: str, codec: Compression, tag: str) -> bytes:
    """`n` messages whose offsets are what an old producer writes: all 0 (`inner="zero"`),
    or 0..n-1 inside a wrapper (`inner="relative"`); the wrapper itself carries offset 0."""
    from kafkactl.record.legacy import encode_message

    ts = int(time.time() * 1000)
    msgs = [encode_message(magic, 0 if inner == "zero" else i, b"k%d" % i,
                           f"{tag}-{i}".encode(), timestamp=ts) for i in range(n)]
    if codec == Compression.NONE:
        return b"".join(msgs)
    payload = compress(codec, b"".join(msgs), legacy_lz4_checksum=(magic == 0))
    return encode_message(magic, 0, None, payload, timestamp=ts, attributes=int(codec))


LEGACY = [(0, 0, "zero", Compression.NONE), (1, 1, "zero", Compression.NONE),
          (2, 1, "zero", Compression.NONE), (0, 0, "zero", Compression.GZIP),
          (1, 1, "relative", Compression.GZIP), (2, 1, "zero", Compression.GZIP),
          (2, 1, "relative", Compression.SNAPPY), (2, 1, "zero", Compression.LZ4)]


@pytest.mark.parametrize(("version", "magic", "inner", "codec"), LEGACY,
                         ids=[f"v{v}-magic{m}-{i}-{c.name.lower()}" for v, m, i, c in LEGACY])
def test_old_produce_versions_are_renumbered(broker: Any, version: int, magic: int,
                                             inner: str, codec: Compression) -> None:
    topic = f"legacy-v{version}-{codec.name.lower()}-{inner}"
    with Wire(broker.bootstrap) as w:
        for round_ in range(2):
            r = w.produce(topic, _message_set(magic, 4, inner=inner, codec=codec,
                                              tag=f"r{round_}"), version=version)
            assert r["error_code"] == 0, r
            assert r["base_offset"] == 4 * round_
        assert _fetched_offsets(w, topic) == list(range(8))
    if shutil.which("kcat"):
        out = subprocess.run(
            ["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%o:%k:%s\n"],
            capture_output=True, timeout=30, check=True).stdout.decode().splitlines()
        assert out == [f"{4 * r + i}:k{i}:r{r}-{i}" for r in range(2) for i in range(4)]


def test_old_produce_with_a_bad_crc_is_corrupt_message(broker: Any) -> None:
    raw = bytearray(_message_set(1, 3, inner="zero", codec=Compression.NONE, tag="x"))
    raw[-1] ^= 0xFF  # the last message's value: its CRC no longer matches
    with Wire(broker.bootstrap) as w:
        r = w.produce("legacy-crc", bytes(raw), version=2)
        assert r["error_code"] == ErrorCode.CORRUPT_MESSAGE
        assert _log_end(w, "legacy-crc") == 0


@pytest.mark.parametrize("api_version", [(0, 10), (0, 9), (0, 8, 2)])
def test_kafka_python_old_api_versions_produce_several_records(broker: Any,
                                                               api_version: tuple[int, ...]
                                                               ) -> None:
    from kafka import KafkaProducer

    topic = "kp-" + "-".join(map(str, api_version))
    with Wire(broker.bootstrap) as w:
        assert w.create_topic(topic)["error_code"] == 0
    for codec in (None, "gzip"):
        p = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=api_version,
                          linger_ms=100, compression_type=codec)
        futures = [p.send(topic, key=b"k", value=f"{codec}-{i}".encode()) for i in range(6)]
        p.flush(30)
        offsets = [f.get(timeout=30).offset for f in futures]
        p.close(5)
        assert offsets == sorted(offsets) and len(set(offsets)) == 6
    if shutil.which("kcat"):
        out = subprocess.run(
            ["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%o:%s\n"],
            capture_output=True, timeout=30, check=True).stdout.decode().splitlines()
        assert out == [f"{i}:None-{i}" for i in range(6)] + \
            [f"{6 + i}:gzip-{i}" for i in range(6)]


# ---- producer state is bounded (KIP-854) --------------------------------------------------

def test_idle_producer_ids_expire(broker_factory: Any) -> None:
    from tests.groups.helpers import wait_until

    b = broker_factory(producer_id_expiration_ms="1500",
                       producer_id_expiration_check_interval_ms="100")
    with Wire(b.bootstrap) as w:
        first = batch([b"a", b"b", b"c"], producer_id=4242, producer_epoch=0, base_sequence=0)
        assert w.produce("idem", first)["error_code"] == 0
        # the state is there: a retry is a duplicate, a gap is out of order
        dup = w.produce("idem", first)
        assert dup["error_code"] == 0 and dup["base_offset"] == 0
        gap = batch([b"z"], producer_id=4242, producer_epoch=0, base_sequence=10)
        assert w.produce("idem", gap)["error_code"] == \
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

        def forgotten() -> bool:  # once expired, the producer is new: any sequence goes
            return w.produce("idem", gap)["error_code"] == 0

        wait_until(forgotten, 30, "producer id 4242 to expire")
        assert _log_end(w, "idem") == 4


def test_producer_state_entries_are_small_and_expire(tmp_path: Any) -> None:
    """Unit: 20,000 producers cost a bounded number of bytes each (packed batches), and
    the expiration horizon is the last batch's timestamp."""
    import tracemalloc

    from kafkactl.log import producer_state as ps

    now = [10_000_000]
    m = ps.ProducerStateManager(tmp_path, time_ms=lambda: now[0])
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for pid in range(20_000):
        for seq in range(0, 40, 5):  # 8 batches: only the last 5 are kept
            m.update(pid, 0, seq, seq + 4, 1000 * pid + seq, 1000 * pid + seq + 4,
                     now[0] - (pid % 2) * 3_600_000)
    per_entry = (tracemalloc.get_traced_memory()[0] - before) / 20_000
    tracemalloc.stop()
    assert per_entry < 400, per_entry
    entry = m.producers[7]
    assert [b.first_seq for b in entry.batches] == [15, 20, 25, 30, 35]
    assert m.check(7, 0, 35, 39) is not None  # a retried batch is still a duplicate
    ps.configure(3_000_000, 1)
    try:
        assert m.remove_expired_producers() == 10_000  # the odd ids: an hour idle
        assert all(pid % 2 == 0 for pid in m.producers)
        m.take_snapshot(123)
        reloaded = ps.ProducerStateManager(tmp_path, time_ms=lambda: now[0] + 3_000_000)
        assert reloaded.load_latest_snapshot(200) == 123
        assert reloaded.producers == {}  # all idle by then: not loaded back
    finally:
        ps.configure(ps.PRODUCER_ID_EXPIRATION_MS, ps.PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS)


def test_min_insync_replicas_above_the_replica_count_refuses_acks_all(
        broker: BrokerProcess) -> None:
    """As Kafka: a one-replica partition with min.insync.replicas=2 refuses every acks=all
    write (NOT_ENOUGH_REPLICAS, nothing stored) instead of acknowledging a copy that does not
    exist; acks=1 still writes."""
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("min-isr-rf1", 1, {"min.insync.replicas": "2"})[
            "error_code"] == 0
        refused = w.produce("min-isr-rf1", batch([b"a"]), acks=-1)
        assert refused["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS, refused
        assert w.produce("min-isr-rf1", batch([b"b"]), acks=1)["base_offset"] == 0
