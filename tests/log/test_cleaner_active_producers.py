"""The cleaner and the producers still active on a log (Kafka's isBatchLastRecordOfProducer
with lastRecordsOfActiveProducers, BatchRetention.RETAIN_EMPTY): the batch holding an active
producer's last record stays, as an empty batch (its header: base offset, last offset delta,
producer id, epoch, base sequence) when none of its records is kept, so that a producer
state rebuilt from the log alone still knows the producer's last sequence; a rewritten batch
keeps its last offset (Kafka's overrideLastOffset); an aborted transaction holding the
producer's last batch keeps its marker and .txnindex entry; a marker of a newer epoch that
is the producer's last entry stays whole; an expired producer's batches go as before; and an
empty batch is read by the loader's recovery, `recover`, dump-log, the producer-state
rebuild, the indexes, ListOffsets and the down-conversion of old fetches."""

from __future__ import annotations

import time
from pathlib import Path

from kafkactl.broker.partition import Partition
from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.dump import dump_files
from kafkactl.log.dump_output import Options, Output
from kafkactl.log.log import Log
from kafkactl.log.repair import repair_partition
from kafkactl.log.txn_index import parse_entries, rebuild_txn_indexes
from kafkactl.log.validator import validate_batches
from kafkactl.record.batch import RecordBatch, RecordBatchBuilder
from kafkactl.record.convert import down_convert
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import FakeTime

OLD_TS = 1_600_000_000_000  # long past producer.id.expiration.ms (a day)
PAD = b"p" * 300  # ~2 batches a segment of 1024 bytes


def _config(**extra: str) -> LogConfig:
    return LogConfig.from_properties({
        "cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "0",
        "min.cleanable.dirty.ratio": "0.01", **extra})


def produce(part: Partition, items: list[tuple[bytes, bytes]], *, pid: int = -1,
            epoch: int = 0, seq: int = -1, txn: bool = False, ts: int | None = None) -> int:
    """One batch (an idempotent producer's with `pid`); its base offset."""
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch if pid >= 0 else -1,
                           base_sequence=seq, is_transactional=txn)
    now = int(time.time() * 1000) if ts is None else ts
    for k, v in items:
        b.append(now, k, v)
    buf = memoryview(bytearray(b.build()))
    infos = validate_batches(buf, max_message_bytes=1 << 20, timestamp_type="CreateTime",
                             max_timestamp_difference_ms=2**63 - 1,
                             now_ms=int(time.time() * 1000), produce_version=9,
                             single_batch=True, compacted=True)
    return part.append_as_leader(buf, infos, log_append_time=None).first_offset


def overwrite_and_roll(part: Partition, keys: list[bytes], fill: int = 6) -> None:
    """Another client writes newer values of `keys`, then filler; the active segment rolls,
    so everything before is cleanable."""
    for i in range(2):
        for k in keys:
            produce(part, [(k, b"new-%d" % i + PAD)])
    for i in range(fill):
        produce(part, [(b"fill-%d" % i, PAD)])
    part.log.roll()


def batches_of(lg: Log, pid: int) -> list[RecordBatch]:
    return [b for b in lg.iter_batches(0) if isinstance(b, RecordBatch) and b.producer_id == pid]


def rebuilt(d: Path, config: LogConfig) -> Partition:
    """The partition as a broker whose snapshots are gone opens it: the producer state from
    the log alone, every segment recovered."""
    for snap in d.glob("*.snapshot"):
        snap.unlink()
    part = Partition(d.name.rsplit("-", 1)[0], 0, Log(d, config, recovery_point=0))
    part.load_producer_state()
    return part


