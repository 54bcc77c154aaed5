"""LogSegment.translate_offset's shortcut for recently appended batches (where followers
and tailing consumers fetch) answers exactly what the header scan from the offset index
answers: for every offset, around the RECENT_STARTS bound, after truncation and re-append,
and with a start position past the remembered batch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kafkactl.log import segment as segment_module
from kafkactl.log.log import Log
from kafkactl.log.segment import LogSegment
from tests.log.helpers import SMALL, FakeTime, fill, make_batch


def _scanned(seg: LogSegment, offset: int, start: int = 0) -> object:
    """translate_offset by the header scan alone (the shortcut's memory emptied)."""
    saved = dict(seg._recent_starts)
    seg._recent_starts.clear()
    try:
        return seg.translate_offset(offset, start)
    finally:
        seg._recent_starts.update(saved)


def _agree(seg: LogSegment, offsets: range, start: int = 0) -> None:
    for o in offsets:
        assert seg.translate_offset(o, start) == _scanned(seg, o, start), o


@pytest.mark.parametrize("batches", [1, segment_module.RECENT_STARTS - 1,
                                     segment_module.RECENT_STARTS,
                                     segment_module.RECENT_STARTS + 1, 200])
def test_every_offset_agrees_with_the_scan(log_dir: Path, clock: FakeTime,
                                           batches: int) -> None:
    log = Log(log_dir, dataclasses.replace(SMALL, segment_bytes=1 << 30), time=clock)
    fill(log, batches, count=3)
    seg = log.active_segment
    assert len(seg._recent_starts) == min(batches, segment_module.RECENT_STARTS)
    _agree(seg, range(0, log.log_end_offset + 2))
    log.close()


def test_truncation_forgets_and_new_batches_are_found(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, dataclasses.replace(SMALL, segment_bytes=1 << 30), time=clock)
    fill(log, 30, count=3)  # offsets 0..89
    log.truncate_to(45)  # drops the batch 45-47 and after
    seg = log.active_segment
    assert not seg._recent_starts
    for _ in range(5):  # different batch sizes at the same offsets as before
        log.append(make_batch(2, value_size=90))
    assert log.log_end_offset == 55
    _agree(seg, range(0, 57))
    h = seg.translate_offset(47)
    assert h is not None and h.base_offset == 47 and h.last_offset == 48
    log.close()


def test_a_start_position_past_the_remembered_batch(log_dir: Path, clock: FakeTime) -> None:
    log = Log(log_dir, dataclasses.replace(SMALL, segment_bytes=1 << 30), time=clock)
    fill(log, 10, count=3)
    seg = log.active_segment
    later = seg.translate_offset(21)
    assert later is not None
    _agree(seg, range(0, 31), start=later.position)
    log.close()
