from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import pytest

from kafkactl.log.errors import InvalidOffsetError, OffsetOutOfRange
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatch, TimestampType
from kafkactl.record.memory_records import iter_batches, scan
from tests.log.helpers import SMALL, FakeTime, assert_indexes_agree, fill, list_files, make_batch


def test_append_assigns_offsets_in_place(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, SMALL, time=clock)
    raw = bytearray(make_batch(3) + make_batch(2))
    info = log.append(raw, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 4, 5)
    assert info.valid_bytes == len(raw) and info.log_append_time == -1
    b1, b2 = list(iter_batches(raw))  # the caller's bytearray was stamped in place
    assert (b1.base_offset, b2.base_offset, b2.partition_leader_epoch) == (0, 3, 7)
    assert b1.is_valid() and b2.is_valid()
    info = log.append(make_batch(1))  # bytes: copied once, stamped
    assert info.first_offset == 5 and log.log_end_offset == 6
    data = log.read(0, 1 << 20).read_bytes()
    assert [b.base_offset for b in iter_batches(data)] == [0, 3, 5]
    assert bytes(data[: len(raw)]) == bytes(raw)  # same bytes, no re-encoding
    log.close()


def test_log_append_time_restamps_and_keeps_crc_valid(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, SMALL, time=clock)
    info = log.append(make_batch(3, ts=5), log_append_time=123_456)
    assert info.max_timestamp == 123_456 and info.log_append_time == 123_456
    (batch,) = iter_batches(log.read(0, 10_000).read_bytes())
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 123_456 and batch.is_valid()
    assert [r.timestamp for r in batch] == [123_456] * 3
    log.close()


def test_preassigned_offsets_must_increase(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, SMALL, time=clock)
    b = bytearray(make_batch(2))
    b[0:8] = (10).to_bytes(8, "big")
    info = log.append(b, assign_offsets=False)
    assert (info.first_offset, log.log_end_offset) == (10, 12)
    with pytest.raises(InvalidOffsetError):
        log.append(make_batch(1), assign_offsets=False)  # base offset 0 < 12
    log.close()


def test_read_semantics(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, SMALL, time=clock)
    bases = fill(log, 30, count=4)  # 4 records per batch
    first_size = RecordBatch(make_batch(4)).size
    for offset in (0, 1, 3, 4, 57, 119):
        s = log.read(offset, 1)  # min_one_batch: the whole batch holding `offset`
        batch = RecordBatch(s.read_bytes())
        assert batch.base_offset <= offset <= batch.last_offset
        assert s.length == batch.size == first_size and s.first_offset == batch.base_offset
    s = log.read(5, 3 * first_size)
    assert [b.base_offset for b in iter_batches(s.read_bytes())] == [4, 8, 12]
    assert log.read(5, 1, min_one_batch=False).length == 1
    end = log.read(log.log_end_offset, 100)
    assert end.length == 0 and end.first_offset == 120
    bounded = log.read(0, 1 << 20, max_offset=8)  # e.g. the high watermark
    assert [b.base_offset for b in iter_batches(bounded.read_bytes())] == [0, 4]
    with pytest.raises(OffsetOutOfRange):
        log.read(121, 100)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)
    assert bases == list(range(0, 120, 4))
    log.close()


def test_roll_on_segment_bytes_and_indexes(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=2000)
    log = Log(log_dir, cfg, time=clock)
    fill(log, 60)
    assert len(log.segments) > 5
    for seg in log.segments:
        assert seg.size <= 2000
        assert_indexes_agree(seg)
    for seg in log.segments[:-1]:  # rolled: indexes trimmed to their entries
        assert seg.offset_index.path.stat().st_size == 8 * seg.offset_index.entry_count
        assert seg.time_index.path.stat().st_size == 12 * seg.time_index.entry_count
    assert log.active_segment.offset_index.path.stat().st_size == 4096  # preallocated
    names = list_files(log_dir)
    assert f"{log.segments[1].base_offset:020d}.log" in names
    # every offset readable across segments
    for off in range(0, log.log_end_offset, 7):
        b = RecordBatch(log.read(off, 1).read_bytes())
        assert b.base_offset <= off <= b.last_offset
    log.close()


def test_roll_on_segment_ms(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_ms=1000)
    log = Log(log_dir, cfg, time=clock)
    log.append(make_batch(1, ts=10_000))
    log.append(make_batch(1, ts=10_500))
    assert len(log.segments) == 1
    log.append(make_batch(1, ts=11_001))  # > segment.ms after the first batch's timestamp
    assert len(log.segments) == 2 and log.active_segment.base_offset == 2
    # no timestamps (-1): the segment's age on the clock counts
    log.append(make_batch(1, ts=-1))
    clock.now_ms += 2000
    log.append(make_batch(1, ts=-1))
    assert len(log.segments) == 3
    log.close()


