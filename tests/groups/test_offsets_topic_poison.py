"""A poisoned __consumer_offsets partition (CRC-valid batches whose records are garbage,
written into the log bytes on disk, bypassing produce) costs no group its offsets: the
loader logs and skips what it cannot parse and keeps loading, and the log cleaner skips an
unparseable batch instead of failing every pass."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder, assemble_batch, encode_record
from kafkactl.record.memory_records import iter_batches
from tests.broker.wire import Wire
from tests.groups.helpers import wait_until

GROUPS = 30


def _garbage_batches(base_offset: int) -> bytes:
    """Two CRC-valid batches: one whose records section is noise (it does not frame), one
    of well-framed records whose keys and values are not the offsets schema."""
    ts = int(time.time() * 1000)
    noise = bytes((i * 37 + 11) % 256 for i in range(300))
    first = assemble_batch(noise, attributes=0, last_offset_delta=2, base_timestamp=ts,
                           max_timestamp=ts, producer_id=-1, producer_epoch=-1,
                           base_sequence=-1, record_count=3, base_offset=base_offset,
                           partition_leader_epoch=0)
    records = b"".join(encode_record(i, 0, b"\x00\x09garbage" + bytes([i]), b"\xff" * 9)
                       for i in range(3))
    second = assemble_batch(records, attributes=0, last_offset_delta=2, base_timestamp=ts,
                            max_timestamp=ts, producer_id=-1, producer_epoch=-1,
                            base_sequence=-1, record_count=3, base_offset=base_offset + 3,
                            partition_leader_epoch=0)
    return first + second


def _poison(partition_dir: Path) -> int:
    """Append the garbage to the last segment file; returns the first garbage offset."""
    segments = sorted(partition_dir.glob("*.log"))
    end = 0
    for seg in segments:
        for batch in iter_batches(seg.read_bytes()):
            end = batch.next_offset
    with open(segments[-1], "ab") as f:
        f.write(_garbage_batches(end))
    return end


def _commit(bootstrap: str, groups: range) -> None:
    from confluent_kafka import Consumer, TopicPartition

    for g in groups:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{g}",
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("data", 0, 100 + g)], asynchronous=False)
        c.close()


def _committed(bootstrap: str, group: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g{group}"})
    try:
        [tp] = c.committed([TopicPartition("data", 0)], timeout=30)
        return int(tp.offset)
    finally:
        c.close()


def test_garbage_in_the_offsets_log_loses_no_group(broker_factory: Any) -> None:
    b = broker_factory(offsets_topic_num_partitions="1", offsets_topic_segment_bytes="4000",
                       log_cleaner_backoff_ms="100", group_initial_rebalance_delay_ms="0")
    with Wire(b.bootstrap) as w:
        assert w.create_topic("data")["error_code"] == 0
    _commit(b.bootstrap, range(GROUPS // 2))
    b.stop()
    part = b.data_dir / "__consumer_offsets-0"
    garbage_at = _poison(part)
    b.start()
    assert [_committed(b.bootstrap, g) for g in range(GROUPS // 2)] == \
        [100 + g for g in range(GROUPS // 2)]
    # more commits after the garbage: segments roll, the garbage's segment becomes
    # cleanable, and a restart must load past the garbage in the middle of the log
    _commit(b.bootstrap, range(GROUPS // 2, GROUPS))
    _commit(b.bootstrap, range(GROUPS))  # again: superseded records for the cleaner
    b.stop()
    b.start()
    assert [_committed(b.bootstrap, g) for g in range(GROUPS)] == \
        [100 + g for g in range(GROUPS)]
    log = b.log()
    assert "skipping unreadable batch at offsets" in log and "__consumer_offsets-0" in log
    assert "skipping unreadable record at offset" in log

    def cleaned_past_garbage() -> bool:
        cp = b.data_dir / "cleaner-offset-checkpoint"
        for line in (cp.read_text().splitlines()[2:] if cp.exists() else []):
            topic, partition, offset = line.split()
            if (topic, partition) == ("__consumer_offsets", "0") and int(offset) > garbage_at:
                return True
        return False

    wait_until(cleaned_past_garbage, 60, "the cleaner to pass the garbage")
    assert "cleaning __consumer_offsets-0 failed" not in b.log()
    assert [_committed(b.bootstrap, g) for g in range(GROUPS)] == \
        [100 + g for g in range(GROUPS)]


def test_cleaner_keeps_an_unparseable_batch_and_completes(tmp_path: Path) -> None:
    cfg = LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": "1000000",
                                     "delete.retention.ms": "0",
                                     "min.cleanable.dirty.ratio": "0.01"})
    lg = Log(tmp_path / "cmp-0", cfg)
    for r in range(3):
        b = RecordBatchBuilder()
        for k in range(20):
            b.append(1_000 + r, b"key-%d" % k, b"v%d" % r)
        lg.append(b.build())
    garbage = _garbage_batches(lg.log_end_offset)
    lg.append(garbage)
    b = RecordBatchBuilder()
    b.append(2_000, b"key-0", b"last")
    lg.append(b.build())
    lg.roll()
    stats = LogCleaner().clean(lg, force=True)
    assert stats is not None
    stored = b"".join(s.read_bytes(0, s.size) for s in lg.segments)
    noise_batch = next(iter_batches(garbage))
    assert garbage[21:noise_batch.size] in stored  # kept byte for byte (CRC-covered part)
    latest: dict[bytes, bytes] = {}
    for batch in lg.iter_batches():
        try:
            for rec in batch:
                if rec.key is not None and rec.key[:1] != b"\x00":
                    latest[bytes(rec.key)] = bytes(rec.value)
        except Exception:  # the noise batch, kept as it was
            continue
    assert latest[b"key-0"] == b"last" and latest[b"key-19"] == b"v2"
    assert LogCleaner().clean(lg, force=True) is not None  # and again: no failure
