"""The loader's rules for a segment that lost its `.log` or its bytes, and for a log that
recovery leaves ending below its log start offset (Kafka's LogLoader):

- a missing `.log` in the middle (its index files left): the orphan index files go and
  nothing else (LogLoader.loadSegmentFiles); an emptied one (0 bytes, index entries left)
  truncates no byte; either way only that segment's offsets are lost (a gap), the later
  segments are kept, after a clean stop as after a crash, and the loss is said at WARNING;
- a log end below the log-start-offset checkpoint (a DeleteRecords, then a torn tail): every
  segment is deleted and the log restarts empty at the log start
  (deleteSegmentsIfLogStartGreaterThanLogEnd), so no offset is handed out twice.

Every segment here is written by kafkactl's own Log."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from kafkactl.log.config import LogConfig
from kafkactl.log.leader_epoch_cache import LeaderEpochCache
from kafkactl.log.log import Log
from kafkactl.log.producer_snapshot import encode_snapshot
from kafkactl.record.memory_records import iter_batches
from tests.log.helpers import (
    FakeTime,
    assert_indexes_agree,
    closed_log_of_four_segments,
    make_batch,
)

CFG = dataclasses.replace(LogConfig(), segment_bytes=1500, index_interval_bytes=300)


def _offsets(log: Log) -> list[int]:
    return [o for b in log.iter_batches() for o in range(b.base_offset, b.last_offset + 1)]


def _base(p: Path) -> int:
    return int(p.name[:20])


@pytest.mark.parametrize("clean", [True, False], ids=["clean-stop", "crash"])
def test_missing_middle_log_loses_only_its_offsets(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, clean: bool) -> None:
    d = tmp_path / "ms-0"
    paths, end = closed_log_of_four_segments(d, CFG)
    lost_from, lost_to = _base(paths[2]), _base(paths[3]) - 1
    paths[2].unlink()
    with caplog.at_level(logging.WARNING, logger="kafkactl.log"):
        log = Log(d, CFG, time=FakeTime(), recovery_point=0, needs_recovery=not clean)
    try:
        assert [s.log_path for s in log.segments] == paths[:2] + paths[3:]
        assert log.log_end_offset == end
        assert _offsets(log) == [o for o in range(end) if not lost_from <= o <= lost_to]
        # a fetch inside the gap is served from the next segment
        assert log.read(lost_from, 1 << 20).first_offset == lost_to + 1
        for s in log.segments:
            assert_indexes_agree(s)
    finally:
        log.close()
    assert not any(p.name.startswith(paths[2].name[:20]) for p in d.iterdir()
                   if not p.name.endswith(".snapshot"))  # the orphan index files went
    text = caplog.text
    assert f"{paths[2].name} is missing" in text
    assert f"offsets {lost_from}..{lost_to} are lost" in text
    assert "later segments are kept" in text and "deleted the" not in text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafkactl.log"):
        again = Log(d, CFG, time=FakeTime(), needs_recovery=False)
    assert again.log_end_offset == end and "lost" not in caplog.text
    again.close()


def test_emptied_middle_log_loses_only_its_offsets(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "em-0"
    paths, end = closed_log_of_four_segments(d, CFG)
    lost_from, lost_to = _base(paths[1]), _base(paths[2]) - 1
    paths[1].write_bytes(b"")  # `: > seg.log`: its index files still hold entries
    with caplog.at_level(logging.WARNING, logger="kafkactl.log"):
        log = Log(d, CFG, time=FakeTime(), needs_recovery=False)
    try:
        assert [s.log_path for s in log.segments] == paths
        assert log.log_end_offset == end
        assert _offsets(log) == [o for o in range(end) if not lost_from <= o <= lost_to]
        for s in log.segments:
            assert_indexes_agree(s)  # the emptied segment's indexes were rebuilt (empty)
    finally:
        log.close()
    assert f"{paths[1].name} is empty" in caplog.text
    assert f"offsets {lost_from}..{lost_to} are lost" in caplog.text
    assert all(p.exists() for p in paths)


def test_missing_last_log_ends_the_log_at_the_previous_segment(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "ml-0"
    paths, _end = closed_log_of_four_segments(d, CFG)
    last = _base(paths[-1])
    epochs = LeaderEpochCache(d)
    epochs.assign(0, 0)
    epochs.assign(3, last + 1)  # started in the lost segment
    paths[-1].unlink()
    with caplog.at_level(logging.WARNING, logger="kafkactl.log"):
        log = Log(d, CFG, time=FakeTime(), needs_recovery=False)
    assert log.log_end_offset == last and _offsets(log) == list(range(last))
    log.close()
    assert f"offsets from {last} on are lost" in caplog.text
    again = LeaderEpochCache(d)
    assert again.load() and again.epochs == [0]


def test_log_end_below_the_log_start_restarts_the_log_there(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """DeleteRecords up to the end (checkpoint: the log start), then a crash tears the last
    batch: the log restarts empty at the log start; the purged offsets are not reused."""
    d = tmp_path / "p-0"
    paths, end = closed_log_of_four_segments(d, CFG)
    data = paths[-1].read_bytes()
    paths[-1].write_bytes(data[:-30])  # a torn tail: the last batch is cut
    (d / f"{_base(paths[-1]):020d}.snapshot").write_bytes(encode_snapshot([]))
    epochs = LeaderEpochCache(d)
    epochs.assign(0, 0)
    epochs.assign(2, 10)
    with caplog.at_level(logging.WARNING, logger="kafkactl.log"):
        log = Log(d, CFG, time=FakeTime(), recovery_point=0, needs_recovery=True,
                  log_start_offset=end)
    try:
        assert (log.log_start_offset, log.log_end_offset) == (end, end)
        assert [s.base_offset for s in log.segments] == [end]
        assert not any(p.exists() for p in paths)
        assert not list(d.glob("*.snapshot"))
        info = log.append(make_batch(2))
        assert info.first_offset == end  # never an offset handed out before
        assert _offsets(log) == [end, end + 1]
    finally:
        log.close()
    assert f"below its log start offset {end}" in caplog.text
    again = LeaderEpochCache(d)
    again.load()
    assert again.epochs == []
    # reopened: the log is whole from the log start on
    log = Log(d, CFG, time=FakeTime(), needs_recovery=False, log_start_offset=end)
    assert (log.log_start_offset, log.log_end_offset) == (end, end + 2)
    log.close()


def test_log_start_at_the_log_end_keeps_the_log(tmp_path: Path) -> None:
    d = tmp_path / "q-0"
    paths, end = closed_log_of_four_segments(d, CFG)
    log = Log(d, CFG, time=FakeTime(), recovery_point=0, needs_recovery=True,
              log_start_offset=end)
    assert (log.log_start_offset, log.log_end_offset) == (end, end)
    assert [s.log_path for s in log.segments] == paths
    log.close()
    assert list(iter_batches(paths[0].read_bytes()))
