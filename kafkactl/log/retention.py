"""Retention policy: which of a log's oldest segments go (Kafka's deleteOldSegments).

Pure decisions over a segment list; `Log.delete_old_segments` / `delete_records_before`
apply them under the log's lock (roll, drop, advance the log start offset).
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkactl.log.config import LogConfig
from kafkactl.log.segment import LogSegment


def segments_below_start(segments: Sequence[LogSegment], log_start_offset: int) -> int:
    """How many leading segments hold only offsets below the log start offset (the last
    segment always stays)."""
    n = 0
    while n + 1 < len(segments) and segments[n + 1].base_offset <= log_start_offset:
        n += 1
    return n


def segments_past_retention(segments: Sequence[LogSegment], config: LogConfig,
                            now_ms: int, high_watermark: int | None = None,
                            log_end_offset: int | None = None) -> int:
    """How many leading segments retention.ms (largest timestamp older than it) or
    retention.bytes (the log is larger than it even without them) delete; may be all.

    As Kafka's UnifiedLog.deletableSegments: an empty segment stops the time check only
    when it is the last one (an empty older segment, which the cleaner can leave, is aged
    by its file's mtime, its largest timestamp); and a segment goes only when the
    `high_watermark` is at or above its upper bound (the next segment's base offset, or
    `log_end_offset` for the last), so the log start never passes the high watermark.
    None: no bound (a log without a partition: its high watermark is its end)."""
    doomed = 0
    if config.retention_ms >= 0:
        last = len(segments) - 1
        while doomed < len(segments) and not (doomed == last and segments[doomed].size == 0) \
                and now_ms - largest_timestamp(segments[doomed]) > config.retention_ms:
            doomed += 1
    if config.retention_bytes >= 0:
        excess = sum(s.size for s in segments) - config.retention_bytes
        n = 0
        for s in segments:
            if excess - s.size < 0:
                break
            excess -= s.size
            n += 1
        doomed = max(doomed, n)
    if high_watermark is not None and doomed:
        bounded = 0
        while bounded < doomed:
            upper = segments[bounded + 1].base_offset if bounded + 1 < len(segments) \
                else log_end_offset
            if upper is None or high_watermark < upper:
                break
            bounded += 1
        doomed = bounded
    return doomed


def largest_timestamp(segment: LogSegment) -> int:
    """Kafka's LogSegment.largestTimestamp: the largest timestamp in the segment when it
    has one (>= 0), else its .log file's last-modified time."""
    ts = segment.max_timestamp_so_far
    return ts if ts >= 0 else segment.last_modified_ms()
