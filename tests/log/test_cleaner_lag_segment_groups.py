"""Segment grouping (Kafka's groupSegmentsBySize): the cleaner cleans consecutive small
segments into one, so repeated produce + clean with a small segment.bytes does not pile up
empty or tiny segment files; a crash at every step of a group's swap leaves a log that
reopens with every record once."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder
from tests.log.helpers import FakeTime, assert_indexes_agree

SEGMENT_BYTES = 1000


def _config(**extra: str) -> LogConfig:
    props = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
             "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01",
             "file.delete.delay.ms": "0"}
    props.update(extra)
    return LogConfig.from_properties(props)


def _append(lg: Log, ts: int, *items: tuple[bytes, bytes | None]) -> None:
    b = RecordBatchBuilder()
    for k, v in items:
        b.append(ts, k, v)
    lg.append(b.build())


def _state(lg: Log) -> list[tuple[int, bytes, bytes | None]]:
    return [(r.offset, bytes(r.key), None if r.value is None else bytes(r.value))
            for bt in lg.iter_batches() for r in bt]


def _logs(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(d.glob("*.log"))}


def test_repeated_produce_and_clean_leaves_no_empty_segments(tmp_path: Path,
                                                             clock: FakeTime) -> None:
    d = tmp_path / "groups-0"
    lg = Log(d, _config(), time=clock)
    cleaner = LogCleaner(time=clock)
    for r in range(30):
        for k in range(8):  # the same keys every round: older rounds are all superseded
            _append(lg, clock.now_ms, (b"key-%d" % k, b"round-%d-" % r + b"x" * 60))
        clock.now_ms += 1000
        cleaner.clean(lg)
        lg.delete_pending(force=True)
    files = _logs(d)
    active = f"{lg.active_segment.base_offset:020d}.log"
    empty = [n for n, size in files.items() if size == 0 and n != active]
    # at most the log's first segment (kept so the log start stays) is empty
    assert empty in ([], [f"{lg.segments[0].base_offset:020d}.log"]), files
    assert len(files) <= 6, files
    latest = {k: v for _o, k, v in _state(lg)}
    assert latest == {b"key-%d" % k: b"round-29-" + b"x" * 60 for k in range(8)}
    for seg in lg.segments[:-1]:
        assert_indexes_agree(seg)
    assert not list(d.glob("*.index.deleted")) and not list(d.glob("*.cleaned"))
    before = _state(lg)
    lg.close()
    reopened = Log(d, _config(), time=clock, needs_recovery=True)
    assert _state(reopened) == before
    assert reopened.log_start_offset == 0
    reopened.close()


def _small_segments(d: Path, clock: FakeTime, n: int = 10) -> Log:
    """n segments of one ~200-byte batch each with distinct keys, then an active one."""
    lg = Log(d, _config(), time=clock)
    for i in range(n):
        _append(lg, clock.now_ms, *[(b"k%d-%d" % (i, j), b"v" * 20) for j in range(5)])
        lg.roll()
    _append(lg, clock.now_ms, (b"k0-0", b"new"))  # supersedes one record
    return lg


def test_small_segments_are_cleaned_into_groups(tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "groups-0"
    lg = _small_segments(d, clock)
    sizes = [s.size for s in lg.segments[:-1]]
    assert len(sizes) == 10 and all(s < SEGMENT_BYTES // 3 for s in sizes)
    before = _state(lg)
    lg.roll()
    stats = LogCleaner(time=clock).clean(lg, force=True)
    assert stats is not None
    lg.delete_pending(force=True)
    inactive = lg.segments[:-1]
    # 4 + 4 + (2 + the small segment of "new"): each group at most segment.bytes
    assert [s.base_offset for s in inactive] == [0, 20, 40]
    assert all(s.size <= SEGMENT_BYTES for s in inactive)
    assert _state(lg) == [r for r in before if r[:2] != (0, b"k0-0")]
    for seg in inactive:
        assert_indexes_agree(seg)
    assert len(_logs(d)) == len(lg.segments)  # the grouped segments' files are gone
    assert not [p for p in d.iterdir() if p.name.endswith((".deleted", ".swap"))]
    lg.close()


@pytest.mark.parametrize("stop_after", [1, 2, 3, 4])
def test_crash_during_a_group_swap_reopens_intact(tmp_path: Path, clock: FakeTime,
                                                  stop_after: int) -> None:
    d = tmp_path / "groups-0"
    lg = _small_segments(d, clock)
    lg.roll()
    expected = {k: v for _o, k, v in _state(lg)}
    cleaner = LogCleaner(time=clock)
    plan = cleaner.prepare(lg, force=True)
    assert plan is not None
    stats, swaps = plan
    assert len(swaps[0].segments) > 1  # a group of several segments
    if stop_after > 1:
        cleaner.commit(lg, stats, swaps, stop_after=stop_after)
    for seg in lg.segments:  # "crash": no clean close
        seg.close()
    reopened = Log(d, _config(), time=clock, needs_recovery=True)
    state = _state(reopened)
    offsets = [o for o, _k, _v in state]
    assert offsets == sorted(set(offsets)), "duplicate or unordered offsets after the crash"
    assert {k: v for _o, k, v in state} == expected
    assert not list(d.glob("*.cleaned")) and not list(d.glob("*.swap"))
    LogCleaner(time=clock).clean(reopened, force=True)  # and it can still be cleaned
    assert {k: v for _o, k, v in _state(reopened)} == expected
    reopened.close()


def _stub(base: int, size: int, index_entries: int = 0) -> SimpleNamespace:
    index = SimpleNamespace(entry_count=index_entries, ENTRY_SIZE=8)
    time_index = SimpleNamespace(entry_count=index_entries, ENTRY_SIZE=12)
    return SimpleNamespace(base_offset=base, size=size, offset_index=index,
                           time_index=time_index)


def test_group_limits() -> None:
    from kafkactl.log.cleaner import _group_by_size

    cfg = SimpleNamespace(segment_bytes=1000, segment_index_bytes=120)
    segs = [_stub(0, 400), _stub(10, 400), _stub(20, 300), _stub(30, 0), _stub(40, 500)]
    groups = _group_by_size(segs, cfg, 50)  # type: ignore[arg-type]
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20, 30, 40]]
    # index sizes: each at most segment.index.bytes per group (time index: 12-byte entries)
    cfg.segment_index_bytes = 100
    segs = [_stub(0, 10, 5), _stub(10, 10, 5), _stub(20, 10, 1)]
    groups = _group_by_size(segs, cfg, 30)  # type: ignore[arg-type]
    assert [[s.base_offset for s in g] for g in groups] == [[0], [10, 20]]
    # offsets: a group may not span more than an int32 of offsets
    big = 2**31
    segs = [_stub(0, 10), _stub(big - 10, 10), _stub(big + 10, 0), _stub(big + 20, 10)]
    groups = _group_by_size(segs, cfg, big + 30)  # type: ignore[arg-type]
    assert [[s.base_offset for s in g] for g in groups] == [[0], [big - 10, big + 10,
                                                                  big + 20]]


def test_group_crash_settles_a_swap_over_several_segments(tmp_path: Path) -> None:
    """The loader alone: a .swap whose offsets cover later segments replaces them."""
    clock = FakeTime()
    d = tmp_path / "groups-0"
    lg = _small_segments(d, clock, n=4)
    lg.roll()
    cleaner = LogCleaner(time=clock)
    plan = cleaner.prepare(lg, force=True)
    assert plan is not None
    stats, swaps = plan
    covered = [s.base_offset for s in swaps[0].segments[1:]]
    assert covered
    cleaner.commit(lg, stats, swaps, stop_after=3)
    for seg in lg.segments:
        seg.close()
    reopened = Log(d, _config(), time=clock, needs_recovery=True)
    assert not [s for s in reopened.segments if s.base_offset in covered]
    reopened.close()
