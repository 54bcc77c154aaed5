"""Retention as Kafka's UnifiedLog.deletableSegments decides it, on real logs on disk:

- an empty segment stops time retention only when it is the last one: an older segment
  the cleaner emptied (cleanup.policy=compact,delete) is aged by its file's mtime (Kafka's
  LogSegment.largestTimestamp falls back to lastModified; the cleaner keeps the replaced
  segment's mtime), and the segments after it still go;
- no segment goes unless the high watermark is at or above its upper bound (the next
  segment's base offset, the log end for the last), so the log start never passes it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatchBuilder
from tests.log.helpers import FakeTime

HOUR_MS = 3_600_000


def _batch(pairs: list[tuple[bytes, bytes]], ts: int) -> bytes:
    b = RecordBatchBuilder()
    for k, v in pairs:
        b.append(ts, k, v)
    return b.build()


def test_a_segment_the_cleaner_emptied_does_not_stop_time_retention(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    clock = FakeTime(now)
    config = LogConfig.from_properties({
        "cleanup.policy": "compact,delete", "retention.ms": str(HOUR_MS),
        "segment.bytes": "200", "min.cleanable.dirty.ratio": "0.01"})
    lg = Log(tmp_path / "cd-0", config, time=clock)
    lg.append(_batch([(b"a", b"1" * 40), (b"b", b"1" * 40)], now))
    lg.roll()
    lg.append(_batch([(b"a", b"2" * 40), (b"b", b"2" * 40)], now))
    lg.roll()
    lg.append(_batch([(b"c", b"3" * 40)], now))
    LogCleaner(time=clock).clean(lg, force=True)
    sizes = [s.size for s in lg.segments]
    assert sizes[0] == 0 and all(sizes[1:]), sizes  # the cleaner emptied the first one
    clock.now_ms = now + HOUR_MS - 1000  # nothing is past retention yet
    assert lg.delete_old_segments() == 0
    # an hour later every segment is past retention.ms: the empty one by its mtime
    clock.now_ms = max(now, lg.segments[0].last_modified_ms()) + HOUR_MS + 1
    deleted = lg.delete_old_segments()
    assert deleted == len(sizes), (deleted, sizes)
    assert lg.log_start_offset == lg.log_end_offset == 5
    assert [s.size for s in lg.segments] == [0]
    lg.close()


def test_an_empty_last_segment_stays(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    clock = FakeTime(now)
    config = LogConfig.from_properties({"retention.ms": str(HOUR_MS)})
    lg = Log(tmp_path / "e-0", config, time=clock)
    lg.append(_batch([(b"a", b"1")], now - 2 * HOUR_MS))
    lg.roll()
    os.utime(lg.segments[-1].log_path, ns=(0, 0))  # empty, and very old by its mtime
    assert lg.delete_old_segments() == 1
    assert len(lg.segments) == 1 and lg.segments[0].base_offset == 1
    assert lg.delete_old_segments() == 0
    lg.close()


def test_retention_deletes_nothing_at_or_above_the_high_watermark(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    clock = FakeTime(now)
    config = LogConfig.from_properties({"retention.ms": "1000", "segment.bytes": "10000"})
    lg = Log(tmp_path / "hw-0", config, time=clock)
    for base in (0, 3, 6):  # three segments of three records, all old: [0,3) [3,6) [6,9)
        if base:
            lg.roll()
        lg.append(_batch([(b"k", b"v")] * 3, now - HOUR_MS))
    hw = [0]
    lg.high_watermark_source = lambda: hw[0]
    assert lg.delete_old_segments() == 0  # the high watermark is below every upper bound
    hw[0] = 5  # the first segment's upper bound is 3 <= 5; the second's is 6
    assert lg.delete_old_segments() == 1 and lg.log_start_offset == 3
    hw[0] = 6
    assert lg.delete_old_segments() == 1 and lg.log_start_offset == 6
    hw[0] = 8  # the last segment's upper bound is the log end, 9
    assert lg.delete_old_segments() == 0 and lg.log_start_offset == 6
    hw[0] = 9  # all committed: the last one goes too (after a roll), as Kafka
    assert lg.delete_old_segments() == 1 and lg.log_start_offset == 9
    lg.close()


def test_size_retention_is_bounded_by_the_high_watermark_too(tmp_path: Path) -> None:
    clock = FakeTime(int(time.time() * 1000))
    lg = Log(tmp_path / "sz-0", LogConfig.from_properties({"retention.bytes": "1"}),
             time=clock)
    for base in (0, 1, 2):
        if base:
            lg.roll()
        lg.append(_batch([(b"k", b"v" * 50)], clock.now_ms))
    lg.high_watermark_source = lambda: 1
    assert lg.delete_old_segments() == 1 and lg.log_start_offset == 1
    lg.close()
