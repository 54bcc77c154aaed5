"""A deleted log leaves nothing behind in its dir's per-partition checkpoints (Kafka's
LogManager.asyncDelete + LogCleanerManager.updateCheckpoints(partitionToRemove)), so a log
made again under the same name inherits no log start, recovery point, cleaned offset or high
watermark; and a cleaner pass that a deletion overtakes does not write the entry back.
Real LogManager, Log and LogCleaner over files in a temp dir. Also: min.cleanable.dirty.ratio
1.0 never cleans on the ratio alone (Kafka: cleanableRatio > minCleanableRatio)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kafkactl.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_checkpoint,
    write_checkpoint,
)
from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.log import Log
from kafkactl.log.manager import LogManager
from kafkactl.record.batch import RecordBatchBuilder
from tests.log.helpers import SMALL, FakeTime

COMPACTED = dataclasses.replace(SMALL, cleanup_policy="compact", segment_bytes=1024,
                                min_cleanable_dirty_ratio=0.01)


def _manager(d: Path, clock: FakeTime) -> LogManager:
    m = LogManager([d], COMPACTED, time=clock)
    m.load()
    return m


def _keyed(lg: Log, rounds: int, prefix: str, ts: int) -> None:
    """`rounds` rounds of keys <prefix>1..<prefix>10, one batch per record."""
    for r in range(rounds):
        for k in range(1, 11):
            b = RecordBatchBuilder()
            b.append(ts, f"{prefix}{k}".encode(), f"v{k}-r{r}".encode())
            lg.append(b.build())


def test_delete_log_drops_every_checkpoint_entry_of_its_partition(
        tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "data"
    m = _manager(d, clock)
    gone, kept = m.create_log("t", 0), m.create_log("u", 0)
    for lg in (gone, kept):
        _keyed(lg, 10, "k", clock.now_ms)
        lg.flush()
    assert gone.delete_records_before(30) == 30  # the checkpoints are written at once
    assert read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)[("t", 0)] == 30
    cleaner = LogCleaner(time=clock)
    assert cleaner.clean(gone) is not None and cleaner.clean(kept) is not None
    cleaned = read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)
    assert cleaned[("t", 0)] > 30 and ("u", 0) in cleaned
    # a cluster's high watermarks (written by the broker's partition store)
    write_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT, {("t", 0): 100, ("u", 0): 100})
    taken_before = m.checkpoint_values()  # a periodic checkpoint, written late

    assert m.delete_log("t", 0)

    for name in (CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        entries = read_checkpoint(d / name)
        assert ("t", 0) not in entries and ("u", 0) in entries, (name, entries)
    assert m.write_checkpoints(taken_before) == []  # the deleted log's entries, again
    assert read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)[("t", 0)] == 30
    # made again under the same name: the stale entries go first; it starts at 0 and all
    # of it is dirty
    again = m.create_log("t", 0)
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                 CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        entries = read_checkpoint(d / name)
        assert ("t", 0) not in entries and ("u", 0) in entries, (name, entries)
    _keyed(again, 10, "n", clock.now_ms)
    assert again.log_start_offset == 0 and cleaner.first_dirty_offset(again) == 0
    m.checkpoint()
    assert read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)[("t", 0)] == 0
    m.shutdown()


def test_a_checkpoint_after_the_deletion_leaves_its_entries_out(
        tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "data"
    m = _manager(d, clock)
    gone = m.create_log("t", 0)
    m.create_log("u", 0)
    _keyed(gone, 5, "k", clock.now_ms)
    assert gone.delete_records_before(30) == 30
    assert m.delete_log("t", 0)
    m.checkpoint()
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        entries = read_checkpoint(d / name)
        assert ("t", 0) not in entries and ("u", 0) in entries, (name, entries)
    m.shutdown()


def test_load_drops_entries_of_partitions_without_a_log(tmp_path: Path,
                                                        clock: FakeTime) -> None:
    """A crash between a deletion's rename and its checkpoint writes: the next start drops
    the entries before a log of the same name can be made again."""
    d = tmp_path / "data"
    m = _manager(d, clock)
    _keyed(m.create_log("u", 0), 3, "k", clock.now_ms)
    m.shutdown()
    for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                 CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        entries = read_checkpoint(d / name)
        entries.update({("t", 0): 30, ("u", 0): entries.get(("u", 0), 5)})
        write_checkpoint(d / name, entries)

    m = _manager(d, clock)
    for name in (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                 CLEANER_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
        entries = read_checkpoint(d / name)
        assert ("t", 0) not in entries and ("u", 0) in entries, (name, entries)
    lg = m.create_log("t", 0)
    _keyed(lg, 5, "k", clock.now_ms)
    m.checkpoint()
    assert read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)[("t", 0)] == 0
    m.shutdown()


def test_a_cleaner_pass_overtaken_by_the_deletion_writes_no_entry_back(
        tmp_path: Path, clock: FakeTime) -> None:
    """Kafka aborts the cleaning of a log being deleted: here the pass's commit finds the
    log closed and writes neither segments nor its checkpoint entry."""
    d = tmp_path / "data"
    m = _manager(d, clock)
    lg = m.create_log("t", 0)
    _keyed(lg, 10, "k", clock.now_ms)
    cleaner = LogCleaner(time=clock)
    assert cleaner.clean(lg) is not None
    first = read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)[("t", 0)]
    _keyed(lg, 10, "k", clock.now_ms)
    plan = cleaner.prepare(lg)
    assert plan is not None and plan[0].end_offset > first

    assert m.delete_log("t", 0)  # while the pass is between its prepare and its commit
    cleaner.commit(lg, *plan)

    assert ("t", 0) not in read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)
    assert cleaner.clean(lg) is None  # a later pass skips the closed log
    assert ("t", 0) not in read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)
    m.shutdown()


def test_min_cleanable_dirty_ratio_one_never_cleans_on_the_ratio(
        tmp_path: Path, clock: FakeTime) -> None:
    """A never-cleaned log's dirty ratio is exactly 1.0: Kafka's test is strictly greater,
    so min.cleanable.dirty.ratio=1.0 leaves it (max.compaction.lag.ms can still force it)."""
    config = dataclasses.replace(COMPACTED, min_cleanable_dirty_ratio=1.0)
    lg = Log(tmp_path / "t-0", config, time=clock)
    _keyed(lg, 10, "k", clock.now_ms)
    cleaner = LogCleaner(time=clock)
    rng = cleaner.cleanable_range(lg)
    assert rng.ratio == 1.0 and rng.cleanable_bytes > 0
    assert not cleaner.needs_cleaning(lg)
    assert cleaner.clean(lg) is None and cleaner.run([lg]) == []
    assert not (tmp_path / CLEANER_OFFSET_CHECKPOINT).exists()
    lg.config = dataclasses.replace(config, min_cleanable_dirty_ratio=0.99)
    assert cleaner.needs_cleaning(lg) and cleaner.clean(lg) is not None
    lg.close()
