"""Start-up recovery keeps the log contiguous: after a cut in one segment every later
segment goes (Kafka's LogLoader.recoverLog), so do an empty or missing segment file in the
middle; corrupt producer snapshots and garbage .swap files are removed.

Every segment here is written by kafkactl's own Log."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import pytest

from kafkactl.log.config import LogConfig
from kafkactl.log.leader_epoch_cache import LeaderEpochCache
from kafkactl.log.log import Log
from kafkactl.log.producer_snapshot import encode_snapshot
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import FakeTime, assert_indexes_agree, closed_log_of_four_segments

CFG = dataclasses.replace(LogConfig(), segment_bytes=1500, index_interval_bytes=300)


def _four_segments(d: Path) -> tuple[list[Path], int]:
    """A closed log of 4+ segments; (the .log paths, the log end offset)."""
    return closed_log_of_four_segments(d, CFG)


def _corrupt_second_batch(seg: Path) -> tuple[int, int]:
    """Flip bytes inside the second batch of `seg`; (its base offset, its position)."""
    data = bytearray(seg.read_bytes())
    batch = list(iter_batches(bytes(data)))[1]
    data[batch.position + 40] ^= 0xFF
    seg.write_bytes(bytes(data))
    return batch.base_offset, batch.position


def _offsets(log: Log) -> list[int]:
    return [o for b in log.iter_batches() for o in range(b.base_offset, b.last_offset + 1)]


def test_cut_in_a_middle_segment_deletes_the_later_ones(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "rc-0"
    paths, end = _four_segments(d)
    cut_at, _pos = _corrupt_second_batch(paths[1])
    (d / f"{end:020d}.snapshot").write_bytes(encode_snapshot([]))  # at the old log end
    epochs = LeaderEpochCache(d)
    epochs.assign(0, 0)
    epochs.assign(4, cut_at + 1)  # an epoch that started in the lost range
    with caplog.at_level(logging.WARNING, logger="kafkactl.log.loader"):
        log = Log(d, CFG, time=FakeTime(), recovery_point=0, needs_recovery=True)
    try:
        assert [s.log_path for s in log.segments] == paths[:2]
        assert log.log_end_offset == cut_at
        assert _offsets(log) == list(range(cut_at))
        assert log.recovery_reports[1].cut_first_offset == cut_at
        for s in log.segments:
            assert_indexes_agree(s)
        assert not any(p.exists() for p in paths[2:])
        assert not any(p.with_suffix(".index").exists() for p in paths[2:])
    finally:
        log.close()
    text = caplog.text
    for p in paths[2:]:
        assert p.name in text
    assert f"offsets {cut_at}..{end - 1} are lost" in text
    assert not (d / f"{end:020d}.snapshot").exists()  # above the new log end
    again = LeaderEpochCache(d)
    assert again.load() and again.epochs == [0] and again.offsets == [0]
    # a new start finds a contiguous log: nothing to cut
    caplog.clear()
    log = Log(d, CFG, time=FakeTime(), recovery_point=0, needs_recovery=True)
    assert log.log_end_offset == cut_at and "deleted" not in caplog.text
    log.close()


def test_a_segment_a_compaction_emptied_is_no_cut(tmp_path: Path) -> None:
    """An emptied segment with empty index files (what the cleaner leaves) is kept as it is.
    (A missing or emptied middle segment with index entries loses only its own offsets:
    tests/log/test_loader_lost_segments.py.)"""
    d3 = tmp_path / "compacted-0"  # an emptied segment with empty indexes: kept as it is
    paths, end = _four_segments(d3)
    paths[1].write_bytes(b"")
    for suffix in (".index", ".timeindex"):
        paths[1].with_suffix(suffix).write_bytes(b"")
    log = Log(d3, CFG, time=FakeTime(), needs_recovery=False)
    assert log.log_end_offset == end and len(log.segments) == len(paths)
    log.close()


def test_corrupt_snapshot_is_deleted_once_and_garbage_swap_never_replaces(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "rc-0"
    paths, end = _four_segments(d)
    good = paths[1].read_bytes()
    snap = d / f"{int(paths[2].name[:20]):020d}.snapshot"
    snap.write_bytes(b"garbage")
    swap = paths[1].with_name(paths[1].name + ".swap")
    swap.write_bytes(os.urandom(300))
    with caplog.at_level(logging.WARNING, logger="kafkactl.log.loader"):
        log = Log(d, CFG, time=FakeTime(), needs_recovery=False)
    assert log.log_end_offset == end
    log.close()
    assert paths[1].read_bytes() == good and not swap.exists()
    assert not snap.exists()
    assert caplog.text.count(snap.name) == 1 and "not a valid segment" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafkactl.log.loader"):
        Log(d, CFG, time=FakeTime(), needs_recovery=False).close()
    assert snap.name not in caplog.text  # warned once: the file is gone
