"""LogValidator: produce-side validation of record batches.

Every batch is checked from its 61-byte header and one CRC-32C over its bytes: length in the
buffer, magic, CRC, last-offset-delta vs record count, size vs `max.message.bytes`,
compression codec. Then its records section (decompressed once when compressed) goes through
record.framing's scan: exactly `count` records tiling the section, offset deltas 0..n-1,
key/value/header lengths inside each record; on a compacted topic, a null key is a
per-record error (record_errors). With `message.timestamp.difference.max.ms` set (CreateTime),
every record's timestamp but NO_TIMESTAMP (-1) must be that close to the broker's clock
(per-record INVALID_TIMESTAMP, as Kafka; negative timestamps are not exempt).

Answers, as Kafka's: framing faults are INVALID_RECORD (InvalidRecordException); a section
that does not decompress is CORRUPT_MESSAGE (Kafka itself answers UNKNOWN_SERVER_ERROR
there). A compressed batch whose offset deltas are not 0..n-1 is renumbered (re-encoded), as
Kafka does; an uncompressed one is refused. No record is decoded into objects unless the
batch must be re-encoded (renumbering, a topic-forced codec) or the request carries old
magic 0/1 message sets (then they are up-converted). The offsets are stamped afterwards, by
record.stamp_batches inside Log.append. A rejection is a BatchValidationError carrying the
Kafka ErrorCode the produce response answers with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from kafkactl.log.config import LogConfig
from kafkactl.log.kernels import log_kernels
from kafkactl.protocol.errors import ErrorCode, KafkaError
from kafkactl.record._accel import kernels
from kafkactl.record.batch_header import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
)
from kafkactl.record.codecs import Compression, decompress
from kafkactl.record.crc import crc32c
from kafkactl.record.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from kafkactl.record.framing import check_records
from kafkactl.record.varint import decode_varint, decode_varlong

LONG_MAX = 2**63 - 1
MIN_DECOMPRESS_LIMIT = 64 << 20  # a records section may expand to max(this, 64 x max.message.bytes)


class BatchValidationError(KafkaError):
    """A produce that must be rejected, answered with `code`."""

    def __init__(self, code: ErrorCode, message: str,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.code = code
        # (index of the record in its batch, message): Produce v8+'s record_errors
        self.record_errors = record_errors or []


@dataclass(slots=True)
class BatchInfo:
    position: int
    size: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    first_timestamp: int
    max_timestamp: int
    compression: int
    is_transactional: bool
    renumber: bool = field(default=False)  # offset deltas not 0..n-1 (compressed batches)


def find_magic(buf: memoryview) -> int:
    if len(buf) <= MAGIC_OFFSET:
        raise BatchValidationError(ErrorCode.CORRUPT_MESSAGE,
                                   "records shorter than one batch header")
    return buf[MAGIC_OFFSET]


# C901: one check per LogValidator rule, in Kafka's order, on the hot path
def validate_batches_py(  # noqa: C901
    buf: memoryview,
    *,
    max_message_bytes: int,
    timestamp_type: str,
    max_timestamp_difference_ms: int,
    now_ms: int,
    produce_version: int,
    single_batch: bool,
    compacted: bool = False,
    topic_partition: str = "",
    timestamp_after_max_ms: int | None = None,
) -> list[BatchInfo]:
    """Check every magic-2 batch in `buf`; raise BatchValidationError on the first bad one.
    `compacted`: the topic's cleanup.policy includes compact (null keys are refused).
    A CreateTime timestamp may be `max_timestamp_difference_ms` before the broker's clock
    and `timestamp_after_max_ms` (None: the same) after it (LogConfig.timestamp_bounds).
    The definition of `validate_batches` (below: the compiled twin when built, which takes
    no `timestamp_after_max_ms`: call this one when the bounds differ)."""
    after_ms = max_timestamp_difference_ms if timestamp_after_max_ms is None \
        else timestamp_after_max_ms
    out: list[BatchInfo] = []
    pos, end = 0, len(buf)
    if end == 0:
        raise BatchValidationError(ErrorCode.INVALID_RECORD, "produce request carries no records")
    check_time = timestamp_type == "CreateTime" and (max_timestamp_difference_ms < LONG_MAX
                                                     or after_ms < LONG_MAX)
    # the bytes object under `buf` when buf views all of it (then at offset 0)
    parent = buf.obj
    backing = parent if isinstance(parent, bytes | bytearray) and buf.c_contiguous \
        and buf.nbytes == len(parent) else None
    while pos < end:
        if end - pos < RECORD_BATCH_OVERHEAD:
            raise BatchValidationError(
                ErrorCode.CORRUPT_MESSAGE,
                f"{end - pos} trailing bytes are shorter than a batch header")
        (_base, length, _epoch, magic, crc, attributes, last_delta, first_ts, max_ts, pid,
         pepoch, base_seq, count) = BATCH_HEADER.unpack_from(buf, pos)
        size = LOG_OVERHEAD + length
        if magic != 2:
            raise BatchValidationError(
                ErrorCode.INVALID_RECORD if produce_version >= 3 else ErrorCode.CORRUPT_MESSAGE,
                f"batch at byte {pos} has magic {magic}; Produce v3+ needs magic 2")
        if size < RECORD_BATCH_OVERHEAD or pos + size > end:
            raise BatchValidationError(
                ErrorCode.CORRUPT_MESSAGE, f"batch at byte {pos} claims {size} bytes; "
                f"{end - pos} are present")
        if size > max_message_bytes:
            raise BatchValidationError(
                ErrorCode.MESSAGE_TOO_LARGE, f"batch of {size} bytes is larger than "
                f"max.message.bytes={max_message_bytes}")
        if crc32c(buf[pos + ATTRIBUTES_OFFSET:pos + size]) != crc:
            raise BatchValidationError(ErrorCode.CORRUPT_MESSAGE,
                                       f"batch at byte {pos} fails its CRC")
        if count <= 0 or last_delta != count - 1:
            raise BatchValidationError(
                ErrorCode.INVALID_RECORD, f"batch at byte {pos}: record count {count} does not "
                f"match last offset delta {last_delta}")
        if attributes & CONTROL_FLAG:
            where = f" in topic partition {topic_partition}" if topic_partition else ""
            raise BatchValidationError(
                ErrorCode.INVALID_RECORD,
                f"Clients are not allowed to write control records{where}.")
        if pid >= 0 and base_seq < 0:
            raise BatchValidationError(
                ErrorCode.INVALID_RECORD, f"Invalid sequence number {base_seq} in record "
                f"batch with producerId {pid}")
        codec = attributes & COMPRESSION_MASK
        if codec > 4:
            raise BatchValidationError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                       f"unknown compression codec {codec}")
        if codec == 4 and produce_version < 7:
            raise BatchValidationError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                       "zstd batches need Produce v7 or later")
        transactional = bool(attributes & TRANSACTIONAL_FLAG)
        if transactional and pid < 0:
            raise BatchValidationError(ErrorCode.INVALID_RECORD,
                                       f"transactional batch at byte {pos} has no producer id")
        renumber, records = _check_records(
            buf[pos + RECORDS_OFFSET:pos + size], pos, codec, count, compacted,
            topic_partition, max(MIN_DECOMPRESS_LIMIT, 64 * max_message_bytes), backing)
        if check_time:
            _check_timestamps(records, count, pos, first_ts, max_ts,
                              bool(attributes & TIMESTAMP_TYPE_MASK), now_ms,
                              max_timestamp_difference_ms, after_ms, topic_partition)
        out.append(BatchInfo(pos, size, pid, pepoch, base_seq, count, first_ts, max_ts, codec,
                             transactional, renumber))
        pos += size
    if single_batch and len(out) != 1:
        raise BatchValidationError(
            ErrorCode.INVALID_RECORD,
            f"Produce v3+ carries exactly one batch per partition, got {len(out)}")
    return out


def _check_records(section: memoryview, pos: int, codec: int, count: int, compacted: bool,
                   topic_partition: str, max_size: int,
                   backing: bytes | bytearray | None = None
                   ) -> tuple[bool, bytes | memoryview]:
    """The record-level checks of one batch: (True when its offset deltas need renumbering,
    its records section, decompressed)."""
    records: bytes | memoryview = section
    if codec:
        try:
            records = decompress(codec, section, max_size=max_size)
        except RecordTooLargeError as e:
            raise BatchValidationError(
                ErrorCode.MESSAGE_TOO_LARGE, f"batch at byte {pos}: {e}"
                f"{_where(topic_partition)} (the broker "
                f"decompresses at most max(64 MiB, 64 x max.message.bytes))") from None
        except (CorruptRecordError, InvalidRecordError) as e:
            raise BatchValidationError(
                ErrorCode.CORRUPT_MESSAGE, f"batch at byte {pos}: its records do not decompress as "
                f"its attributes say{_where(topic_partition)}: {e}") from None
    try:
        if codec or backing is None:
            check = check_records(records, count, want_keyless=compacted)
        else:  # scan the request's bytearray in place rather than copy the section
            start = pos + RECORDS_OFFSET
            check = check_records(backing, count, want_keyless=compacted, start=start,
                                  end=start + len(section))
    except InvalidRecordError as e:
        raise BatchValidationError(
            ErrorCode.INVALID_RECORD, f"batch at byte {pos}: {e}{_where(topic_partition)}") \
            from None
    if check.keyless:
        message = f"Compacted topic cannot accept message without key{_where(topic_partition)}."
        errors = [(i, message) for i in check.keyless]
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise BatchValidationError(
            ErrorCode.INVALID_RECORD, f"One or more records have been rejected due to "
            f"{len(errors)} record errors in total, and only showing the first three errors at "
            f"most: [{shown}]", errors)
    if not check.sequential and not codec:
        raise BatchValidationError(
            ErrorCode.INVALID_RECORD, f"batch at byte {pos}: the offset deltas of its records "
            f"are not 0..{count - 1}{_where(topic_partition)}")
    return not check.sequential, records


def _check_timestamps(records: bytes | memoryview, count: int, pos: int, first_ts: int,
                      max_ts: int, log_append: bool, now_ms: int, limit: int,
                      after: int, topic_partition: str) -> None:
    """`message.timestamp.difference.max.ms` (CreateTime) on every record of the batch at
    `pos` (`records`: its section, decompressed, framing proven), as Kafka's
    LogValidator.validateTimestamp: only NO_TIMESTAMP (-1) is exempt; any other timestamp,
    a negative one too, must be within `limit` ms of `now_ms`. Each record out of range is a
    record error (INVALID_TIMESTAMP). Then the header's max timestamp (the time index takes
    it) must be in range too. Reads only each record's length and timestamp delta."""
    low, high = now_ms - limit, now_ms + after  # (Python ints: no overflow at Long.MAX)
    errors: list[tuple[int, str]] = []
    p = 0
    for i in range(count):
        length, p = decode_varint(records, p)
        end = p + length
        if log_append:  # a LogAppendTime batch's records carry its max timestamp
            ts = max_ts
        else:
            delta, _ = decode_varlong(records, p + 1)  # after the attributes byte
            ts = first_ts + delta
        if ts != NO_TIMESTAMP and not low <= ts <= high:
            errors.append((i, f"Timestamp {ts} of message with offset {i} is out of range. "
                              f"The timestamp should be within [{low}, {high}]"))
        p = end
    if errors:
        raise BatchValidationError(
            ErrorCode.INVALID_TIMESTAMP, f"One or more records have been rejected due to "
            f"invalid timestamp{_where(topic_partition)}: {errors[0][1]}", errors)
    if max_ts != NO_TIMESTAMP and not low <= max_ts <= high:
        raise BatchValidationError(
            ErrorCode.INVALID_TIMESTAMP, f"batch at byte {pos}: its max timestamp {max_ts} is "
            f"out of range [{low}, {high}] of the broker's clock{_where(topic_partition)}")


