"""The log side of transactions (KIP-98) on real logs on disk: producer state tracks each
producer's open transaction, end-transaction markers (control batches) end it, the last
stable offset (LSO) follows, aborted transactions land in Kafka's `.txnindex`, and
snapshots, truncation and crash recovery rebuild all of it."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest

from kafkactl.broker.partition import Partition
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.producer_state import ProducerStateError
from kafkactl.log.txn_index import ENTRY_SIZE, AbortedTxn, parse_entries
from kafkactl.log.validator import validate_batches
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.memory_records import iter_batches

PID_A, PID_B = 1000, 2000


class Producer:
    """A producer's batches: sequence numbers as a real one numbers them."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, n: int, *, txn: bool = True, value: bytes = b"v") -> bytes:
        b = RecordBatchBuilder(producer_id=self.pid, producer_epoch=self.epoch,
                               base_sequence=self.seq, is_transactional=txn)
        for i in range(n):
            b.append(int(time.time() * 1000), b"k%d" % i, value)
        self.seq += n
        return b.build()


def produce(part: Partition, data: bytes) -> int:
    buf = memoryview(bytearray(data))
    infos = validate_batches(buf, max_message_bytes=1 << 20, timestamp_type="CreateTime",
                             max_timestamp_difference_ms=2**63 - 1,
                             now_ms=int(time.time() * 1000), produce_version=9,
                             single_batch=True)
    return part.append_as_leader(buf, infos, log_append_time=None).first_offset


def open_partition(path: Path, config: LogConfig | None = None) -> Partition:
    part = Partition("t", 0, Log(path, config or LogConfig()))
    part.load_producer_state()
    return part


def txn_files(path: Path) -> dict[str, list[AbortedTxn]]:
    return {p.name: parse_entries(p.read_bytes()) for p in sorted(path.glob("*.txnindex"))}


def test_an_open_transaction_holds_the_lso_until_its_marker(tmp_path: Path) -> None:
    part = open_partition(tmp_path / "t-0")
    a = Producer(PID_A)
    produce(part, Producer(7).batch(2, txn=False))  # 0..1, idempotent only
    first = produce(part, a.batch(3))  # 2..4
    assert first == 2
    assert part.high_watermark == 5
    assert part.last_stable_offset == 2
    produce(part, a.batch(2))  # 5..6: the same transaction
    assert part.last_stable_offset == 2
    marker = part.append_control_batch(PID_A, 0, coordinator_epoch=3, commit=True)
    assert marker == 7
    assert part.last_stable_offset == part.high_watermark == 8
    assert txn_files(tmp_path / "t-0") == {}  # a commit writes no index entry
    batches = list(part.log.iter_batches())
    control = batches[-1]
    assert control.is_control and control.is_transactional
    rec = next(iter(control))
    assert struct.unpack(">hh", bytes(rec.key)) == (0, 1)  # version 0, COMMIT
    assert struct.unpack(">hi", bytes(rec.value)) == (0, 3)


