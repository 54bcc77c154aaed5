"""Start-up checks of a log after a CLEAN stop (torn tails, corrupt offset indexes), the
WARNING every truncation logs, reads of a torn segment, `recover --salvage`, and the
helpers behind producer ids and deletion dir names."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kafkactl.cli.app import app
from kafkactl.log.errors import CorruptIndexError, CorruptRecordError
from kafkactl.log.log import Log
from kafkactl.log.manager import delete_dir_name
from kafkactl.log.producer_ids import max_producer_id
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import SMALL, FakeTime, assert_indexes_agree, fill, make_batch

CFG = dataclasses.replace(SMALL, index_interval_bytes=200)
MULTI = dataclasses.replace(CFG, segment_bytes=1500)


def _closed_log(d: Path, clock: FakeTime, cfg=CFG, batches: int = 12) -> tuple[int, list]:
    log = Log(d, cfg, time=clock)
    fill(log, batches)
    end = log.log_end_offset
    log.close()
    return end, [(b.base_offset, b.last_offset, b.position, b.size)
                 for s in sorted(d.glob("*.log")) for b in iter_batches(s.read_bytes())]


def test_torn_tail_after_clean_stop_is_cut_and_logged(tmp_path: Path, clock: FakeTime,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "orders-0"
    _end, batches = _closed_log(d, clock)
    seg = d / "00000000000000000000.log"
    os.truncate(seg, seg.stat().st_size - 37)
    with caplog.at_level(logging.WARNING, logger="kafkactl.log.loader"):
        log = Log(d, CFG, time=clock, needs_recovery=False)  # a clean stop: no recovery
    last_base, _last, last_pos, last_size = batches[-1]
    assert log.log_end_offset == last_base
    assert log.active_segment.size == last_pos
    assert_indexes_agree(log.active_segment)
    assert log.append(make_batch(2)).first_offset == last_base
    (rec,) = [r for r in caplog.records if "truncated" in r.getMessage()]
    msg = rec.getMessage()
    assert rec.levelno == logging.WARNING
    assert "orders-0" in msg and f"position {last_pos}" in msg
    assert f"now ends at offset {last_base}" in msg
    assert f"claims offset {last_base}" in msg
    size = last_pos + last_size - 37
    assert f"{size - last_pos} of {size} bytes cut" in msg
    log.close()


def test_zeros_after_clean_stop_are_cut(tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "orders-0"
    end, _batches = _closed_log(d, clock)
    seg = d / "00000000000000000000.log"
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(bytes(4096))
    log = Log(d, CFG, time=clock, needs_recovery=False)
    assert log.log_end_offset == end and log.active_segment.size == size
    log.close()


def test_healthy_clean_start_recovers_nothing(tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "orders-0"
    end, _ = _closed_log(d, clock, MULTI, batches=30)
    log = Log(d, MULTI, time=clock, needs_recovery=False)
    assert log.recovery_reports == [] and log.log_end_offset == end
    log.close()


def test_non_monotonic_index_is_rebuilt_at_first_lookup(tmp_path: Path, clock: FakeTime,
                                                caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "orders-0"
    end, batches = _closed_log(d, clock, MULTI, batches=30)
    index = d / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    assert len(data) >= 24
    data[8:16] = b"\x7f\x00\x00\x00\x00\x00\x00\x08"  # a huge offset, then smaller ones
    index.write_bytes(bytes(data))
    log = Log(d, MULTI, time=clock, needs_recovery=False)
    with caplog.at_level(logging.WARNING, logger="kafkactl.log.segment"):
        for base, _last, pos, size in batches[: len(batches) // 2]:
            s = log.read(base, 1)  # the first lookup in the segment checks its index
            assert (s.first_offset, s.position, s.length) == (base, pos, size)
    assert "Corrupt index" in caplog.text and "do not increase" in caplog.text
    for seg in log.segments:
        assert_indexes_agree(seg)
    assert log.log_end_offset == end
    log.close()


def test_corrupt_active_index_is_rebuilt_on_open(tmp_path: Path, clock: FakeTime,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "orders-0"
    _end, batches = _closed_log(d, clock, batches=30)
    index = d / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[8:16] = b"\x7f\x00\x00\x00\x00\x00\x00\x08"
    index.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="kafkactl.log.loader"):
        log = Log(d, CFG, time=clock, needs_recovery=False)
    assert [r.base_offset for r in log.recovery_reports] == [0]
    assert "Corrupt index" in caplog.text
    assert_indexes_agree(log.active_segment)
    log.close()


def test_check_entries_rejects_entries_outside_the_segment(tmp_path: Path,
                                                          clock: FakeTime) -> None:
    d = tmp_path / "orders-0"
    _closed_log(d, clock, MULTI, batches=30)
    log = Log(d, MULTI, time=clock, needs_recovery=False)
    first, second = log.segments[0], log.segments[1]
    first.offset_index.check_entries(first.size, second.base_offset)
    with pytest.raises(CorruptIndexError):
        first.offset_index.check_entries(first.size, 1)  # next segment starts at 1
    with pytest.raises(CorruptIndexError):
        first.offset_index.check_entries(10)  # positions past a 10-byte log
    log.close()


def test_index_entry_off_a_batch_boundary_is_rebuilt_on_lookup(
        tmp_path: Path, clock: FakeTime, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "orders-0"
    _end, batches = _closed_log(d, clock, MULTI, batches=30)
    index = d / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[8 + 7] ^= 0x08  # entry 1's position moves by 8 bytes: still increasing
    index.write_bytes(bytes(data))
    log = Log(d, MULTI, time=clock, needs_recovery=False)
    assert log.recovery_reports == []  # passes the open-time checks...
    seg = log.segments[0]
    with caplog.at_level(logging.WARNING, logger="kafkactl.log.segment"):
        for base, _last, pos, size in batches:
            if base >= seg.next_offset:
                break
            s = log.read(base, 1)  # ...but not a lookup
            assert (s.first_offset, s.position, s.length) == (base, pos, size)
    assert "Corrupt index" in caplog.text
    assert_indexes_agree(seg)
    assert seg.offset_index.file_length_is_entries()  # an inactive segment stays trimmed
    log.close()


def test_read_of_a_torn_older_segment_is_corrupt_message(tmp_path: Path,
                                                         clock: FakeTime) -> None:
    d = tmp_path / "orders-0"
    _end, batches = _closed_log(d, clock, MULTI, batches=30)
    first = d / "00000000000000000000.log"
    os.truncate(first, first.stat().st_size - 37)
    log = Log(d, MULTI, time=clock, needs_recovery=False)
    torn = [b for b in batches if b[2] + b[3] > first.stat().st_size and b[2] < 1500][0]
    with pytest.raises(CorruptRecordError) as e:
        log.read(torn[0], 1 << 20)
    assert e.value.offset == torn[0] and e.value.code == 2
    assert log.read(0, 1).length > 0  # what comes before is served
    log.close()


# ---------------------------------------------------------------- recover / --salvage
def _damaged_middle(tmp_path: Path, clock: FakeTime) -> tuple[Path, list, int]:
    d = tmp_path / "logs" / "orders-0"
    _end, batches = _closed_log(d, clock, batches=12)
    seg = d / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    hit = 5
    data[batches[hit][2] + 40] ^= 0xFF  # inside the CRC'd part of batch 5
    seg.write_bytes(bytes(data))
    return d, batches, hit


def _offsets(d: Path) -> list[int]:
    return [o for s in sorted(d.glob("*.log")) for b in iter_batches(s.read_bytes())
            for o in range(b.base_offset, b.last_offset + 1)]


def test_recover_cuts_at_the_first_bad_byte(tmp_path: Path, clock: FakeTime) -> None:
    d, batches, hit = _damaged_middle(tmp_path, clock)
    r = CliRunner().invoke(app, ["recover", "--json", str(d.parent)])
    assert r.exit_code == 0, r.output
    assert _offsets(d) == list(range(batches[hit][0]))


def test_recover_salvage_keeps_valid_batches_after_the_damage(tmp_path: Path,
                                                              clock: FakeTime) -> None:
    d, batches, hit = _damaged_middle(tmp_path, clock)
    runner = CliRunner()
    dry = runner.invoke(app, ["recover", "--salvage", "--dry-run", "--json", str(d.parent)])
    assert dry.exit_code == 1, dry.output
    assert '"salvaged_batches": 6' in dry.output
    r = runner.invoke(app, ["recover", "--salvage", "--json", str(d.parent)])
    assert r.exit_code == 0, r.output
    lost = set(range(batches[hit][0], batches[hit][1] + 1))
    expected = [o for o in range(batches[-1][1] + 1) if o not in lost]
    assert _offsets(d) == expected  # offsets as written: a gap where batch 5 was
    assert not list(d.glob("*.swap"))
    log = Log(d, CFG, time=clock, needs_recovery=True)
    assert all(r.bytes_truncated == 0 for r in log.recovery_reports)
    assert_indexes_agree(log.active_segment)
    assert log.log_end_offset == batches[-1][1] + 1
    s = log.read(batches[hit][0], 1)  # a fetch in the gap gets the next batch
    assert s.first_offset == batches[hit + 1][0]
    log.close()
    again = runner.invoke(app, ["recover", "--salvage", "--dry-run", str(d.parent)])
    assert again.exit_code == 0, again.output


# ---------------------------------------------------------------- helpers
def test_max_producer_id_reads_batch_headers(tmp_path: Path, clock: FakeTime) -> None:
    log = Log(tmp_path / "p-0", MULTI, time=clock)
    assert max_producer_id(log) == -1
    fill(log, 5)
    for pid in (7, 123456, 42):
        b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, base_sequence=0)
        b.append(1000, b"k", b"v")
        log.append(b.build())
    fill(log, 20)
    assert len(log.segments) > 1
    assert max_producer_id(log) == 123456
    log.close()


def test_delete_dir_name_fits_for_a_249_character_topic() -> None:
    name = delete_dir_name("t" * 249, 17)
    assert len(name.encode()) <= 255
    assert name.endswith("-delete") and "-17." in name
    assert delete_dir_name("orders", 3).startswith("orders-3.")
