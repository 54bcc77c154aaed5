"""LogValidator: produce-side validation of record batches.

Every batch is checked from its 61-byte header and one CRC-32C over its bytes: length in the
buffer, magic, CRC, last-offset-delta vs record count, size vs `max.message.bytes`,
compression codec. Then its records section (decompressed once when compressed) goes through
record.framing's scan: exactly `count` records tiling the section, offset deltas 0..n-1,
key/value/header lengths inside each record; on a compacted topic, a null key is a
per-record error (record_errors). With `message.timestamp.difference.max.ms` set (CreateTime),
every record's timestamp but NO_TIMESTAMP (-1) must be that close to the broker's clock
(per-record INVALID_TIMESTAMP, as Kafka; negative timestamps are not exempt).

The batch's max timestamp is its records', as Kafka's LogValidator takes it (the
producer's header is not trusted): on a CreateTime topic every record's timestamp is read
(`records_max_timestamp`: compiled when built) and a header that says otherwise is
rewritten in place (max timestamp, CRC: Kafka's batch.setMaxTimestamp), so the time index,
ListOffsets and retention see what the records carry. A producer batch with the
LogAppendTime attribute bit is refused on a LogAppendTime topic (INVALID_TIMESTAMP,
"Producer should not set timestamp type to LogAppendTime"); on a CreateTime topic the bit
is cleared and its max timestamp kept (Kafka reads every record's timestamp as that max).

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

import struct
import sys
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
    MAX_TIMESTAMP_OFFSET,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    restamp_crc,
)
from kafkactl.record.codecs import Compression, decompress
from kafkactl.record.crc import crc32c
from kafkactl.record.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from kafkactl.record.framing import check_records
from kafkactl.record.varint import decode_varint, decode_varlong

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
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
    create_time = timestamp_type == "CreateTime"
    check_time = create_time and (max_timestamp_difference_ms < LONG_MAX
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
        log_append = bool(attributes & TIMESTAMP_TYPE_MASK)
        if log_append and (not create_time or max_ts == NO_TIMESTAMP):
            _refuse_log_append_time(buf, pos, count, topic_partition)
        if check_time:
            records_max = _check_timestamps(
                records, count, first_ts, max_ts, log_append, now_ms,
                max_timestamp_difference_ms, after_ms, topic_partition)
        elif not create_time:  # LogAppendTime: the append stamps the max
            records_max = max_ts
        elif log_append:  # every record's timestamp reads as the header's max
            records_max = max_ts if max_ts > NO_TIMESTAMP else NO_TIMESTAMP
        elif codec or backing is None:
            records_max = records_max_timestamp(records, 0, len(records), count, first_ts)
        else:
            records_max = records_max_timestamp(backing, pos + RECORDS_OFFSET, pos + size,
                                                count, first_ts)
        if records_max != max_ts or log_append:  # Kafka's batch.setMaxTimestamp
            _set_max_timestamp(buf, pos, attributes & ~TIMESTAMP_TYPE_MASK, records_max)
            max_ts = records_max
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


def _check_timestamps(records: bytes | memoryview, count: int, first_ts: int,
                      max_ts: int, log_append: bool, now_ms: int, limit: int,
                      after: int, topic_partition: str) -> int:
    """`message.timestamp.difference.max.ms` (CreateTime) on every record of a batch
    (`records`: its section, decompressed, framing proven), as Kafka's
    LogValidator.validateTimestamp: only NO_TIMESTAMP (-1) is exempt; any other timestamp,
    a negative one too, must be within `limit` ms of `now_ms`. Each record out of range is a
    record error (INVALID_TIMESTAMP). Returns the batch's max timestamp as Kafka takes it
    from the records (records_max_timestamp_py). Reads only each record's length and
    timestamp delta."""
    low, high = now_ms - limit, now_ms + after  # (Python ints: no overflow at Long.MAX)
    errors: list[tuple[int, str]] = []
    best = NO_TIMESTAMP
    p = 0
    for i in range(count):
        length, p = decode_varint(records, p)
        end = p + length
        if log_append:  # a LogAppendTime batch's records carry its max timestamp
            ts = max_ts
        else:
            delta, _ = decode_varlong(records, p + 1)  # after the attributes byte
            ts = _java_long(first_ts + delta)
        if ts != NO_TIMESTAMP and not low <= ts <= high:
            errors.append((i, f"Timestamp {ts} of message with offset {i} is out of range. "
                              f"The timestamp should be within [{low}, {high}]"))
        if ts > best:
            best = ts
        p = end
    if errors:
        raise BatchValidationError(
            ErrorCode.INVALID_TIMESTAMP, f"One or more records have been rejected due to "
            f"invalid timestamp{_where(topic_partition)}: {errors[0][1]}", errors)
    return best


def _java_long(n: int) -> int:
    """`n` wrapped to a signed 64-bit integer (Java's long arithmetic)."""
    return n if LONG_MIN <= n <= LONG_MAX else (n - LONG_MIN) % 2**64 + LONG_MIN


# zigzag byte z (a one-byte varlong) -> its value + 64, an order-preserving byte
_ZIGZAG_ORDER = bytes(((z >> 1) ^ -(z & 1)) + 64 if z < 0x80 else 0 for z in range(256))
_PARITY = bytes(z & 1 for z in range(256))
_HIGH_BYTES = bytes(range(0x80, 0x100))
_BYTE = [bytes((v,)) for v in range(256)]
MIN_COLUMN_RUN = 16  # a shorter run of one record size is walked record by record
MAX_SHORT_RUNS = 4  # after this many, the rest too (mixed sizes)


def records_max_timestamp_py(data: bytes | bytearray | memoryview, start: int, stop: int,
                             count: int, first_ts: int) -> int:
    """The max timestamp of a batch as Kafka's LogValidator takes it from its `count`
    records in data[start:stop] (framing proven): the largest of NO_TIMESTAMP (-1) and
    each record's first_ts + timestamp delta (a Java long: wraps). The definition; the
    compiled twin (_log_kernels.records_max_timestamp) walks the same records.

    Records are read in runs of one size (the producer's shape: one stride, found with a
    strided slice of the length varints); a run whose timestamp deltas are all one byte,
    or all two bytes of one sign, is read as columns. After a short run (mixed sizes)
    the rest is walked record by record (~0.3 us a record)."""
    if not isinstance(data, bytes | bytearray):
        data, stop, start = bytes(data[start:stop]), stop - start, 0
    best = NO_TIMESTAMP
    columns = LONG_MIN + 2**14 <= first_ts <= LONG_MAX - 2**14  # no column delta wraps
    short = 0
    i, p = 0, start
    while i < count:
        length, q = decode_varint(data, p)
        stride = q - p + length
        run = count - i
        uniform = short <= MAX_SHORT_RUNS  # else mixed sizes: the rest is walked
        if run > 1 and uniform:
            for k in range(p, q):  # the records at one stride with the same length bytes
                column = data[k:k + run * stride:stride]
                run = min(run, len(column) - len(column.lstrip(data[k:k + 1])))
        delta = _column_max_delta(data, q + 1, p + run * stride, stride) \
            if columns and uniform and run >= MIN_COLUMN_RUN else None
        if delta is not None:
            if first_ts + delta > best:
                best = first_ts + delta
            p += run * stride
        else:
            short += run < MIN_COLUMN_RUN
            ts, p = _walk_max_timestamp(data, p, run, first_ts)
            if ts > best:
                best = ts
        i += run
    return best


def _walk_max_timestamp(data: bytes | bytearray, p: int, count: int, first_ts: int
                        ) -> tuple[int, int]:
    """(the max timestamp of the `count` records from p, the position after them), record
    by record; one- and two-byte varints are read inline."""
    best = NO_TIMESTAMP
    for _ in range(count):
        b = data[p]
        if b < 0x80:
            length, q = (b >> 1) ^ -(b & 1), p + 1
        elif data[p + 1] < 0x80:
            b = (b & 0x7F) | (data[p + 1] << 7)
            length, q = (b >> 1) ^ -(b & 1), p + 2
        else:
            length, q = decode_varint(data, p)
        t = data[q + 1]  # after the attributes byte
        delta = (t >> 1) ^ -(t & 1) if t < 0x80 else decode_varlong(data, q + 1)[0]
        ts = first_ts + delta
        if ts > best:
            best = ts if LONG_MIN <= ts <= LONG_MAX else max(best, _java_long(ts))
        elif ts < LONG_MIN:
            best = max(best, _java_long(ts))
        p = q + length
    return best, p


def _max_byte(column: bytes | bytearray) -> int:
    """The largest byte of a non-empty column of bytes below 0x80, looked for from 127
    down, each a memchr (C speed; max() costs a Python int per byte)."""
    for v in range(127, 0, -1):
        if _BYTE[v] in column:
            return v
    return 0


def _column_max_delta(data: bytes | bytearray, at: int, end: int, stride: int
                      ) -> int | None:
    """The largest timestamp delta of a run of records of one size whose deltas start at
    `at` (one every `stride` bytes, before `end`): read as columns when every delta is one
    varint byte, or two of one sign; else None."""
    first = data[at:end:stride]
    if first.isascii():
        return _max_byte(first.translate(_ZIGZAG_ORDER)) - 64
    second = data[at + 1:end:stride]
    if first.translate(None, _HIGH_BYTES) or not second.isascii() \
            or len(second) != len(first):
        return None
    signs = first.translate(_PARITY)  # a zigzag value's sign is its low bit
    if b"\x01" in signs and b"\x00" in signs:
        return None
    pairs = bytearray(2 * len(first))  # words second * 256 + first (native order)
    low, high = (0, 1) if sys.byteorder == "little" else (1, 0)
    pairs[low::2] = first
    pairs[high::2] = second
    words = memoryview(pairs).cast("H")
    # the order of the words is the order of the zigzag values: the largest is the max
    # delta when all are >= 0, the smallest when all are < 0
    w = int(max(words)) if b"\x01" not in signs else int(min(words))
    z = (w & 0x7F) | ((w >> 8) << 7)
    return (z >> 1) ^ -(z & 1)


def _records_max_timestamp(data: bytes | bytearray | memoryview, start: int, stop: int,
                           count: int, first_ts: int) -> int:
    """The compiled twin, or the reference where it finds records that do not frame."""
    assert log_kernels is not None  # (picked below only when it is built)
    got = log_kernels.records_max_timestamp(data, start, stop, count, first_ts)
    return records_max_timestamp_py(data, start, stop, count, first_ts) if got is None \
        else got


records_max_timestamp = records_max_timestamp_py if log_kernels is None else \
    _records_max_timestamp


def _set_max_timestamp(buf: memoryview, pos: int, attributes: int, max_ts: int) -> None:
    """Kafka's batch.setMaxTimestamp(CREATE_TIME, max_ts): the batch at `pos` gets
    `attributes` (the LogAppendTime bit cleared) and `max_ts`, and a new CRC-32C."""
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_ts)
    restamp_crc(buf, pos)


def _refuse_log_append_time(buf: memoryview, pos: int, count: int,
                            topic_partition: str) -> None:
    """Kafka's validateTimestamp for a producer batch with the LogAppendTime attribute bit
    on a LogAppendTime topic (or whose max timestamp is NO_TIMESTAMP on a CreateTime
    one): every record is an INVALID_TIMESTAMP record error."""
    from kafkactl.record.batch import RecordBatch

    errors = []
    for i, rec in enumerate(RecordBatch(buf, pos)):
        errors.append((i, f"Invalid timestamp type in message DefaultRecord(offset={i}, "
                          f"timestamp={rec.timestamp}, key="
                          f"{0 if rec.key is None else len(rec.key)} bytes, value="
                          f"{0 if rec.value is None else len(rec.value)} bytes). Producer "
                          f"should not set timestamp type to LogAppendTime."))
        if i + 1 >= count:
            break
    raise BatchValidationError(
        ErrorCode.INVALID_TIMESTAMP, f"One or more records have been rejected due to "
        f"invalid timestamp{_where(topic_partition)}: {errors[0][1]}", errors)


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
