"""Fault tests: torn tails at every byte, garbage appended, bit flips; legacy segments.

After recovery the log must hold exactly the longest valid prefix of batches, and its
indexes must be exactly what Kafka would build from those bytes."""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import pytest

from kafkactl.log.log import Log
from kafkactl.log.recovery import inspect_segment
from kafkactl.record.codecs import Compression
from kafkactl.record.legacy import build_message_set
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import SMALL, FakeTime, assert_indexes_agree, fill, make_batch

CFG = dataclasses.replace(SMALL, index_interval_bytes=200)


def _build(tmp: Path, clock: FakeTime, batches: int = 12) -> tuple[Path, bytes, list[int]]:
    """A closed one-segment log; returns (its .log path, bytes, batch end positions)."""
    d = tmp / "src-0"
    log = Log(d, CFG, time=clock)
    ends = []
    for i in range(batches):
        log.append(make_batch(1 + i % 4, ts=1000 + i, value_size=10 + 7 * i))
        ends.append(log.active_segment.size)
    path = log.active_segment.log_path
    log.close()
    return path, path.read_bytes(), ends


def _recovered(tmp: Path, src_dir: Path, name: str, data: bytes, clock: FakeTime) -> Log:
    d = tmp / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src_dir, d)
    (d / "00000000000000000000.log").write_bytes(data)
    return Log(d, CFG, time=clock, recovery_point=0, needs_recovery=True)


def _check(log: Log, expected: bytes) -> None:
    seg = log.active_segment
    assert seg.read_bytes(0, seg.size + 10) == expected
    assert_indexes_agree(seg)
    batches = list(iter_batches(expected))
    assert log.log_end_offset == (batches[-1].last_offset + 1 if batches else 0)
    for b in batches:
        s = log.read(b.base_offset, 1)
        assert s.position == b.position and s.length == b.size


def _valid_prefix(ends: list[int], cut: int) -> int:
    return max([0] + [e for e in ends if e <= cut])


def test_truncated_last_batch_at_every_byte(tmp_path: Path, clock: FakeTime) -> None:
    path, data, ends = _build(tmp_path, clock)
    start_last = ends[-2]
    for cut in range(start_last, len(data) + 1):
        log = _recovered(tmp_path, path.parent, "t-0", data[:cut], clock)
        keep = _valid_prefix(ends, cut)
        _check(log, data[:keep])
        (report,) = log.recovery_reports
        assert report.valid_bytes == keep and report.bytes_truncated == cut - keep
        assert (report.error is None) == (cut == keep)
        log.close()


def test_truncation_anywhere_keeps_the_prefix(tmp_path: Path, clock: FakeTime) -> None:
    path, data, ends = _build(tmp_path, clock)
    rng = random.Random(1234)
    for cut in sorted(rng.sample(range(len(data)), 25)):
        log = _recovered(tmp_path, path.parent, "t-0", data[:cut], clock)
        _check(log, data[: _valid_prefix(ends, cut)])
        log.close()


@pytest.mark.parametrize("seed", range(8))
def test_random_garbage_appended(tmp_path: Path, clock: FakeTime, seed: int) -> None:
    path, data, _ends = _build(tmp_path, clock)
    rng = random.Random(seed)
    garbage = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
    if seed == 0:
        garbage = bytes(4096)  # the inode grew but the block was never written
    log = _recovered(tmp_path, path.parent, "g-0", data + garbage, clock)
    _check(log, data)
    assert log.recovery_reports[0].bytes_truncated == len(garbage)
    log.close()


