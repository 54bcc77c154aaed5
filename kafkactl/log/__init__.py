"""kafkactl.log: Kafka's on-disk log (segments, indexes, recovery, retention, log dirs).

See docs/internals.md for the contract. Modules: `config` (LogConfig), `segment`
(LogSegment), `offset_index`/`time_index` (mmap'ed sparse indexes), `log` (Log, one
partition) with `segments` (its segment list) and `retention`, `validator` (LogValidator),
`producer_state` + `producer_snapshot` (idempotence), `loader` + `recovery` (open/repair),
`manager` (LogManager: dirs, lock, checkpoints, flush and retention), `checkpoint`
(Kafka's text checkpoint files), `dump` (DumpLogSegments' formatter behind
`kafkactl dump-log`), `repair` (offline repair behind `kafkactl recover`).
"""

from kafkactl.log.config import LogConfig
from kafkactl.log.errors import (
    CorruptIndexError,
    InvalidOffsetError,
    LogDirInUseError,
    LogError,
    OffsetOutOfRange,
)
from kafkactl.log.log import FetchSlice, Log, LogAppendInfo
from kafkactl.log.manager import CLEAN_SHUTDOWN_MARKER, LogManager
from kafkactl.log.offset_index import OffsetIndex
from kafkactl.log.recovery import SegmentRecoveryReport, inspect_segment, recover_segment
from kafkactl.log.segment import LogSegment
from kafkactl.log.time_index import TimeIndex

__all__ = [
    "CLEAN_SHUTDOWN_MARKER", "CorruptIndexError", "FetchSlice", "InvalidOffsetError", "Log",
    "LogAppendInfo", "LogConfig", "LogDirInUseError", "LogError", "LogManager", "LogSegment",
    "OffsetIndex", "OffsetOutOfRange", "SegmentRecoveryReport", "TimeIndex",
    "inspect_segment", "recover_segment",
]
