"""The cleaner and transactions on real logs: aborted records are removed and never hide a
committed value, an ABORT marker stays while a pass removed its records and goes (after
delete.retention.ms) once none is left, an open transaction stops the cleaning, and a
read_committed reader sees the same committed records before and after every pass."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from kafkactl.broker.partition import Partition
from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.txn_index import AbortedTxn, parse_entries, rebuild_txn_indexes
from kafkactl.log.validator import validate_batches
from kafkactl.record.batch import RecordBatchBuilder
from tests.log.helpers import FakeTime

OLD_TS = 1_600_000_000_000  # the records' timestamps: long past every horizon


def _config(retention_ms: int = 0) -> LogConfig:
    return LogConfig.from_properties({
        "cleanup.policy": "compact", "segment.bytes": "1024",
        "delete.retention.ms": str(retention_ms), "min.cleanable.dirty.ratio": "0.01"})


class Producer:
    def __init__(self, pid: int) -> None:
        self.pid, self.seq = pid, 0

    def batch(self, items: list[tuple[bytes, bytes]], *, txn: bool) -> bytes:
        b = RecordBatchBuilder(producer_id=self.pid, producer_epoch=0,
                               base_sequence=self.seq, is_transactional=txn)
        for k, v in items:
            b.append(OLD_TS, k, v)
        self.seq += len(items)
        return b.build()


def produce(part: Partition, data: bytes) -> None:
    buf = memoryview(bytearray(data))
    infos = validate_batches(buf, max_message_bytes=1 << 20, timestamp_type="CreateTime",
                             max_timestamp_difference_ms=2**63 - 1,
                             now_ms=int(time.time() * 1000), produce_version=9,
                             single_batch=True, compacted=True)
    part.append_as_leader(buf, infos, log_append_time=None)


def committed_view(part: Partition) -> dict[bytes, bytes]:
    """What a read_committed consumer ends with (latest value per key), reading up to the
    LSO and dropping aborted transactions as Kafka's consumer does: from each aborted
    transaction's first offset until its producer's ABORT marker."""
    lso = part.last_stable_offset
    aborted = sorted(part.aborted_transactions(0, lso), key=lambda t: t[1])
    skipping: set[int] = set()
    out: dict[bytes, bytes] = {}
    for batch in part.log.iter_batches():
        if batch.base_offset >= lso:
            break
        while aborted and aborted[0][1] <= batch.last_offset:
            skipping.add(aborted.pop(0)[0])
        if batch.is_control:
            skipping.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in skipping:
            continue
        for rec in batch:
            out[bytes(rec.key)] = bytes(rec.value)
    return out


def markers(part: Partition) -> list[tuple[int, int]]:
    return [(b.producer_id, b.base_offset) for b in part.log.iter_batches() if b.is_control]


_FILLER_IDS = itertools.count(900)


def _filler(part: Partition, n: int) -> None:
    plain = Producer(next(_FILLER_IDS))
    for i in range(n):
        produce(part, plain.batch([(b"fill-%d" % i, b"x" * 200)], txn=False))


def test_aborted_records_go_and_never_hide_a_committed_value(tmp_path: Path) -> None:
    part = Partition("c", 0, Log(tmp_path / "c-0", _config()))
    plain, a, b = Producer(1), Producer(2), Producer(3)
    produce(part, plain.batch([(b"k1", b"committed-1"), (b"k2", b"committed-2")], txn=False))
    produce(part, a.batch([(b"k1", b"aborted"), (b"k3", b"aborted")], txn=True))
    produce(part, b.batch([(b"k2", b"txn-commit")], txn=True))
    part.append_control_batch(2, 0, 0, commit=False)
    part.append_control_batch(3, 0, 0, commit=True)
    _filler(part, 8)
    part.log.roll()
    before = committed_view(part)
    assert before[b"k1"] == b"committed-1" and before[b"k2"] == b"txn-commit"
    assert b"k3" not in before

    clock = FakeTime(int(time.time() * 1000) + 10**9)
    cleaner = LogCleaner(time=clock)
    assert cleaner.clean(part.log, force=True) is not None
    values = {(bytes(r.key), bytes(r.value)) for bt in part.log.iter_batches()
              if not bt.is_control for r in bt}
    assert (b"k1", b"aborted") not in values and (b"k3", b"aborted") not in values
    assert (b"k1", b"committed-1") in values  # the aborted k1 did not supersede it
    assert committed_view(part) == before
    # the ABORT marker stays this pass (its records were just removed); the COMMIT too
    assert [pid for pid, _o in markers(part)] == [2, 3]
    # the .txnindex says what recovery would rebuild from the cleaned log
    written = {p.name: parse_entries(p.read_bytes()) for p in (tmp_path / "c-0").glob(
        "*.txnindex")}
    rebuild_txn_indexes(part.log.segments, 0, tmp_path / "c-0", 0)
    rebuilt = {p.name: parse_entries(p.read_bytes()) for p in (tmp_path / "c-0").glob(
        "*.txnindex")}
    assert written == rebuilt

    # the next pass: no record of A's transaction is left: its marker gets KIP-534's
    # delete horizon (now + delete.retention.ms), and the pass after that removes it
    cleaner.clean(part.log, force=True)
    horizons = {bt.producer_id: bt.delete_horizon_ms for bt in part.log.iter_batches()
                if bt.is_control}
    assert horizons == {2: clock.now_ms, 3: None}
    assert committed_view(part) == before
    cleaner.clean(part.log, force=True)
    assert [pid for pid, _o in markers(part)] == [3]  # B's commit still has its record
    assert committed_view(part) == before


def test_a_marker_waits_for_delete_retention(tmp_path: Path) -> None:
    part = Partition("c", 0, Log(tmp_path / "c-0", _config(retention_ms=86_400_000)))
    a = Producer(2)
    produce(part, a.batch([(b"k", b"aborted")], txn=True))
    part.append_control_batch(2, 0, 0, commit=False)
    # the producer's last batch after its transaction (else, while it is active, its
    # aborted batch stays as an empty batch, and the marker with it)
    produce(part, a.batch([(b"later", b"x")], txn=False))
    _filler(part, 8)
    part.log.roll()
    now = int(time.time() * 1000)
    cleaner = LogCleaner(time=FakeTime(now))
    cleaner.clean(part.log, force=True)  # the aborted record goes, the marker stays
    cleaner.clean(part.log, force=True)  # the marker gets its delete horizon
    cleaner.clean(part.log, force=True)
    assert [pid for pid, _o in markers(part)] == [2], "removed before delete.retention.ms"
    assert [b.delete_horizon_ms for b in part.log.iter_batches() if b.is_control] == [
        now + 86_400_000]
    LogCleaner(time=FakeTime(now + 86_400_000 - 1)).clean(part.log, force=True)
    assert [pid for pid, _o in markers(part)] == [2]
    LogCleaner(time=FakeTime(now + 86_400_000)).clean(part.log, force=True)
    assert markers(part) == []


def test_an_open_transaction_stops_the_cleaning(tmp_path: Path) -> None:
    part = Partition("c", 0, Log(tmp_path / "c-0", _config()))
    plain, a = Producer(1), Producer(2)
    produce(part, plain.batch([(b"k1", b"old")], txn=False))
    produce(part, plain.batch([(b"k1", b"new")], txn=False))
    part.log.roll()  # segment [0, 2) lies wholly before the open transaction
    produce(part, a.batch([(b"k1", b"open")], txn=True))  # open: its outcome is unknown
    _filler(part, 8)
    produce(part, plain.batch([(b"k2", b"old")], txn=False))
    produce(part, plain.batch([(b"k2", b"new")], txn=False))
    _filler(part, 8)
    part.log.roll()
    open_at = part.last_stable_offset
    assert open_at == 2
    cleaner = LogCleaner(time=FakeTime(int(time.time() * 1000) + 10**9))
    cleaner.clean(part.log, force=True)
    values = [(bytes(r.key), bytes(r.value)) for bt in part.log.iter_batches() for r in bt]
    assert (b"k1", b"open") in values
    assert (b"k2", b"old") in values, "a segment after the open transaction was cleaned"
    assert (b"k1", b"old") not in values  # the segment wholly before it was cleaned
    part.append_control_batch(2, 0, 0, commit=False)
    part.log.roll()
    cleaner.clean(part.log, force=True)
    values = [(bytes(r.key), bytes(r.value)) for bt in part.log.iter_batches() for r in bt]
    assert (b"k1", b"open") not in values and (b"k2", b"old") not in values
    assert committed_view(part)[b"k1"] == b"new"


def test_cleaned_txnindex_matches_a_recovery(tmp_path: Path) -> None:
    part = Partition("c", 0, Log(tmp_path / "c-0", _config()))
    producers = [Producer(10 + i) for i in range(3)]
    for r in range(6):
        for i, p in enumerate(producers):
            produce(part, p.batch([(b"k%d" % (r % 3), b"v%d-%d" % (r, i))], txn=True))
        for i, p in enumerate(producers):
            part.append_control_batch(p.pid, 0, 0, commit=(r + i) % 2 == 0)
    part.log.roll()
    before = committed_view(part)
    LogCleaner(time=FakeTime(int(time.time() * 1000) + 10**9)).clean(part.log, force=True)
    assert committed_view(part) == before
    entries = part.log.aborted_transactions()
    rebuild_txn_indexes(part.log.segments, 0, tmp_path / "c-0", 0)
    assert part.log.aborted_transactions() == entries
    assert all(isinstance(e, AbortedTxn) for e in entries)


def test_a_producers_later_transactions_are_compacted_after_one_of_its_aborts(
        tmp_path: Path) -> None:
    """The tester's case: one producer writes one-record transactions over two keys, its
    4th aborted. Its ABORT marker ends that transaction for the offset map too: the later
    committed records supersede the earlier ones (98 were left of 100 before, not 2)."""
    part = Partition("c", 0, Log(tmp_path / "c-0", _config(retention_ms=10**9)))
    p = Producer(7)
    for i in range(100):
        produce(part, p.batch([(b"k%d" % (i % 2), b"v%d" % i)], txn=True))
        part.append_control_batch(7, 0, 0, commit=i != 3)
    part.log.roll()
    before = committed_view(part)
    assert before == {b"k0": b"v98", b"k1": b"v99"}
    LogCleaner(time=FakeTime(int(time.time() * 1000))).clean(part.log, force=True)
    values = [bytes(r.value) for bt in part.log.iter_batches() if not bt.is_control
              for r in bt]
    assert values == [b"v98", b"v99"]
    assert committed_view(part) == before
