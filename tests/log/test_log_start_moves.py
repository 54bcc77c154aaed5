"""What goes when a log's start moves up or its segments are deleted, as Kafka's UnifiedLog
does it, on real logs on disk:

- the producer snapshots of deleted segments (retention, DeleteRecords, compaction): the
  one at each deleted segment's base offset (Kafka's removeAndMarkSnapshotForDeletion,
  renamed `.deleted` and unlinked after file.delete.delay.ms with the segment) and any
  other below the first segment left; the one at the first segment's base stays (recovery
  rebuilds that segment's .txnindex from it) and so does the producer state: duplicates
  are still recognised and the next sequence accepted, after a clean or an unclean restart;
- every snapshot on a full truncation (Kafka's truncateFullyAndStartAt): the producer
  state after it is empty, not an old snapshot's;
- the leader epochs wholly below the new log start (LeaderEpochFileCache.truncateFromStart:
  the last of them now starts at the log start), in memory and in
  `leader-epoch-checkpoint`, so OffsetForLeaderEpoch answers for an old epoch as Kafka's
  does; a checkpoint left untrimmed (a crash, or written before this) is trimmed when the
  partition opens its log, as Kafka's LogLoader does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkactl.broker.partition import Partition
from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.leader_epoch_cache import LeaderEpochCache
from kafkactl.log.log import Log
from kafkactl.log.manager import LogManager
from kafkactl.log.producer_snapshot import encode_snapshot
from kafkactl.log.producer_state import ProducerStateError, snapshot_path
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatchBuilder
from tests.log.test_transactions import Producer, produce

PID = 4242
CONFIG = LogConfig(segment_bytes=1200, file_delete_delay_ms=0)


def snapshots(d: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in d.glob("*.snapshot"))


def epochs_file(d: Path) -> list[tuple[int, int]]:
    lines = (d / "leader-epoch-checkpoint").read_text().split("\n")
    return [(int(e), int(o)) for e, o in (ln.split() for ln in lines[2:2 + int(lines[1])])]


def leader(d: Path, config: LogConfig = CONFIG, *, log_start: int = 0,
           recovery_point: int | None = None, epoch: int = 0) -> Partition:
    """The partition over the log in `d`, leading at `epoch` (a clean start unless
    `recovery_point`: then an unclean one, recovered from there)."""
    lg = Log(d, config, log_start_offset=log_start, recovery_point=recovery_point or 0,
             needs_recovery=recovery_point is not None)
    part = Partition("t", 0, lg)
    part.load_producer_state()
    part.become_leader(1, epoch, [1], [1], 0, now_ms=0.0)
    return part


def fill(part: Partition, p: Producer, batches: int, size: int = 150) -> None:
    for _ in range(batches):
        produce(part, p.batch(1, txn=False, value=b"x" * size))


def check_state(part: Partition, p: Producer) -> None:
    """The producer's last batch is a duplicate, a gap is refused, the next sequence is
    accepted."""
    dup = part.producer_state.check(PID, p.epoch, p.seq - 1, p.seq - 1)
    assert dup is not None and dup.last_offset == part.log_end_offset - 1
    with pytest.raises(ProducerStateError) as e:
        part.producer_state.check(PID, p.epoch, p.seq + 1, p.seq + 1)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    end = part.log_end_offset
    assert produce(part, p.batch(1, txn=False)) == end


def test_retention_deletes_the_snapshots_of_the_segments_it_deletes(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    part = leader(d)
    p = Producer(PID)
    fill(part, p, 42)
    part.take_snapshot()  # a checkpoint's, at the log end: inside the active segment
    mid = part.log_end_offset
    fill(part, p, 5)
    bases = [s.base_offset for s in part.log.segments]
    assert len(bases) >= 6 and mid not in bases and bases[-2] < mid < bases[-1]
    before = snapshots(d)
    # one at each segment's base (but the first: an empty log's) and the checkpoint's
    assert before == sorted([*bases[1:], mid])

    # retention keeps the active segment only
    part.log.config = LogConfig(segment_bytes=1200, file_delete_delay_ms=0,
                                retention_bytes=part.log.active_segment.size)
    assert part.log.delete_old_segments() == len(bases) - 1
    assert part.log_start_offset == bases[-1] == part.log.segments[0].base_offset
    # renamed now, unlinked with the segments once file.delete.delay.ms passed
    assert snapshots(d) == [bases[-1]]
    assert sorted(f.name for f in d.glob("*.snapshot.deleted")) == \
        [snapshot_path(d, o).name + ".deleted" for o in sorted([*bases[1:-1], mid])]
    part.log.delete_pending(force=True)
    assert not list(d.glob("*.deleted"))
    check_state(part, p)

    # a clean restart (the shutdown snapshot), then an unclean one (replayed)
    part.take_snapshot()
    start = part.log_start_offset
    part.log.close()
    part = leader(d, log_start=start)
    check_state(part, p)
    fill(part, p, 3)
    point = part.log.recovery_point
    part = leader(d, log_start=start, recovery_point=point)
    check_state(part, p)
    assert all(o >= part.log.segments[0].base_offset for o in snapshots(d))


def test_delete_records_keeps_the_snapshot_of_the_segment_holding_the_start(
        tmp_path: Path) -> None:
    """DeleteRecords into a segment: the segments wholly below go with their snapshots;
    the snapshot at the base of the segment holding the new start stays (Kafka keeps it
    until that segment goes: it describes the transactions open at its base)."""
    d = tmp_path / "t-0"
    part = leader(d)
    p = Producer(PID)
    fill(part, p, 40)
    segs = part.log.segments
    assert len(segs) >= 5
    # the partition keeps a snapshot at each segment's base (the first's: an empty log)
    assert snapshots(d) == [s.base_offset for s in segs[1:]]
    start = segs[-1].base_offset + 1  # inside the active segment
    part.log.delete_records_before(start)
    assert part.log_start_offset == start
    assert part.log.segments == segs[-1:]
    assert snapshots(d) == [segs[-1].base_offset]
    part.log.delete_pending(force=True)
    assert not list(d.glob("*.deleted"))
    check_state(part, p)


def test_a_full_truncation_takes_every_snapshot(tmp_path: Path) -> None:
    """A follower whose leader's log starts past its log end starts over there: no snapshot
    is left to load, so its producer state is empty (it was an old snapshot's: producers
    of records that are gone)."""
    d = tmp_path / "t-0"
    part = leader(d)
    fill(part, Producer(PID), 20)
    part.take_snapshot()
    assert snapshots(d)
    part.become_follower(2, 1, 1, [1, 2], [1, 2], 1)
    part.restart_at(1000)
    assert part.producer_state.producers == {}
    assert snapshots(d) == []
    assert part.epochs.epochs == [] and epochs_file(d) == []
    part.log.delete_pending(force=True)
    assert not list(d.glob("*.deleted"))


def test_compaction_takes_the_snapshots_of_the_segments_it_merges(tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    config = LogConfig.from_properties({
        "cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "0",
        "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"})
    lg = Log(d, config)
    for r in range(6):
        for start in range(0, 200, 20):
            b = RecordBatchBuilder()
            for k in range(start, start + 20):
                b.append(1_000_000 + r, b"key-%d" % k, b"v%d-%d" % (r, k))
            lg.append(b.build())
    lg.roll()
    before = [s.base_offset for s in lg.segments]
    for base in before:  # as the partition writes them at each roll
        snapshot_path(d, base).write_bytes(encode_snapshot([]))
    assert LogCleaner().clean(lg, force=True) is not None
    after = [s.base_offset for s in lg.segments]
    merged = sorted(set(before) - set(after))
    assert merged  # the cleaner grouped segments
    assert snapshots(d) == after
    lg.delete_pending(force=True)
    assert not list(d.glob("*.deleted"))
    lg.close()


def test_the_leader_epoch_cache_is_trimmed_when_the_log_start_moves(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    part = leader(d, epoch=1)
    p = Producer(PID)
    fill(part, p, 10)
    two = part.log_end_offset
    part.become_leader(1, 2, [1], [1], 0, now_ms=0.0)
    fill(part, p, 10)
    three = part.log_end_offset
    part.become_leader(1, 3, [1], [1], 0, now_ms=0.0)
    fill(part, p, 10)
    assert epochs_file(d) == [(1, 0), (2, two), (3, three)]
    end = part.log_end_offset

    start = two + 3  # DeleteRecords inside epoch 2
    part.log.delete_records_before(start)
    assert list(zip(part.epochs.epochs, part.epochs.offsets, strict=True)) == \
        [(2, start), (3, three)]
    assert epochs_file(d) == [(2, start), (3, three)]
    # OffsetForLeaderEpoch as Kafka answers: an epoch older than every entry ends where the
    # first one after it starts (the log start here), reported with the epoch asked for
    assert part.epochs.end_offset_for(1, end) == (1, start)
    assert part.epochs.end_offset_for(0, end) == (0, start)
    assert part.epochs.end_offset_for(2, end) == (2, three)
    assert part.epochs.end_offset_for(3, end) == (3, end)

    # retention past the start of epoch 3: only epoch 3 left, from the new log start
    part.log.config = LogConfig(segment_bytes=1200, file_delete_delay_ms=0,
                                retention_bytes=part.log.active_segment.size)
    assert part.log.delete_old_segments() > 0
    new_start = part.log_start_offset
    assert new_start > three
    assert epochs_file(d) == [(3, new_start)]
    assert part.epochs.end_offset_for(2, end) == (2, new_start)

    # an entry exactly at the start stays as it is (Kafka's truncateFromStart is exclusive)
    cache = LeaderEpochCache(tmp_path)
    cache.assign(4, 10, flush=False)
    cache.assign(5, 20, flush=False)
    cache.truncate_from_start(10)
    assert (cache.epochs, cache.offsets) == ([4, 5], [10, 20])
    cache.truncate_from_start(25)
    assert (cache.epochs, cache.offsets) == ([5], [25])

    # a restart keeps it
    part.log.close()
    again = leader(d, log_start=new_start, epoch=3)
    assert list(zip(again.epochs.epochs, again.epochs.offsets, strict=True)) == \
        [(3, new_start)]


def test_a_followers_cache_is_trimmed_with_its_log_start(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    part = leader(d, epoch=1)
    fill(part, Producer(PID), 10)
    two = part.log_end_offset
    part.become_leader(1, 2, [1], [1], 0, now_ms=0.0)
    fill(part, Producer(PID + 1), 10)
    part.become_follower(1, 2, 3, [1, 2], [1, 2], 1)
    assert part.follow_leader_log_start(two + 1)
    assert epochs_file(d) == [(2, two + 1)]


def test_an_untrimmed_checkpoint_is_trimmed_when_the_log_opens(tmp_path: Path) -> None:
    """A checkpoint with epochs below the log start (the trim's write lost in a crash, a
    data dir written before logs trimmed it, or retention ran before the partition was
    made) is trimmed when the partition opens its log, as Kafka's LogLoader does."""
    d = tmp_path / "t-0"
    part = leader(d, epoch=1)
    p = Producer(PID)
    fill(part, p, 10)
    part.become_leader(1, 2, [1], [1], 0, now_ms=0.0)
    fill(part, p, 10)
    part.take_snapshot()
    start = part.log.segments[2].base_offset
    untrimmed = (d / "leader-epoch-checkpoint").read_bytes()
    part.log.delete_records_before(start)
    part.log.close()
    (d / "leader-epoch-checkpoint").write_bytes(untrimmed)  # as if the trim was lost
    stray = snapshot_path(d, 1)  # and a snapshot of a deleted segment
    stray.write_bytes(encode_snapshot([]))
    again = leader(d, log_start=start, epoch=2)
    assert epochs_file(d)[0][1] == start
    assert again.epochs.offsets[0] == start
    assert not stray.exists()


def test_a_moved_log_keeps_the_partitions_hooks(tmp_path: Path) -> None:
    """A move between log dirs (AlterReplicaLogDirs) puts a new Log in the manager: the
    partition's snapshot at roll and its leader-epoch cache go with it, so retention on
    the moved log still trims them."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, CONFIG)
    m.load()
    lg = m.create_log("t", 0)
    part = Partition("t", 0, lg)
    part.become_leader(1, 0, [1], [1], 0, now_ms=0.0)
    fill(part, Producer(PID), 5)
    home = Path(lg.dir).parent
    other = next(x for x in dirs if x != home)
    moved = Log(other / "t-0", CONFIG)  # as the mover's copy, renamed into place
    assert m.replace_log(("t", 0), moved, other) is lg
    assert moved.on_roll == lg.on_roll and moved.leader_epoch_cache is part.epochs
    lg.close()
    m.shutdown()