def test_roll_when_index_full(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_index_bytes=8 * 3, index_interval_bytes=0)
    log = Log(log_dir, cfg, time=clock)
    fill(log, 12)
    assert len(log.segments) >= 3
    for seg in log.segments:
        assert seg.offset_index.entry_count <= 3
        assert_indexes_agree(seg)
    log.close()


def test_flush_messages_advances_recovery_point(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, flush_messages=5)
    log = Log(log_dir, cfg, time=clock)
    log.append(make_batch(3))
    assert log.recovery_point == 0
    log.append(make_batch(3))
    assert log.recovery_point == 6
    log.close()


def test_flush_ms(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, flush_ms=1000)
    log = Log(log_dir, cfg, time=clock)
    log.append(make_batch(2))
    assert not log.maybe_flush()
    clock.now_ms += 1000
    assert log.maybe_flush() and log.recovery_point == 2
    assert not log.maybe_flush()  # nothing unflushed
    log.close()


def test_flush_from_another_thread_while_appending(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=3000)
    log = Log(log_dir, cfg, time=clock)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=flusher)
    t.start()
    try:
        fill(log, 300)
    finally:
        stop.set()
        t.join()
    assert not errors
    log.flush()
    assert log.recovery_point == log.log_end_offset == 900
    log.close()


def test_retention_ms_deletes_whole_old_segments(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=1500, retention_ms=10_000,
                              file_delete_delay_ms=5000)
    log = Log(log_dir, cfg, time=clock)
    now = clock.now_ms
    for i in range(40):
        log.append(make_batch(2, ts=now - 100_000 + i * 5000))
    n_before = len(log.segments)
    snapshot = log.segments  # a reader's view
    old_slice = log.read(0, 100)
    deleted = log.delete_old_segments(now)
    assert 0 < deleted < n_before
    assert log.segments[0].base_offset == log.log_start_offset > 0
    for seg in log.segments[:-1]:
        assert now - seg.largest_timestamp() <= 10_000 or seg is log.segments[0]
    assert any(n.endswith(".log.deleted") for n in list_files(log_dir))
    # the reader's snapshot and its fd still work until the delete delay passes
    assert len(snapshot) == n_before
    assert RecordBatch(old_slice.read_bytes()).base_offset == 0
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    assert log.delete_pending(now) == 0
    assert log.delete_pending(now + 5000) == deleted
    assert not any(n.endswith(".deleted") for n in list_files(log_dir))
    log.close()


def test_retention_expires_everything_keeps_an_empty_active_segment(
        log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, retention_ms=1000)
    log = Log(log_dir, cfg, time=clock)
    fill(log, 5, ts0=clock.now_ms - 10_000)
    assert log.delete_old_segments(clock.now_ms) == 1
    assert len(log.segments) == 1 and log.active_segment.size == 0
    assert log.log_start_offset == log.log_end_offset == 15
    assert log.append(make_batch(1)).first_offset == 15
    log.close()