def _where(topic_partition: str) -> str:
    """The error messages' " in topic partition T-P" (nothing without a name)."""
    return f" in topic partition {topic_partition}" if topic_partition else ""


def rebuild_batches(buf: memoryview, batches: list[BatchInfo],
                    codec: int | None) -> memoryview | None:
    """The request's batches re-encoded where needed: renumbered (offset deltas not 0..n-1)
    or recompressed with the topic's forced `codec`; None when none needs it."""
    for b in batches:  # a loop, not any(): this runs on every produce
        if b.renumber or (codec is not None and b.compression != codec):
            break
    else:
        return None

    def needs(b: BatchInfo) -> bool:
        return b.renumber or (codec is not None and b.compression != codec)

    return memoryview(bytearray(b"".join(
        recompress(buf, b, b.compression if codec is None else codec) if needs(b)
        else bytes(buf[b.position:b.position + b.size]) for b in batches)))


@lru_cache(maxsize=64)  # once per distinct compression.type, not per produce
def target_codec(compression_type: str) -> int | None:
    """The codec a topic forces, or None for `producer` (keep what the producer sent)."""
    ct = compression_type.strip().lower()
    if ct == "producer":
        return None
    if ct == "uncompressed":  # Kafka's name for a topic's `none`
        return Compression.NONE
    try:
        return Compression.from_name(ct)
    except InvalidRecordError:
        raise BatchValidationError(ErrorCode.INVALID_CONFIG,
                                   f"unknown compression.type {ct!r}") from None


