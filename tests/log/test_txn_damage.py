"""Damaged transactional logs: a `.txnindex` that does not parse strictly (a bad version
field, a truncated file) or whose entries do not fit their segment is rebuilt from the log
at start-up, clean or not, with one WARNING naming it (never half-read: the entries after
the damage are aborted transactions a read_committed consumer must skip); a salvage never
skips a damaged transaction marker; a truncated producer snapshot is called truncated."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from kafkactl.broker.partition import Partition
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.repair import repair_partition
from kafkactl.log.txn_index import ENTRY_SIZE, parse_entries
from kafkactl.record.memory_records import iter_batches
from tests.log.test_transactions import PID_A, PID_B, Producer, open_partition, produce

CONFIG = LogConfig(segment_bytes=1600)


def _aborting_log(d: Path) -> tuple[int, list[tuple[int, int]]]:
    """A closed log whose segments hold several aborted transactions each; (its end, the
    aborted transactions a read_committed fetch of all of it gets)."""
    part = open_partition(d, CONFIG)
    producers = [Producer(PID_A), Producer(PID_B)]
    for round_ in range(16):
        for i, p in enumerate(producers):
            produce(part, p.batch(2, value=b"x" * 40))
            part.append_control_batch(p.pid, 0, 0, commit=(round_ + i) % 3 == 0)
    end = part.log_end_offset
    aborted = part.aborted_transactions(0, end)
    part.log.close()
    return end, aborted


def _txnindexes(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.glob("*.txnindex"))}


@pytest.mark.parametrize("clean", [True, False], ids=["clean-start", "unclean-start"])
@pytest.mark.parametrize("damage", ["bad-version", "truncated", "foreign-entries"])
def test_a_damaged_txnindex_is_rebuilt_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                damage: str, clean: bool) -> None:
    d = tmp_path / "t-0"
    end, aborted = _aborting_log(d)
    written = _txnindexes(d)
    names = sorted(written)
    assert len(names) >= 3 and all(len(parse_entries(b)) >= 2 for b in written.values())
    victim = d / names[1]  # a middle segment: below any recovery point
    data = written[victim.name]
    if damage == "bad-version":  # the tester's damage: bytes 34-35 (entry 1's version) = 5
        victim.write_bytes(data[:ENTRY_SIZE] + b"\x00\x05" + data[ENTRY_SIZE + 2:])
        said = "entry 1 (at byte 34) has version 5, not 0"
    elif damage == "truncated":
        victim.write_bytes(data[:-20])
        said = "truncated"
    else:  # the previous segment's entries: markers below this segment's base offset
        victim.write_bytes(written[names[0]])
        said = "is below the segment's base offset"
    caplog.set_level(logging.WARNING)
    part = Partition("t", 0, Log(d, CONFIG, recovery_point=end, needs_recovery=not clean))
    part.load_producer_state()
    try:
        assert part.aborted_transactions(0, end) == aborted
    finally:
        part.log.close()
    assert _txnindexes(d) == written
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING and victim.name in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert said in warnings[0]


def test_intact_txnindexes_are_not_rebuilt_or_reported(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    end, aborted = _aborting_log(d)
    stamps = {p.name: p.stat().st_mtime_ns for p in d.glob("*.txnindex")}
    caplog.set_level(logging.WARNING)
    log = Log(d, CONFIG, recovery_point=end, needs_recovery=False)
    log.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert {p.name: p.stat().st_mtime_ns for p in d.glob("*.txnindex")} == stamps


# ---- --salvage and a damaged transaction marker ------------------------------------------

def _marker_log(d: Path, *, roll_after_marker: bool) -> tuple[int, int]:
    """Producer A's transaction 0..2 ends with an ABORT marker at 3, its next transaction
    (4..6) commits at 7, then other producers' records fill more segments. With
    `roll_after_marker` the marker is the last batch of its segment. (marker offset, end)"""
    part = open_partition(d, CONFIG)
    a = Producer(PID_A)
    produce(part, a.batch(3))
    marker = part.append_control_batch(PID_A, 0, 0, commit=False)
    if roll_after_marker:
        part.log.roll()
    produce(part, a.batch(3))
    part.append_control_batch(PID_A, 0, 0, commit=True)
    other = Producer(PID_B)
    for _ in range(20):
        produce(part, other.batch(2, txn=False, value=b"o" * 60))
    assert len(part.log.segments) >= 3
    end = part.log_end_offset
    part.log.close()
    return marker, end


def _damage_batch_at(d: Path, offset: int) -> None:
    """Flip a CRC byte of the batch holding `offset` (its header stays as written)."""
    for seg in sorted(d.glob("*.log")):
        data = bytearray(seg.read_bytes())
        for b in iter_batches(bytes(data)):
            if b.base_offset <= offset <= b.last_offset:
                data[b.position + 17] ^= 0xFF
                seg.write_bytes(bytes(data))
                return
    raise AssertionError(f"no batch holds offset {offset}")


@pytest.mark.parametrize("roll_after_marker", [False, True],
                         ids=["marker-mid-segment", "marker-ends-its-segment"])
def test_salvage_never_skips_a_damaged_transaction_marker(tmp_path: Path,
                                                          roll_after_marker: bool) -> None:
    d = tmp_path / "t-0"
    marker, _end = _marker_log(d, roll_after_marker=roll_after_marker)
    _damage_batch_at(d, marker)
    copy = tmp_path / "copy" / "t-0"
    shutil.copytree(d, copy)
    done = repair_partition(d, dry_run=False, config=CONFIG, salvage=True)
    part = Partition("t", 0, Log(d, CONFIG, recovery_point=marker, needs_recovery=False))
    part.load_producer_state()
    try:
        # the aborted transaction is left open (hanging), not committed by the next one
        assert part.producer_state.ongoing == {PID_A: 0}
        assert part.last_stable_offset == 0
        assert part.log_end_offset == marker
    finally:
        part.log.close()
    assert done.log_end_offset == marker and done.cut is not None
    dry = repair_partition(copy, dry_run=True, config=CONFIG, salvage=True)
    assert dry.cut is not None and dry.cut.log_end_offset == marker
    for report in (dry, done):
        lost = [r.lost_marker for r in report.segments if r.lost_marker and not r.deleted]
        assert lost == [{"position": lost[0]["position"], "offset": marker,
                         "producer_id": PID_A, "producer_epoch": 0, "marker": "ABORT"}]


def test_salvage_still_skips_a_damaged_data_batch(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    marker, end = _marker_log(d, roll_after_marker=False)
    _damage_batch_at(d, marker + 1)  # the next transaction's data: only records are lost
    done = repair_partition(d, dry_run=False, config=CONFIG, salvage=True)
    assert done.cut is None and done.log_end_offset == end
    assert any(r.salvaged_batches for r in done.segments)
    assert not [r for r in done.segments if getattr(r, "lost_marker", None)]


# ---- producer snapshots ---------------------------------------------------------------------

def truncated_snapshot(d: Path) -> Path:
    """A partition dir `d` whose producer snapshot is cut to 40 bytes (its header counts 1
    entry: 56 bytes); the snapshot's path."""
    part = open_partition(d, CONFIG)
    produce(part, Producer(PID_A).batch(2))
    snap = part.producer_state.take_snapshot(part.log_end_offset)
    part.log.close()
    assert snap is not None
    snap.write_bytes(snap.read_bytes()[:40])
    return snap


def test_a_truncated_snapshot_is_called_truncated_once(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    snap = truncated_snapshot(d)
    caplog.set_level(logging.WARNING)
    done = repair_partition(d, dry_run=False, config=CONFIG)
    problems = [f.problem for f in done.files if f.path == snap]
    assert problems == ["not a readable producer snapshot (truncated: 40 bytes, its header "
                        "counts 1 entry (56 bytes))"]
    assert not snap.exists()
    # the report says it; `kafkactl recover` does not log it a second time
    assert not [r for r in caplog.records if snap.name in r.getMessage()]