def test_retention_bytes(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    log = Log(log_dir, cfg, time=clock)
    fill(log, 40)
    log.delete_old_segments(clock.now_ms)
    assert log.size_in_bytes <= 2500 + log.active_segment.size
    assert sum(s.size for s in log.segments[1:]) <= 2500
    log.close()


def test_compact_only_topics_are_not_deleted_by_time(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=1000, retention_ms=1, cleanup_policy="compact")
    log = Log(log_dir, cfg, time=clock)
    fill(log, 20, ts0=0)
    assert log.delete_old_segments(clock.now_ms) == 0
    log.close()


def test_fetch_offset_by_timestamp(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=1500)
    log = Log(log_dir, cfg, time=clock)
    fill(log, 50, count=3, ts0=1_000)  # batch i holds timestamps 1000+10i .. +2
    assert len(log.segments) > 2
    assert log.fetch_offset_by_timestamp(0) == (0, 1000)
    assert log.fetch_offset_by_timestamp(1001) == (1, 1001)
    assert log.fetch_offset_by_timestamp(1003) == (3, 1010)  # first record with ts >= 1003
    assert log.fetch_offset_by_timestamp(1_252) == (77, 1_252)
    assert log.fetch_offset_by_timestamp(1_492) == (149, 1_492)
    assert log.fetch_offset_by_timestamp(1_493) is None
    assert log.fetch_offset_by_timestamp(-2) == (0, -1)
    assert log.fetch_offset_by_timestamp(-1) == (150, -1)
    assert log.fetch_offset_by_timestamp(-3) == (149, 1_492)
    log.close()
    again = Log(log_dir, cfg, time=clock, needs_recovery=False)
    assert again.fetch_offset_by_timestamp(1_252) == (77, 1_252)
    again.close()


def test_truncate_to(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=1500)
    log = Log(log_dir, cfg, time=clock)
    fill(log, 40, count=2)
    log.truncate_to(41)  # drops the batch holding 41 (40-41) whole
    assert log.log_end_offset == 40
    assert log.active_segment.base_offset <= 40
    assert_indexes_agree(log.active_segment)
    assert log.append(make_batch(1)).first_offset == 40
    log.truncate_to(0)
    assert log.log_end_offset == 0 and len(log.segments) == 1
    assert log.append(make_batch(1)).first_offset == 0
    log.close()


def test_delete_records_before(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=1000)
    log = Log(log_dir, cfg, time=clock)
    fill(log, 30)
    second = log.segments[1].base_offset
    assert log.delete_records_before(second + 1) == second + 1
    assert log.segments[0].base_offset == second  # segments wholly below are gone
    with pytest.raises(OffsetOutOfRange):
        log.read(second, 10)
    assert log.read(second + 1, 10).first_offset == second  # batch holding it
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(log.log_end_offset + 1)
    log.close()


def test_reopen_clean_keeps_everything(log_dir: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(SMALL, segment_bytes=1500)
    log = Log(log_dir, cfg, time=clock)
    fill(log, 40)
    log.flush()
    end, data = log.log_end_offset, b"".join(s.read_bytes(0, s.size) for s in log.segments)
    log.close()
    again = Log(log_dir, cfg, time=clock, recovery_point=end, needs_recovery=False)
    assert again.log_end_offset == end and not again.recovery_reports
    assert b"".join(s.read_bytes(0, s.size) for s in again.segments) == data
    assert again.append(make_batch(1)).first_offset == end
    for seg in again.segments:
        assert_indexes_agree(seg)
    again.close()


def test_leftover_files_are_settled(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, SMALL, time=clock)
    fill(log, 3)
    log.close()
    (log_dir / "00000000000000000099.log.deleted").write_bytes(b"x")
    (log_dir / "00000000000000000099.index").write_bytes(b"")  # orphan index
    (log_dir / "00000000000000000000.log.cleaned").write_bytes(b"x")
    again = Log(log_dir, SMALL, time=clock)
    names = list_files(log_dir)
    assert "00000000000000000099.index" not in names
    assert "00000000000000000000.log.cleaned" not in names
    assert again.delete_pending(clock.now_ms) == 1
    assert "00000000000000000099.log.deleted" not in list_files(log_dir)
    again.close()


def test_scan_of_written_segment_is_clean(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, SMALL, time=clock)
    fill(log, 10)
    seg = log.active_segment
    res = scan(seg.read_bytes(0, seg.size), expected_offset=0)
    assert res.is_clean and res.batch_count == 10 and res.last_offset == 29
    assert os.path.getsize(seg.log_path) == seg.size
    log.close()


@pytest.mark.parametrize("kind", ["bytearray", "memoryview"])
def test_single_batch_path_matches_the_general_path(tmp_path: Path, clock: FakeTime,
                                                    kind: str) -> None:
    """One writable batch per append takes Log's single-batch path; a read-only `bytes`
    copy of the same batches takes the general loop. Files, indexes, infos must agree,
    across rolls and index entries, with timestamps going up, flat and down."""
    stamps = [1_000, 1_000, 2_000, 1_500, -1, 3_000] * 8
    cfg = dataclasses.replace(SMALL, segment_bytes=4_000)
    fast, slow = Log(tmp_path / "f-0", cfg, time=clock), Log(tmp_path / "s-0", cfg, time=clock)
    for i, ts in enumerate(stamps):
        raw = make_batch(1 + i % 4, ts=ts, value_size=30 + i * 7)
        buf = bytearray(raw)
        info_fast = fast.append(buf if kind == "bytearray" else memoryview(buf)[0:],
                                leader_epoch=3)
        info_slow = slow.append(bytes(raw), leader_epoch=3)
        assert dataclasses.astuple(info_fast) == dataclasses.astuple(info_slow)
    assert len(fast.segments) == len(slow.segments) > 1
    for a, b in zip(fast.segments, slow.segments, strict=True):
        assert a.read_bytes(0, a.size) == b.read_bytes(0, b.size)
        assert a.base_offset == b.base_offset
        assert_indexes_agree(a)
        assert list(a.offset_index.entries()) == list(b.offset_index.entries())
        assert list(a.time_index.entries()) == list(b.time_index.entries())
    fast.close()
    slow.close()