def recompress(buf: memoryview, info: BatchInfo, codec: int) -> bytes:
    """Re-encode one batch with `codec` (only when the topic's compression.type says so)."""
    from kafkactl.record.batch import RecordBatch, RecordBatchBuilder

    batch = RecordBatch(buf, info.position)
    builder = RecordBatchBuilder(
        compression=Compression(codec), producer_id=info.producer_id,
        producer_epoch=info.producer_epoch, base_sequence=info.base_sequence)
    for rec in batch:
        builder.append(
            rec.timestamp, None if rec.key is None else bytes(rec.key),
            None if rec.value is None else bytes(rec.value),
            [(k, None if v is None else bytes(v)) for k, v in rec.headers])
    return builder.build()


# the compiled twin (one plain batch; it hands anything else to the reference), else the
# reference itself
validate_batches = validate_batches_py if log_kernels is None else \
    log_kernels.BatchValidator(validate_batches_py, BatchInfo, check_records,
                               None if kernels is None else kernels.prove, crc32c).validate


def validate_produced(buf: memoryview, config: LogConfig, *, now_ms: int,
                      produce_version: int, topic_partition: str = "") -> list[BatchInfo]:
    """`validate_batches` of a produce request's records under a topic's `config`: the
    compiled twin when the timestamp bounds before and after the clock are one limit (it
    takes one), else the reference with both (LogConfig.timestamp_bounds)."""
    before, after = config.timestamp_bounds
    if before == after:
        return validate_batches(
            buf, max_message_bytes=config.max_message_bytes,
            timestamp_type=config.message_timestamp_type, max_timestamp_difference_ms=before,
            now_ms=now_ms, produce_version=produce_version, single_batch=produce_version >= 3,
            compacted=config.compact, topic_partition=topic_partition)
    return validate_batches_py(
        buf, max_message_bytes=config.max_message_bytes,
        timestamp_type=config.message_timestamp_type, max_timestamp_difference_ms=before,
        timestamp_after_max_ms=after, now_ms=now_ms, produce_version=produce_version,
        single_batch=produce_version >= 3, compacted=config.compact,
        topic_partition=topic_partition)
