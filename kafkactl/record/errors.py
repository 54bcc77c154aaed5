"""Typed errors of the record layer (they map to Kafka's CORRUPT_MESSAGE / INVALID_RECORD)."""

from __future__ import annotations


class RecordError(Exception):
    """Base class of every error raised by `kafkactl.record`."""


class CorruptRecordError(RecordError):
    """Bytes that are not a well-formed record: bad CRC, bad lengths, truncated, bad varint."""


class InvalidRecordError(RecordError):
    """Well-formed bytes that are not acceptable (unknown codec, bad magic for the context...)."""


class RecordTooLargeError(InvalidRecordError):
    """A compressed records section that expands past the caller's limit."""


class UnstampableBatchError(InvalidRecordError):
    """A buffer `stamp_batches` cannot stamp: a truncated or malformed header, an unknown
    magic, a compressed magic-0 set to number, or LogAppendTime asked of magic 0/1."""


class OffsetOrderError(InvalidRecordError):
    """Pre-assigned offsets (a follower's append) below the next offset of the log."""