def test_an_abort_writes_kafkas_txnindex_entry(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    part = open_partition(d)
    a, b = Producer(PID_A), Producer(PID_B)
    produce(part, a.batch(2))  # A: 0..1
    produce(part, b.batch(2))  # B: 2..3
    assert part.last_stable_offset == 0
    abort_a = part.append_control_batch(PID_A, 0, 0, commit=False)  # 4
    # B is still open from 2: the entry's LSO is 2, and the partition's LSO too
    assert part.last_stable_offset == 2
    abort_b = part.append_control_batch(PID_B, 0, 0, commit=False)  # 5
    assert part.last_stable_offset == 6
    files = txn_files(d)
    assert files == {"00000000000000000000.txnindex": [
        AbortedTxn(PID_A, 0, abort_a, 2), AbortedTxn(PID_B, 2, abort_b, abort_b + 1)]}
    raw = (d / "00000000000000000000.txnindex").read_bytes()
    assert len(raw) == 2 * ENTRY_SIZE == 68
    assert struct.unpack_from(">hqqqq", raw, 0) == (0, PID_A, 0, 4, 2)
    # a fetch over [0, 6) learns both; one from 4 on only B's... and A's marker
    assert part.aborted_transactions(0, 6) == [(PID_A, 0), (PID_B, 2)]
    assert part.aborted_transactions(5, 6) == [(PID_B, 2)]


def test_markers_are_fenced_by_producer_and_coordinator_epoch(tmp_path: Path) -> None:
    part = open_partition(tmp_path / "t-0")
    a = Producer(PID_A, epoch=5)
    produce(part, a.batch(1))
    end = part.log_end_offset
    with pytest.raises(ProducerStateError) as e:
        part.append_control_batch(PID_A, 4, 0, commit=True)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert part.log_end_offset == end  # nothing appended
    part.append_control_batch(PID_A, 5, 2, commit=False)
    with pytest.raises(ProducerStateError) as e:
        part.append_control_batch(PID_A, 5, 1, commit=False)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # a bumped epoch (the coordinator fencing a zombie) aborts with the new epoch
    produce(part, Producer(PID_A, epoch=6).batch(1))
    part.append_control_batch(PID_A, 6, 2, commit=False)
    assert part.last_stable_offset == part.log_end_offset


def test_a_plain_write_inside_an_open_transaction_is_invalid_txn_state(tmp_path: Path) -> None:
    part = open_partition(tmp_path / "t-0")
    a = Producer(PID_A)
    produce(part, a.batch(1))
    end = part.log_end_offset
    with pytest.raises(ProducerStateError) as e:
        produce(part, a.batch(1, txn=False))
    assert e.value.code == ErrorCode.INVALID_TXN_STATE
    assert part.log_end_offset == end


def test_snapshot_carries_the_open_transaction(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    part = open_partition(d)
    a, b = Producer(PID_A), Producer(PID_B)
    produce(part, b.batch(1, txn=False))
    produce(part, a.batch(2))  # open from 1
    part.take_snapshot()
    part.log.close()
    again = open_partition(d)
    assert again.producer_state.ongoing == {PID_A: 1}
    assert again.last_stable_offset == 1
    again.append_control_batch(PID_A, 0, 0, commit=True)
    assert again.last_stable_offset == again.log_end_offset


def test_truncation_reopens_a_transaction_whose_marker_is_cut(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    part = open_partition(d)
    a = Producer(PID_A)
    produce(part, a.batch(2))
    marker = part.append_control_batch(PID_A, 0, 0, commit=False)
    assert len(txn_files(d)["00000000000000000000.txnindex"]) == 1
    part.truncate_to(marker)
    assert part.producer_state.ongoing == {PID_A: 0}
    assert part.last_stable_offset == 0
    assert txn_files(d) == {}  # the entry went with its marker


def test_follower_tracks_transactions_from_the_leaders_batches(tmp_path: Path) -> None:
    leader = open_partition(tmp_path / "t-0")
    a, b = Producer(PID_A), Producer(PID_B)
    produce(leader, a.batch(2))
    produce(leader, b.batch(1))
    leader.append_control_batch(PID_A, 0, 1, commit=False)
    follower = Partition("t", 0, Log(tmp_path / "f" / "t-0", LogConfig()))
    follower.become_follower(2, 1, 0, [1, 2], [1, 2], 0)
    data = memoryview(leader.log.read(0, 1 << 20).read_bytes())
    follower.append_as_follower(data, leader.high_watermark)
    assert follower.producer_state.ongoing == {PID_B: 2}
    assert txn_files(tmp_path / "f" / "t-0") == txn_files(tmp_path / "t-0")


def _kill_and_reopen(d: Path, config: LogConfig) -> Partition:
    """Open the directory again without a clean close, from recovery point 0: every
    segment is recovered (as after a crash)."""
    part = Partition("t", 0, Log(d, config, recovery_point=0, needs_recovery=True))
    part.load_producer_state()
    return part


def test_crash_recovery_rebuilds_the_txnindex_identical(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    config = LogConfig(segment_bytes=2048)
    part = open_partition(d, config)
    producers = [Producer(PID_A), Producer(PID_B), Producer(3000)]
    for round_ in range(12):
        for i, p in enumerate(producers):
            produce(part, p.batch(2, value=b"x" * 50))
            if (round_ + i) % 2 == 0:
                part.append_control_batch(p.pid, 0, 0, commit=(round_ + i) % 4 == 0)
    produce(part, producers[0].batch(1))  # one left open
    written = txn_files(d)
    assert len(written) >= 2, "the test wants aborts in several segments"
    ongoing = dict(part.producer_state.ongoing)
    lso = part.last_stable_offset
    # the crash: txnindex files lost or damaged
    names = sorted(written)
    os.unlink(d / names[0])
    (d / names[-1]).write_bytes(b"\x00" * 10)
    # no log.close(): the OS keeps what was written, the indexes are recovered
    again = _kill_and_reopen(d, config)
    assert txn_files(d) == written
    assert again.producer_state.ongoing == ongoing
    assert again.last_stable_offset == lso
    assert again.aborted_transactions(0, lso) == part.aborted_transactions(0, lso)


def test_txnindex_goes_with_its_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    config = LogConfig(segment_bytes=1024, retention_bytes=1, file_delete_delay_ms=0)
    part = open_partition(d, config)
    a = Producer(PID_A)
    produce(part, a.batch(3, value=b"y" * 200))
    part.append_control_batch(PID_A, 0, 0, commit=False)
    first = "00000000000000000000.txnindex"
    assert first in txn_files(d)
    for _ in range(6):
        produce(part, Producer(9).batch(1, txn=False, value=b"z" * 300))
    part.log.delete_old_segments()
    part.log.delete_pending(force=True)
    assert not (d / first).exists()
    assert not (d / (first + ".deleted")).exists()


def test_read_committed_stops_at_the_lso(tmp_path: Path) -> None:
    part = open_partition(tmp_path / "t-0")
    produce(part, Producer(7).batch(2, txn=False))  # 0..1
    produce(part, Producer(PID_A).batch(2))  # 2..3 open
    fs = part.read(0, 1 << 20, min_one_batch=True, read_committed=True)
    offsets = [b.last_offset for b in iter_batches(memoryview(fs.read_bytes()))]
    assert offsets == [1]
    fs = part.read(0, 1 << 20, min_one_batch=True)
    assert [b.last_offset for b in iter_batches(memoryview(fs.read_bytes()))] == [1, 3]


def test_paged_read_committed_fetches_list_only_the_aborts_they_reach(tmp_path: Path) -> None:
    """Small fetches through a log with many aborted transactions: each gets the aborted
    transactions starting below its upper bound (Kafka's fetchUpperBoundOffset), not every
    one to the LSO, and a consumer dropping them ends with exactly the committed records."""
    part = open_partition(tmp_path / "t-0", LogConfig(index_interval_bytes=100,
                                                      segment_bytes=4096))
    a, b = Producer(PID_A), Producer(PID_B)
    committed: list[bytes] = []
    for i in range(30):
        p = a if i % 2 else b
        produce(part, p.batch(2, value=b"v%d" % i))
        part.append_control_batch(p.pid, 0, 0, commit=i % 3 == 0)
        if i % 3 == 0:
            committed += [b"v%d" % i] * 2
    lso = part.last_stable_offset
    total_aborts = len(part.aborted_transactions(0, lso))
    assert total_aborts == 20
    got: list[bytes] = []
    offset, pages, most = 0, 0, 0
    while offset < lso:
        fs = part.read(offset, 150, min_one_batch=True, read_committed=True)
        upper = part.log.fetch_upper_bound(fs.first_offset, fs.position + fs.length, lso)
        aborted = sorted(part.aborted_transactions(fs.first_offset, upper),
                         key=lambda t: t[1])
        most = max(most, len(aborted))
        skipping: set[int] = set()
        for batch in iter_batches(memoryview(fs.read_bytes())):
            if batch.last_offset < offset:
                continue
            while aborted and aborted[0][1] <= batch.last_offset:
                skipping.add(aborted.pop(0)[0])
            if batch.is_control:
                skipping.discard(batch.producer_id)
            elif not (batch.is_transactional and batch.producer_id in skipping):
                got += [bytes(r.value) for r in batch]
            offset = batch.last_offset + 1
        pages += 1
    assert got == committed
    assert pages > 10 and most < total_aborts / 2


def test_roll_snapshots_let_recovery_start_at_the_newest_segments(tmp_path: Path) -> None:
    """Each roll snapshots the producer state at the new base (kept with its segment), a
    transaction open across rolls included; a crash after a flush recovers
    only the newest segment and rebuilds its .txnindex from that snapshot, identical."""
    d = tmp_path / "t-0"
    config = LogConfig(segment_bytes=1200)
    part = open_partition(d, config)
    long_txn, a = Producer(PID_A), Producer(PID_B)
    produce(part, long_txn.batch(1, value=b"L" * 100))  # open for the whole test
    for i in range(30):
        produce(part, a.batch(1, value=b"x" * 150))
        part.append_control_batch(PID_B, 0, 0, commit=i % 2 == 0)
    assert len(part.log.segments) >= 4
    bases = [s.base_offset for s in part.log.segments]
    snaps = sorted(int(p.name.split(".")[0]) for p in d.glob("*.snapshot"))
    assert snaps == bases[1:]  # one with each segment (the first's: an empty log)
    part.log.flush()  # the recovery point: the log end
    for _i in range(3):  # more aborts after it, in the newest segment
        produce(part, a.batch(1, value=b"y" * 20))
        part.append_control_batch(PID_B, 0, 0, commit=False)
    written = txn_files(d)
    last = f"{part.log.segments[-1].base_offset:020d}.txnindex"
    assert written[last][-1].last_stable_offset == 0  # the long transaction holds it
    recovery_point = part.log.recovery_point
    (d / last).unlink()
    again = Partition("t", 0, Log(d, config, recovery_point=recovery_point,
                                  needs_recovery=True))
    again.load_producer_state()
    assert txn_files(d) == written
    assert again.last_stable_offset == 0


def test_lso_waits_for_the_markers_replication(tmp_path: Path) -> None:
    """A replicated leader: an ended transaction still holds the LSO until its marker is
    below the high watermark (Kafka's unreplicated transactions), and an open one holds it
    below the high watermark."""
    part = Partition("t", 0, Log(tmp_path / "t-0", LogConfig()))
    part.become_leader(1, epoch=1, isr=[1, 2], replicas=[1, 2], partition_epoch=1,
                       now_ms=0.0)
    produce(part, Producer(7).batch(2, txn=False))  # 0..1
    produce(part, Producer(PID_A).batch(2))  # 2..3
    part.update_follower(2, part.log_end_offset, part.log_end_offset, 1.0)
    assert part.high_watermark == 4 and part.last_stable_offset == 2
    marker = part.append_control_batch(PID_A, 0, 0, commit=True)  # 4
    assert part.producer_state.ongoing == {}
    assert part.high_watermark == 4 and part.last_stable_offset == 2  # not replicated yet
    part.update_follower(2, marker, part.log_end_offset, 2.0)  # the follower lacks it
    assert part.last_stable_offset == 2
    part.update_follower(2, marker + 1, part.log_end_offset, 3.0)
    assert part.high_watermark == 5 and part.last_stable_offset == 5
