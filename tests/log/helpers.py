"""Helpers for the log tests: build real batches with kafkactl.record and check indexes."""

from __future__ import annotations

from pathlib import Path

from kafkactl.log.batch_header import parse_header
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.log.recovery import expected_index_entries
from kafkactl.log.segment import LogSegment
from kafkactl.record.batch import RecordBatchBuilder

SMALL = LogConfig(segment_index_bytes=4096, index_interval_bytes=256)


class FakeTime:
    """A clock the test moves by hand (seconds, like time.time)."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def time(self) -> float:
        return self.now_ms / 1000


class Clock:
    """A monotonic clock the test moves by hand (`clock.now += 30`): for code that takes a
    `clock` callable."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_batch(count: int = 3, ts: int = 1_000, value_size: int = 40, key: bytes | None = b"k"
               ) -> bytes:
    b = RecordBatchBuilder()
    for i in range(count):
        b.append(ts + i, key, bytes([65 + i % 26]) * value_size)
    return b.build()


def fill(log: Log, batches: int, *, count: int = 3, ts0: int = 1_000, value_size: int = 40
         ) -> list[int]:
    """Append `batches` batches; returns their base offsets."""
    bases = []
    for i in range(batches):
        info = log.append(make_batch(count, ts0 + i * 10, value_size))
        bases.append(info.first_offset)
    return bases


def segment_headers(seg: LogSegment) -> list:
    data = seg.read_bytes(0, seg.size)
    out, pos = [], 0
    while pos < len(data):
        h = parse_header(data, pos, pos)
        assert h is not None
        out.append(h)
        pos += h.size
    return out


def assert_indexes_agree(seg: LogSegment) -> None:
    """The segment's indexes are exactly what Kafka would build from its bytes."""
    headers = segment_headers(seg)
    offsets, times, max_ts, max_off = expected_index_entries(
        headers, seg.base_offset, seg.config.index_interval_bytes)
    assert [tuple(e) for e in seg.offset_index.entries()] == offsets
    found_times = [tuple(e) for e in seg.time_index.entries()]
    with_final = list(times)
    if max_ts > (times[-1][0] if times else -1):
        with_final.append((max_ts, max_off))
    assert found_times in (times, with_final)
    starts = {h.position: h for h in headers}
    for off, pos in offsets:
        assert pos in starts and starts[pos].last_offset == off


def list_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def closed_log_of_four_segments(d: Path, config: LogConfig) -> tuple[list[Path], int]:
    """A log filled with 30 batches and closed: 4+ segments with small `config` (segment
    bytes 1,500); (their .log paths, the log end offset)."""
    log = Log(d, config, time=FakeTime())
    fill(log, 30)
    paths = [s.log_path for s in log.segments]
    end = log.log_end_offset
    log.close()
    assert len(paths) >= 4
    return paths, end