def test_the_last_batch_of_an_active_producer_stays_as_an_empty_batch(tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    part = Partition("c", 0, Log(d, _config()))
    produce(part, [(b"X", b"x1")], pid=7, seq=0)
    last = produce(part, [(b"X", b"x2"), (b"Y", b"y1")], pid=7, seq=1)
    original = batches_of(part.log, 7)[-1]
    overwrite_and_roll(part, [b"X", b"Y"])
    now = int(time.time() * 1000)
    assert LogCleaner(time=FakeTime(now)).clean(part.log, force=True) is not None

    kept = batches_of(part.log, 7)
    assert [(b.base_offset, b.last_offset, b.record_count, b.producer_epoch, b.base_sequence,
             b.last_sequence, b.max_timestamp, b.first_timestamp, b.attributes, b.size,
             b.is_valid()) for b in kept] == [
        (last, last + 1, 0, 0, 1, 2, original.max_timestamp, -1, 0, 61, True)]
    header = bytes(kept[0]._buf[kept[0].position:kept[0].position + kept[0].size])
    LogCleaner(time=FakeTime(now + 1000)).clean(part.log, force=True)  # a later pass
    again_kept = batches_of(part.log, 7)
    assert [bytes(b._buf[b.position:b.position + b.size]) for b in again_kept] == [header]
    part.log.delete_pending(force=True)
    part.log.close()

    # a producer state rebuilt from the cleaned log alone: the retry is a duplicate
    again = rebuilt(d, _config())
    entry = again.producer_state.producers[7]
    assert (entry.epoch, entry.last_seq) == (0, 2)
    dup = again.producer_state.check(7, 0, 1, 2)
    assert dup is not None and (dup.first_offset, dup.last_offset) == (last, last + 1)

    # once the producer wrote a later batch, the empty one is no longer its last: it goes
    later = produce(again, [(b"Z", b"z")], pid=7, seq=3)
    overwrite_and_roll(again, [b"X"])
    LogCleaner(time=FakeTime(now)).clean(again.log, force=True)
    assert [(b.base_offset, b.record_count) for b in batches_of(again.log, 7)] == [(later, 1)]
    again.log.close()


def test_a_partly_kept_batch_keeps_its_last_offset_and_so_its_last_sequence(
        tmp_path: Path) -> None:
    part = Partition("c", 0, Log(tmp_path / "c-0", _config()))
    base = produce(part, [(b"Y", b"y"), (b"X", b"x")], pid=7, seq=5)
    overwrite_and_roll(part, [b"X"])
    LogCleaner(time=FakeTime(int(time.time() * 1000))).clean(part.log, force=True)
    kept = batches_of(part.log, 7)
    assert [(b.base_offset, b.last_offset, b.record_count, b.last_sequence)
            for b in kept] == [(base, base + 1, 1, 6)]
    assert [(bytes(r.key), r.offset) for r in kept[0]] == [(b"Y", base)]
    part.log.close()


def test_an_expired_producers_last_batch_goes(tmp_path: Path) -> None:
    part = Partition("c", 0, Log(tmp_path / "c-0", _config()))
    produce(part, [(b"X", b"x")], pid=7, seq=0, ts=OLD_TS)  # idle for years
    overwrite_and_roll(part, [b"X"])
    LogCleaner(time=FakeTime(int(time.time() * 1000))).clean(part.log, force=True)
    assert batches_of(part.log, 7) == []
    part.log.close()


def committed(part: Partition) -> dict[bytes, bytes]:
    """A read_committed reader's latest value per key."""
    lso = part.last_stable_offset
    aborted = sorted(part.aborted_transactions(0, lso), key=lambda t: t[1])
    skipping: set[int] = set()
    out: dict[bytes, bytes] = {}
    for bt in part.log.iter_batches(0):
        if bt.base_offset >= lso:
            break
        while aborted and aborted[0][1] <= bt.last_offset:
            skipping.add(aborted.pop(0)[0])
        if bt.is_control:
            skipping.discard(bt.producer_id)
            continue
        if bt.is_transactional and bt.producer_id in skipping:
            continue
        for rec in bt:
            out[bytes(rec.key)] = bytes(rec.value)
    return out


def txnindex(d: Path) -> dict[str, list]:
    return {p.name: parse_entries(p.read_bytes()) for p in sorted(d.glob("*.txnindex"))}


def test_an_aborted_transaction_holding_the_producers_last_batch_keeps_its_marker(
        tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    part = Partition("c", 0, Log(d, _config()))
    produce(part, [(b"k", b"committed")])
    first = produce(part, [(b"k", b"aborted"), (b"j", b"aborted")], pid=5, seq=0, txn=True)
    abort = part.append_control_batch(5, 0, 0, commit=False)
    overwrite_and_roll(part, [b"other"])
    view = committed(part)
    assert view[b"k"] == b"committed" and b"j" not in view
    now = int(time.time() * 1000)
    for i in range(3):  # passes after the marker's delete horizon (delete.retention.ms=0)
        LogCleaner(time=FakeTime(now + i * 1000)).clean(part.log, force=True)
        kept = batches_of(part.log, 5)
        assert [(b.base_offset, b.last_offset, b.record_count, b.is_transactional,
                 b.is_control) for b in kept] == [
            (first, first + 1, 0, True, False), (abort, abort, 1, True, True)], i
        assert committed(part) == view
        entries = txnindex(d)
        assert [(e.producer_id, e.first_offset, e.last_offset)
                for es in entries.values() for e in es] == [(5, first, abort)]
        rebuild_txn_indexes(part.log.segments, 0, d, 0)
        assert txnindex(d) == entries  # what recovery rebuilds from the cleaned log

    # the producer moves on: its empty batch goes, then (past its horizon) its marker
    produce(part, [(b"later", b"v")], pid=5, seq=2)
    overwrite_and_roll(part, [b"other"])
    for i in range(3, 6):
        LogCleaner(time=FakeTime(now + i * 1000)).clean(part.log, force=True)
    assert [(b.is_control, b.record_count) for b in batches_of(part.log, 5)] == [(False, 1)]
    assert txnindex(d) == {} and committed(part) == {**view, b"later": b"v"}
    part.log.close()


def test_a_marker_that_is_the_producers_last_entry_stays_whole(tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    part = Partition("c", 0, Log(d, _config()))
    produce(part, [(b"k", b"fenced")], pid=5, epoch=0, seq=0, txn=True)
    marker = part.append_control_batch(5, 1, 0, commit=False)  # a fencing abort, epoch 1
    overwrite_and_roll(part, [b"other"])
    now = int(time.time() * 1000)
    for i in range(4):  # the data goes; the marker gets its horizon, which then passes
        LogCleaner(time=FakeTime(now + i * 1000)).clean(part.log, force=True)
    assert [(b.base_offset, b.is_control, b.producer_epoch, b.record_count)
            for b in batches_of(part.log, 5)] == [(marker, True, 1, 1)]
    part.log.delete_pending(force=True)
    part.log.close()
    assert rebuilt(d, _config()).producer_state.producers[5].epoch == 1


def test_an_empty_batch_is_read_everywhere(tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    part = Partition("c", 0, Log(d, _config()))
    last = produce(part, [(b"X", b"x"), (b"Y", b"y")], pid=7, seq=0)
    produce(part, [(b"kept", b"v")])
    overwrite_and_roll(part, [b"X", b"Y"])
    LogCleaner(time=FakeTime(int(time.time() * 1000))).clean(part.log, force=True)
    assert [b.record_count for b in batches_of(part.log, 7)] == [0]
    everything = [(b.base_offset, b.last_offset, b.record_count)
                  for b in part.log.iter_batches(0)]
    end = part.log.log_end_offset
    part.log.delete_pending(force=True)
    part.log.close()
    files = {p.name: p.read_bytes() for p in d.iterdir() if p.suffix == ".log"}

    # `recover --dry-run`: a healthy log, nothing to repair
    assert not repair_partition(d, dry_run=True, config=_config()).needs_repair
    # the loader recovering every segment (an unclean stop) cuts nothing, rebuilds the same
    lg = Log(d, _config(), recovery_point=0, needs_recovery=True)
    assert all(r.bytes_truncated == 0 for r in lg.recovery_reports)
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.suffix == ".log"} == files
    assert [(b.base_offset, b.last_offset, b.record_count)
            for b in lg.iter_batches(0)] == everything
    assert lg.log_end_offset == end
    # a fetch at the empty batch's offsets gets it; the offset index finds what follows
    fs = lg.read(last + 1, 1 << 20, min_one_batch=True)
    got = list(iter_batches(memoryview(fs.read_bytes())))
    assert got[0].base_offset == last and got[0].record_count == 0
    after = lg.read(last + 2, 1 << 20, min_one_batch=True)
    assert after.first_offset == last + 2
    # ListOffsets by time passes over it to the first record at or after the time
    found = lg.fetch_offset_by_timestamp(0)
    assert found is not None and found[0] == last + 2
    # a Fetch v0-v3 client: the empty batch converts to nothing, the records after it do
    for magic in (0, 1):
        converted = down_convert(memoryview(lg.read(0, 1 << 20).read_bytes()), magic)
        offsets = [r.offset for b in iter_batches(converted) for r in b]
        assert last not in offsets and last + 1 not in offsets
    lg.close()
    # dump-log shows it
    opts = Options(deep=True, print_data=True)
    lines: list[str] = []
    errors: list[str] = []
    seg = sorted(p for p in d.iterdir() if p.suffix == ".log")[0]
    assert dump_files([seg], opts, Output(opts, lines.append, errors.append)) == 0, errors
    assert any(f"baseOffset: {last} lastOffset: {last + 1} count: 0 baseSequence: 0 "
               "lastSequence: 1 producerId: 7" in line for line in lines), lines
