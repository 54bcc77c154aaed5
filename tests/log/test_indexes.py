from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafkactl.log.errors import CorruptIndexError, InvalidOffsetError, LogSegmentFullError
from kafkactl.log.offset_index import OffsetIndex
from kafkactl.log.time_index import TimeIndex


def test_offset_index_preallocate_lookup_trim_reopen(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(p, 100, 8 * 10)
    idx.resize(idx.max_index_size)
    assert p.stat().st_size == 80 and idx.max_entries == 10 and idx.entry_count == 0
    for i in range(1, 6):
        idx.append(100 + i * 10, i * 1000)
    assert idx.lookup(99) == (100, 0)  # before the first entry: the segment start
    assert idx.lookup(110) == (110, 1000)
    assert idx.lookup(125) == (120, 2000)
    assert idx.lookup(10_000) == (150, 5000)
    with pytest.raises(InvalidOffsetError):
        idx.append(150, 6000)
    idx.flush()
    idx.close()
    # an untrimmed (preallocated) file: the zero tail is not counted
    again = OffsetIndex(p, 100, 80)
    assert again.entry_count == 5
    again.trim_to_valid_size()
    assert p.stat().st_size == 40
    again.close()
    ro = OffsetIndex.open_readonly(p)
    assert ro.base_offset == 100
    assert list(ro.entries()) == [(100 + i * 10, i * 1000) for i in range(1, 6)]
    ro.sanity_check(log_size=5001)
    with pytest.raises(CorruptIndexError):
        ro.sanity_check(log_size=4000)
    ro.close()
    assert struct.unpack(">ii", p.read_bytes()[:8]) == (10, 1000)  # relative offset, position


def test_offset_index_full_and_truncate(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, 24)
    idx.resize(24)
    for i in range(1, 4):
        idx.append(i, i * 10)
    assert idx.is_full
    with pytest.raises(LogSegmentFullError):
        idx.append(9, 90)
    idx.truncate_to(2)
    assert list(idx.entries()) == [(1, 10)]
    idx.truncate_to(0)
    assert idx.entry_count == 0
    idx.close()


def test_corrupt_offset_index_detected(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000007.index"
    p.write_bytes(struct.pack(">ii", 0, 10) + b"\x01")
    ro = OffsetIndex.open_readonly(p)
    with pytest.raises(CorruptIndexError):
        ro.sanity_check()
    ro.close()
    p.write_bytes(struct.pack(">ii", 5, 10) + struct.pack(">ii", 3, 20))
    ro = OffsetIndex.open_readonly(p)
    assert ro.full_check()  # offsets go backwards
    ro.close()


def test_time_index(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000050.timeindex"
    ti = TimeIndex(p, 50, 12 * 10)
    ti.resize(120)
    assert ti.lookup(5) == (-1, 50)
    assert ti.maybe_append(1000, 55)
    assert not ti.maybe_append(1000, 56)  # not newer: skipped
    assert ti.maybe_append(2000, 60)
    assert ti.lookup(1500) == (1000, 55)
    assert ti.lookup(2000) == (2000, 60)
    with pytest.raises(InvalidOffsetError):
        ti.maybe_append(3000, 54)
    ti.truncate_to(60)
    assert list(ti.entries()) == [(1000, 55)]
    ti.trim_to_valid_size()
    ti.close()
    assert p.stat().st_size == 12
    ro = TimeIndex.open_readonly(p)
    assert list(ro.entries()) == [(1000, 55)]
    ro.sanity_check()
    ro.close()


def test_empty_index_file_readonly(tmp_path: Path) -> None:
    p = tmp_path / "00000000000000000000.index"
    p.write_bytes(b"")
    ro = OffsetIndex.open_readonly(p)
    assert list(ro.entries()) == [] and ro.lookup(5) == (0, 0)
    ro.close()
