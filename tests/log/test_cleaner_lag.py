"""min.compaction.lag.ms and max.compaction.lag.ms (KIP-354) on real logs, with a fake
clock: a segment whose largest timestamp is newer than now - min.compaction.lag.ms is not
cleaned (nor anything after it), and a log with a dirty record older than now -
max.compaction.lag.ms is cleaned below min.cleanable.dirty.ratio, before dirtier logs."""

from __future__ import annotations

from pathlib import Path

from kafkactl.log.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_checkpoint
from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder
from tests.log.helpers import FakeTime

MINUTE_MS = 60_000


def _config(**extra: str) -> LogConfig:
    props = {"cleanup.policy": "compact", "segment.bytes": "1048576",
             "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"}
    props.update(extra)
    return LogConfig.from_properties(props)


def _append(lg: Log, ts: int, *items: tuple[bytes, bytes]) -> None:
    b = RecordBatchBuilder()
    for k, v in items:
        b.append(ts, k, v)
    lg.append(b.build())


def _values(lg: Log, key: bytes) -> list[bytes]:
    return [bytes(r.value) for bt in lg.iter_batches() for r in bt
            if r.key is not None and bytes(r.key) == key and r.value is not None]


def test_min_lag_keeps_recent_segments_uncleaned(tmp_path: Path, clock: FakeTime) -> None:
    lg = Log(tmp_path / "lag-0", _config(**{"min.compaction.lag.ms": str(MINUTE_MS)}),
             time=clock)
    now = clock.now_ms
    _append(lg, now - 1000, (b"a", b"a1"))
    lg.roll()
    _append(lg, now - 500, (b"a", b"a2"))
    lg.roll()
    _append(lg, now, (b"z", b"active"))
    cleaner = LogCleaner(time=clock)
    assert not cleaner.needs_cleaning(lg)
    assert cleaner.clean(lg) is None
    cleaner.clean(lg, force=True)  # force skips the ratio, not the lag
    assert _values(lg, b"a") == [b"a1", b"a2"], "compacted within min.compaction.lag.ms"
    clock.now_ms = now - 1000 + MINUTE_MS  # a1's segment: largest timestamp == now - lag
    assert cleaner.needs_cleaning(lg)
    cleaner.clean(lg)
    # the first segment was cleaned, but only against keys below the second (still within
    # the lag): a2 must not supersede a1 yet
    assert _values(lg, b"a") == [b"a1", b"a2"]
    cp = read_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert cp[("lag", 0)] == lg.segments[1].base_offset  # bounded by the lag
    clock.now_ms = now - 500 + MINUTE_MS
    cleaner.clean(lg)
    assert _values(lg, b"a") == [b"a2"]
    assert _values(lg, b"z") == [b"active"]  # the active segment is never cleaned
    lg.close()


def test_min_lag_bounds_the_offset_map(tmp_path: Path, clock: FakeTime) -> None:
    """An old segment is cleaned, a newer one within the lag is not, and its records take
    no part in the key map: the old segment's latest value of a key survives."""
    lg = Log(tmp_path / "lag-0", _config(**{"min.compaction.lag.ms": str(MINUTE_MS)}),
             time=clock)
    now = clock.now_ms
    _append(lg, now - 10 * MINUTE_MS, (b"a", b"a1"), (b"a", b"a2"), (b"b", b"b1"))
    lg.roll()
    _append(lg, now - 1000, (b"a", b"a3"), (b"b", b"b2"))
    lg.roll()
    _append(lg, now, (b"z", b"active"))
    stats = LogCleaner(time=clock).clean(lg, force=True)
    assert stats is not None and stats.end_offset == 3
    assert _values(lg, b"a") == [b"a2", b"a3"]
    assert _values(lg, b"b") == [b"b1", b"b2"]
    lg.close()


def _cleaned_log(path: Path, clock: FakeTime, **extra: str) -> Log:
    """A log with a big clean part and one small dirty segment (ratio far below 0.9)."""
    lg = Log(path, _config(**{"min.cleanable.dirty.ratio": "0.9", **extra}), time=clock)
    now = clock.now_ms
    for i in range(50):
        _append(lg, now - 2000, (b"k%d" % i, b"v" * 100))
    lg.roll()
    _append(lg, now - 1000, (b"k0", b"w"))
    lg.roll()
    _append(lg, now, (b"z", b"active"))
    cleaner = LogCleaner(time=clock)
    cleaner._save_checkpoint(lg, lg.segments[1].base_offset)  # the first part is clean
    assert cleaner.dirty_ratio(lg) < 0.1
    return lg


def test_max_lag_cleans_below_the_dirty_ratio(tmp_path: Path, clock: FakeTime) -> None:
    lg = _cleaned_log(tmp_path / "maxlag-0", clock,
                      **{"max.compaction.lag.ms": str(MINUTE_MS)})
    cleaner = LogCleaner(time=clock)
    assert cleaner.clean(lg) is None  # the dirty record is 1 s old: not overdue yet
    assert _values(lg, b"k0") == [b"v" * 100, b"w"]
    clock.now_ms += MINUTE_MS - 1000 + 1  # the dirty segment's first batch is overdue
    assert cleaner.needs_cleaning(lg)
    assert cleaner.clean(lg) is not None
    assert _values(lg, b"k0") == [b"w"]
    lg.close()


def test_max_lag_respects_min_lag(tmp_path: Path, clock: FakeTime) -> None:
    """Overdue by max.compaction.lag.ms but within min.compaction.lag.ms: not cleaned."""
    lg = _cleaned_log(tmp_path / "maxlag-0", clock,
                      **{"max.compaction.lag.ms": "100", "min.compaction.lag.ms": "5000"})
    cleaner = LogCleaner(time=clock)
    assert cleaner.clean(lg) is None
    clock.now_ms += 4001  # now the dirty segment is older than min.compaction.lag.ms
    assert cleaner.clean(lg) is not None
    assert _values(lg, b"k0") == [b"w"]
    lg.close()


def test_overdue_log_is_cleaned_first(tmp_path: Path, clock: FakeTime) -> None:
    overdue = _cleaned_log(tmp_path / "overdue-0", clock,
                           **{"max.compaction.lag.ms": str(MINUTE_MS)})
    dirty = Log(tmp_path / "dirty-0", _config(), time=clock)
    for r in range(3):
        for i in range(20):
            _append(dirty, clock.now_ms, (b"k%d" % i, b"v%d" % r))
    dirty.roll()
    _append(dirty, clock.now_ms, (b"z", b"active"))
    clock.now_ms += 2 * MINUTE_MS
    cleaner = LogCleaner(time=clock)
    assert cleaner.dirty_ratio(dirty) > cleaner.dirty_ratio(overdue)
    stats = cleaner.run([dirty, overdue])
    assert [(s.topic, s.partition) for s in stats] == [("overdue", 0), ("dirty", 0)]
    overdue.close()
    dirty.close()
