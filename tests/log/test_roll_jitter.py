"""segment.jitter.ms as Kafka's: each segment draws its own jitter below
min(segment.jitter.ms, segment.ms) when it is made, and rolls once segment.ms less that
jitter has passed. The whole jitter was subtracted: jitter = segment.ms rolled a new
segment at every append, and every segment rolled at the same moment."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kafkactl.log import segment as segment_module
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.segment import roll_jitter
from kafkactl.record.batch import RecordBatchBuilder

WEEK_MS = 7 * 24 * 3600 * 1000


def _config(segment_ms: int, jitter_ms: int) -> LogConfig:
    return LogConfig.from_properties({"segment.ms": str(segment_ms),
                                      "segment.jitter.ms": str(jitter_ms)})


def test_the_jitter_is_drawn_below_the_smaller_bound() -> None:
    assert roll_jitter(_config(20_000, 0)) == 0
    draws = {roll_jitter(_config(20_000, 10_000)) for _ in range(500)}
    assert all(0 <= d < 10_000 for d in draws) and len(draws) > 400
    assert all(0 <= roll_jitter(_config(5_000, WEEK_MS)) < 5_000 for _ in range(500))


def test_a_jitter_as_long_as_segment_ms_does_not_roll_every_append(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_module, "_jitter", random.Random(7))
    lg = Log(tmp_path / "jit-0", _config(WEEK_MS, WEEK_MS))
    jitter = lg.active_segment.roll_jitter_ms
    assert 0 <= jitter < WEEK_MS - 4000  # (seed 7's draw)
    for i in range(5):  # a second apart: far below segment.ms less any likely jitter
        b = RecordBatchBuilder()
        b.append(1_000_000 + i * 1000, b"k", b"v")
        lg.append(b.build())
    assert len(lg.segments) == 1
    lg.close()


def test_the_roll_comes_at_segment_ms_less_the_segments_jitter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_module, "_jitter", random.Random(3))
    lg = Log(tmp_path / "roll-0", _config(20_000, 10_000))
    threshold = 20_000 - lg.active_segment.roll_jitter_ms
    assert 10_000 < threshold <= 20_000
    base = 1_000_000
    for ts in (base, base + threshold):  # waited == threshold: not yet
        b = RecordBatchBuilder()
        b.append(ts, b"k", b"v")
        lg.append(b.build())
    assert len(lg.segments) == 1
    b = RecordBatchBuilder()
    b.append(base + threshold + 1, b"k", b"v")  # one ms more: a new segment
    lg.append(b.build())
    assert len(lg.segments) == 2
    lg.close()
