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
                            now_ms: int) -> int:
    """How many leading segments retention.ms (largest timestamp older than it) or
    retention.bytes (the log is larger than it even without them) delete; may be all."""
    doomed = 0
    if config.retention_ms >= 0:
        while doomed < len(segments) and segments[doomed].size > 0 and (
            now_ms - segments[doomed].largest_timestamp() > config.retention_ms
        ):
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
    return doomed
