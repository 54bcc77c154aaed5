"""Offset stamping of batches about to be appended (the offset half of Kafka's LogValidator).

`stamp_batches` takes a buffer of batches the broker has already validated (sizes, CRC,
record framing) and, in place, writes what the log decides: each batch's base offset
(magic 2; the last offset of a magic 0/1 entry), the partition leader epoch, and with a
log-append time the LogAppendTime attribute bit and max timestamp (then the CRC-32C is
recomputed: those fields are under it; the offset and epoch are not). It returns an
`AppendSummary`: everything the segment indexes and the producer state need, so the log
never parses a header itself. Only the 61-byte header of each batch is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kafkactl.record.batch_header import (
    BATCH_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    header_struct,
    set_log_append_time,
)
from kafkactl.record.errors import OffsetOrderError, UnstampableBatchError
from kafkactl.record.legacy import LegacyBatch

__all__ = ["AppendSummary", "StampedBatch", "stamp_batches"]

_BASE_OFFSET = header_struct("base_offset")
_BASE_LENGTH_EPOCH = header_struct("base_offset", "batch_length", "partition_leader_epoch")
_new_tuple = tuple.__new__  # builds a StampedBatch without NamedTuple's slower __new__


class StampedBatch(NamedTuple):
    """One batch as stamped: its offsets, the timestamp the time index takes, its size and
    its producer fields (-1 for magic 0/1)."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


@dataclass(slots=True)
class AppendSummary:
    """What an append stamped (the log reports it as its LogAppendInfo)."""

    first_offset: int
    last_offset: int
    max_timestamp: int  # NO_TIMESTAMP when no batch has one
    offset_of_max_timestamp: int  # first_offset when no batch has a timestamp
    log_append_time: int  # -1 unless the batches were restamped
    num_records: int
    valid_bytes: int
    batches: list[StampedBatch]


# C901: produce hot path: header checks and stamping inlined, one pass
def stamp_batches(  # noqa: C901
    buf: bytearray | memoryview,
    next_offset: int,
    leader_epoch: int | None,
    log_append_time: int | None = None,
    *,
    assign_offsets: bool = True,
) -> AppendSummary:
    """Stamp the batches of `buf` for an append at `next_offset`.

    With `assign_offsets` the batches get consecutive offsets from `next_offset` and, unless
    `leader_epoch` is None, that partition leader epoch. Without it (a follower's append)
    the batches keep theirs, which must be >= `next_offset` (OffsetOrderError). With
    `log_append_time` each magic-2 batch is switched to LogAppendTime. `buf` must be
    writable when anything is stamped. Raises UnstampableBatchError for bytes that are not
    whole batches; a batch before the bad one may already be stamped.
    """
    total = len(buf)
    if (assign_offsets and log_append_time is None and leader_epoch is not None
            and total >= RECORD_BATCH_OVERHEAD and buf[MAGIC_OFFSET] == 2):
        # the produce hot path: one magic-2 batch, filling the buffer (as the loop below)
        (_base, length, _epoch, _magic, _crc, attrs, delta, _base_ts, ts, pid, pepoch,
         base_seq, count) = BATCH_HEADER.unpack_from(buf, 0)
        if LOG_OVERHEAD + length == total and delta >= 0:
            _BASE_LENGTH_EPOCH.pack_into(buf, 0, next_offset, length, leader_epoch)
            last = next_offset + delta
            if attrs & TIMESTAMP_TYPE_MASK and ts < 0:
                ts = NO_TIMESTAMP
            return AppendSummary(
                next_offset, last, ts if ts > NO_TIMESTAMP else NO_TIMESTAMP,
                last if ts > NO_TIMESTAMP else next_offset, -1, count, total,
                [_new_tuple(StampedBatch, (next_offset, last, ts, total, count, pid, pepoch,
                                           base_seq))])
    batches: list[StampedBatch] = []
    first_offset = -1
    max_ts = NO_TIMESTAMP
    max_ts_offset = -1
    num_records = 0
    pos = 0
    unpack = BATCH_HEADER.unpack_from
    while pos < total:
        if total - pos < LOG_OVERHEAD + 5:
            raise UnstampableBatchError(f"Truncated batch header at position {pos} of the append.")
        magic = buf[pos + MAGIC_OFFSET]
        if magic == 2:
            if total - pos < RECORD_BATCH_OVERHEAD:
                raise UnstampableBatchError(
                    f"Truncated batch header at position {pos} of the append.")
            (base, length, _epoch, _magic, _crc, attrs, delta, _base_ts, ts, pid, pepoch,
             base_seq, count) = unpack(buf, pos)
            size = LOG_OVERHEAD + length
            if size < RECORD_BATCH_OVERHEAD or pos + size > total or delta < 0:
                raise UnstampableBatchError(f"Malformed batch at position {pos} of the append.")
            if assign_offsets:
                if leader_epoch is not None:
                    _BASE_LENGTH_EPOCH.pack_into(buf, pos, next_offset, length, leader_epoch)
                else:
                    _BASE_OFFSET.pack_into(buf, pos, next_offset)
                base = next_offset
            elif base < next_offset:
                raise OffsetOrderError(
                    f"Batch offset {base} is below the log end offset {next_offset}.")
            if log_append_time is not None:
                set_log_append_time(buf, pos, log_append_time)
                ts = log_append_time
            elif attrs & TIMESTAMP_TYPE_MASK and ts < 0:
                ts = NO_TIMESTAMP
            last = base + delta
        elif magic in (0, 1):
            legacy = LegacyBatch(buf, pos)
            size = legacy.size
            if pos + size > total:
                raise UnstampableBatchError(f"Truncated message at position {pos} of the append.")
            count = legacy.record_count
            base = next_offset if assign_offsets else legacy.base_offset
            last = base + count - 1
            if assign_offsets:
                if magic == 0 and count > 1:
                    raise UnstampableBatchError(
                        "Cannot assign offsets inside a compressed magic-0 message set; "
                        "up-convert it to magic 2 first.")
                _BASE_OFFSET.pack_into(buf, pos, last)  # a wrapper carries its last offset
            elif base < next_offset:
                raise OffsetOrderError(
                    f"Message offset {base} is below the log end offset {next_offset}.")
            if log_append_time is not None:
                raise UnstampableBatchError(
                    "LogAppendTime needs magic-2 batches; up-convert first.")
            ts = legacy.max_timestamp
            pid, pepoch, base_seq = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE
        else:
            raise UnstampableBatchError(f"Unknown magic {magic} at position {pos} of the append.")
        if first_offset < 0:
            first_offset = base
        if ts > max_ts:
            max_ts, max_ts_offset = ts, last
        num_records += count
        batches.append(_new_tuple(StampedBatch, (base, last, ts, size, count, pid, pepoch,
                                                 base_seq)))
        next_offset = last + 1
        pos += size
    return AppendSummary(first_offset, next_offset - 1, max_ts,
                         max_ts_offset if max_ts_offset >= 0 else first_offset,
                         -1 if log_append_time is None else log_append_time, num_records,
                         total, batches)