@pytest.mark.parametrize("seed", range(20))
def test_random_bit_flip_cuts_at_the_damaged_batch(tmp_path: Path, clock: FakeTime,
                                                   seed: int) -> None:
    path, data, ends = _build(tmp_path, clock)
    rng = random.Random(seed)
    bit = rng.randrange(len(data) * 8)
    damaged = bytearray(data)
    damaged[bit // 8] ^= 1 << (bit % 8)
    starts = [0] + ends[:-1]
    hit = max(i for i, s in enumerate(starts) if s <= bit // 8)
    log = _recovered(tmp_path, path.parent, "b-0", bytes(damaged), clock)
    seg = log.active_segment
    # everything before the damaged batch survives byte for byte
    assert seg.size >= starts[hit]
    assert seg.read_bytes(0, starts[hit]) == data[: starts[hit]]
    # a flip in the base offset / epoch (outside the CRC) can leave a valid batch whose
    # offsets still increase; otherwise the damaged batch and all after it are gone
    if seg.size > starts[hit]:
        assert bit // 8 - starts[hit] < 17
    _check(log, seg.read_bytes(0, seg.size))
    log.close()


def test_recovery_point_skips_flushed_segments(tmp_path: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(CFG, segment_bytes=1200)
    d = tmp_path / "rp-0"
    log = Log(d, cfg, time=clock)
    fill(log, 40)
    log.flush()
    rp = log.recovery_point
    segments = [s.base_offset for s in log.segments]
    log.close()
    again = Log(d, cfg, time=clock, recovery_point=rp, needs_recovery=True)
    recovered = [r.base_offset for r in again.recovery_reports]
    assert recovered == [segments[-1]]  # only the segment holding the recovery point
    again.close()
    again = Log(d, cfg, time=clock, recovery_point=0, needs_recovery=True)
    assert [r.base_offset for r in again.recovery_reports] == segments
    assert all(r.bytes_truncated == 0 for r in again.recovery_reports)
    again.close()


def test_unclean_close_with_preallocated_indexes(tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "crash-0"
    log = Log(d, CFG, time=clock)
    fill(log, 20)
    seg = log.active_segment
    size = seg.size
    # simulate a crash: no close (indexes stay preallocated), then a torn tail
    with open(seg.log_path, "ab") as f:
        f.write(make_batch(3)[:50])
    again = Log(d, CFG, time=clock, needs_recovery=True)
    assert again.active_segment.size == size
    assert_indexes_agree(again.active_segment)
    assert again.append(make_batch(1)).first_offset == 60
    again.close()
    log.close()


def test_missing_and_corrupt_index_files_are_rebuilt(tmp_path: Path, clock: FakeTime) -> None:
    cfg = dataclasses.replace(CFG, segment_bytes=1200)
    d = tmp_path / "idx-0"
    log = Log(d, cfg, time=clock)
    fill(log, 30)
    log.flush()
    rp = log.recovery_point
    first, second = log.segments[0], log.segments[1]
    log.close()
    first.offset_index.path.unlink()
    second.offset_index.path.write_bytes(b"\x00\x00\x00\x00\x00\x00\x00\x05")  # offset <= base
    again = Log(d, cfg, time=clock, recovery_point=rp, needs_recovery=False)
    assert {r.base_offset for r in again.recovery_reports} == {first.base_offset,
                                                               second.base_offset}
    for seg in again.segments:
        assert_indexes_agree(seg)
    again.close()


def test_later_segments_are_deleted_after_a_torn_middle_segment(tmp_path: Path,
                                                                 clock: FakeTime) -> None:
    """A torn middle segment is cut and every later segment deleted (Kafka's
    LogLoader.recoverLog): the log stays contiguous."""
    cfg = dataclasses.replace(CFG, segment_bytes=1200)
    d = tmp_path / "mid-0"
    log = Log(d, cfg, time=clock)
    fill(log, 30)
    segs = [(s.log_path, s.size) for s in log.segments]
    log.close()
    mid_path, mid_size = segs[1]
    with open(mid_path, "r+b") as f:
        f.truncate(mid_size - 5)
    again = Log(d, cfg, time=clock, needs_recovery=True)
    assert len(again.segments) == 2
    assert again.log_end_offset == again.recovery_reports[1].last_offset + 1
    assert again.recovery_reports[1].error is not None
    assert not any(p.exists() for p, _size in segs[2:])
    again.close()


def _legacy_segment(d: Path, magic: int) -> tuple[bytes, int]:
    """Write a magic 0/1 segment as old Kafka would; returns (bytes, next offset)."""
    parts, offset = [], 0
    for i in range(6):
        codec = [Compression.NONE, Compression.GZIP, Compression.SNAPPY][i % 3]
        recs = [(1000 + i * 10 + j, b"k%d" % j, b"value-%d-%d" % (i, j)) for j in range(3)]
        if codec == Compression.NONE:
            for r in recs:
                parts.append(build_message_set(magic, [r], codec, base_offset=offset))
                offset += 1
        else:
            parts.append(build_message_set(magic, recs, codec, base_offset=offset))
            offset += 3
    d.mkdir(parents=True)
    data = b"".join(parts)
    (d / "00000000000000000000.log").write_bytes(data)
    return data, offset


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_segment_readable_and_recoverable(tmp_path: Path, clock: FakeTime,
                                                 magic: int) -> None:
    d = tmp_path / f"legacy{magic}-0"
    data, end = _legacy_segment(d, magic)
    cfg = dataclasses.replace(CFG, index_interval_bytes=50)
    log = Log(d, cfg, time=clock, needs_recovery=True)
    assert log.log_end_offset == end
    assert log.recovery_reports[0].bytes_truncated == 0
    assert_indexes_agree(log.active_segment)
    offsets = [r.offset for b in log.iter_batches() for r in b]
    assert offsets == list(range(end))
    for off in range(end):
        entries = list(iter_batches(log.read(off, 1).read_bytes()))
        assert any(r.offset == off for r in entries[0])
    if magic == 1:
        assert log.fetch_offset_by_timestamp(1021) == (7, 1021)
    log.close()
    # torn legacy tail
    with open(d / "00000000000000000000.log", "ab") as f:
        f.write(data[:20])
    again = Log(d, cfg, time=clock, needs_recovery=True)
    assert again.log_end_offset == end and again.active_segment.size == len(data)
    assert_indexes_agree(again.active_segment)
    assert again.append(make_batch(2)).first_offset == end  # v2 after legacy
    again.close()


def test_inspect_segment_changes_nothing(tmp_path: Path, clock: FakeTime) -> None:
    path, data, ends = _build(tmp_path, clock)
    path.write_bytes(data + b"garbage!" * 9)
    before = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    report = inspect_segment(path, index_interval_bytes=CFG.index_interval_bytes)
    assert report.dry_run and report.valid_bytes == len(data) and report.bytes_truncated == 72
    assert report.valid_batches == len(ends) and not report.indexes_rebuilt
    assert {p.name: p.read_bytes() for p in path.parent.iterdir()} == before
