"""Format conversion between legacy message sets (magic 0/1) and record batches (magic 2).

- `up_convert(message_set)`: what a broker does with Produce v0-2 data. Each run of
  uncompressed messages becomes one uncompressed batch; each compressed wrapper becomes one
  batch with the same codec. Offsets (and their gaps) are kept, unless `assign_offsets`
  (the produce path: Kafka ignores the offsets a producer sends and numbers the records
  itself); magic 0 has no timestamps, so records get -1 (NO_TIMESTAMP), as Kafka does.
- `down_convert(records, magic)`: what a broker does for Fetch v0-3 clients. Every batch
  becomes messages of `magic`: uncompressed batches as plain messages, compressed ones as
  one wrapper with the same codec (zstd, which magic 0/1 cannot carry, is written
  uncompressed). Headers are dropped, control batches skipped, magic 0 loses timestamps.
"""

from __future__ import annotations

from kafkactl.record.batch import RecordBatch, RecordBatchBuilder, TimestampType
from kafkactl.record.codecs import Compression, compress
from kafkactl.record.errors import CorruptRecordError, InvalidRecordError
from kafkactl.record.legacy import TIMESTAMP_TYPE_MASK, LegacyBatch, encode_message
from kafkactl.record.memory_records import iter_batches

__all__ = ["down_convert", "up_convert"]

Buf = bytes | bytearray | memoryview


def _bytes(b: memoryview | None) -> bytes | None:
    return None if b is None else bytes(b)


def up_convert(message_set: Buf, *, assign_offsets: bool = False) -> bytes:
    """Magic 0/1 entries (magic 2 batches are passed through) -> magic 2 batches.

    `assign_offsets` (the produce path): the offsets the producer wrote are ignored, as Kafka
    ignores them (producers of that era leave them all 0, or 0..n-1 / all 0 inside a
    wrapper), records are numbered 0..n-1 across the whole set, and every message's CRC
    (wrappers and the messages inside them) is checked first."""
    out: list[bytes] = []
    pending: RecordBatchBuilder | None = None
    pending_base = 0
    next_offset = 0

    def flush() -> None:
        nonlocal pending
        if pending is not None and pending.record_count:
            out.append(pending.build())
        pending = None

    for batch in iter_batches(message_set):
        if isinstance(batch, RecordBatch):
            flush()
            out.append(bytes(batch._buf[batch.position:batch.position + batch.size]))
            next_offset += batch.record_count
            continue
        if assign_offsets:
            _ensure_valid(batch)
        msg = batch.entry.message
        ts_type = (TimestampType.LOG_APPEND_TIME if msg.magic == 1
                   and msg.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME)
        if batch.compression == Compression.NONE:
            offset = next_offset if assign_offsets else batch.base_offset
            if pending is None or pending.timestamp_type != ts_type:
                flush()
                pending_base = offset
                pending = RecordBatchBuilder(timestamp_type=ts_type, base_offset=pending_base)
            pending.append_at(offset - pending_base, msg.timestamp,
                              _bytes(msg.key), _bytes(msg.value))
            next_offset += 1
            continue
        flush()
        records = list(batch)
        base = next_offset if assign_offsets else records[0].offset
        builder = RecordBatchBuilder(compression=batch.compression, timestamp_type=ts_type,
                                     base_offset=base)
        for i, r in enumerate(records):
            builder.append_at(i if assign_offsets else r.offset - base, r.timestamp,
                              _bytes(r.key), _bytes(r.value))
        out.append(builder.build())
        next_offset += len(records)
    flush()
    return b"".join(out)


def _ensure_valid(batch: LegacyBatch) -> None:
    """CRC of a magic 0/1 entry and, in a wrapper, of every message inside it."""
    if not batch.is_valid():
        raise CorruptRecordError(
            f"message at byte {batch.position} does not match its CRC "
            f"(stored {batch.crc}, computed {batch.compute_crc()})")
    if batch.compression != Compression.NONE:
        for i, (_off, m) in enumerate(batch.iter_messages()):
            if not m.is_valid():
                raise CorruptRecordError(
                    f"message {i} inside the wrapper at byte {batch.position} does not "
                    f"match its CRC")


def down_convert(records: Buf, magic: int) -> bytes:
    """Record batches (any magic) -> a message set of `magic` (0 or 1)."""
    if magic not in (0, 1):
        raise InvalidRecordError(f"can only down-convert to magic 0 or 1, not {magic}")
    out: list[bytes] = []
    for batch in iter_batches(records):
        if isinstance(batch, RecordBatch) and batch.is_control:
            continue
        if isinstance(batch, LegacyBatch) and batch.magic == magic:
            out.append(bytes(batch.entry._buf[batch.position:batch.position + batch.size]))
            continue
        log_append = magic == 1 and batch.timestamp_type == TimestampType.LOG_APPEND_TIME
        codec = batch.compression
        if codec == Compression.ZSTD:
            codec = Compression.NONE
        recs = list(batch)
        if not recs:
            continue
        if codec == Compression.NONE:
            attrs = TIMESTAMP_TYPE_MASK if log_append else 0
            for r in recs:
                out.append(encode_message(magic, r.offset, _bytes(r.key), _bytes(r.value),
                                          timestamp=r.timestamp, attributes=attrs))
            continue
        first = recs[0].offset
        inner = b"".join(
            encode_message(magic, (r.offset - first) if magic == 1 else r.offset,
                           _bytes(r.key), _bytes(r.value), timestamp=r.timestamp)
            for r in recs
        )
        payload = compress(codec, inner, legacy_lz4_checksum=(magic == 0))
        attrs = int(codec) | (TIMESTAMP_TYPE_MASK if log_append else 0)
        wrapper_ts = batch.max_timestamp if magic == 1 else None
        out.append(encode_message(magic, recs[-1].offset, None, payload,
                                  timestamp=wrapper_ts, attributes=attrs))
    return b"".join(out)
