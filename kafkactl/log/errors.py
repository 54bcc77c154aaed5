"""Typed exceptions of the log layer.

Each maps to one Kafka error code (`code`), so the broker can answer with the right
error without string matching.
"""

from __future__ import annotations

from pathlib import Path


class LogError(Exception):
    """Base class for storage errors. `code` is the Kafka error code it maps to."""

    code: int = 56  # KAFKA_STORAGE_ERROR


class OffsetOutOfRange(LogError):
    """The requested offset is below the log start offset or above the log end offset."""

    code = 1  # OFFSET_OUT_OF_RANGE

    def __init__(self, message: str, *, log_start_offset: int = -1, log_end_offset: int = -1):
        super().__init__(message)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordBatchTooLargeError(LogError):
    """An append larger than the log's segment.bytes (Kafka's RecordBatchTooLargeException):
    no segment could hold it."""

    code = 18  # RECORD_LIST_TOO_LARGE


class CorruptIndexError(LogError):
    """An .index/.timeindex file fails its sanity check (it is rebuilt from the .log)."""

    code = 2  # CORRUPT_MESSAGE


class CorruptRecordError(LogError):
    """A read found a batch that is not whole in its segment (torn or damaged bytes on
    disk): the fetch answers CORRUPT_MESSAGE for that partition instead of serving it."""

    code = 2  # CORRUPT_MESSAGE

    def __init__(self, message: str, *, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class InvalidOffsetError(LogError):
    """Offsets given to the log (pre-assigned or to an index) are not increasing."""

    code = 2  # CORRUPT_MESSAGE (Kafka: UnexpectedAppendOffsetException)


class LogSegmentFullError(LogError):
    """Internal: an index or relative offset cannot take another entry (the log rolls)."""


class LogDirInUseError(LogError):
    """Another process holds the `.lock` of a log directory."""


class ConfigError(LogError, ValueError):
    """A log config value is malformed or out of range."""

    code = 40  # INVALID_CONFIG


class CheckpointError(LogError):
    """A checkpoint file cannot be parsed."""


class KafkaStorageError(LogError):
    """A disk error (full disk, I/O error) while writing a log; the append did not happen.
    The message names the partition and the OS error ("cannot append to orders-0: No space
    left on device (ENOSPC)"); `log_dir` is the log directory (parent of the partition
    dir), `errno` the OS error number."""

    code = 56  # KAFKA_STORAGE_ERROR

    def __init__(self, message: str, *, log_dir: Path, errno: int | None) -> None:
        super().__init__(message)
        self.log_dir = log_dir
        self.errno = errno


class LogDirOfflineError(LogError):
    """A replica that existed before (not new) has no log while a log dir is offline: its
    log may be there, so none is made elsewhere (Kafka's getOrCreateLog); the partition is
    offline on this broker until a restart with the dir repaired."""

    code = 56  # KAFKA_STORAGE_ERROR
