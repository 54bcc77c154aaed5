"""RecordBatchBuilder: encodes records into one magic-2 batch (the one record encoder).

Records are encoded as they are appended (one bytes object each, or one per bulk run);
`build()` compresses the records section when asked and puts the header
(record.batch_header) with its CRC-32C in front.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from kafkactl.record.batch_header import (
    CONTROL_FLAG,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    TimestampType,
    pack_header,
)
from kafkactl.record.codecs import Compression, compress
from kafkactl.record.errors import InvalidRecordError
from kafkactl.record.varint import _UNSIGNED_CACHE, encode_varint, encode_varlong

__all__ = ["RecordBatchBuilder", "assemble_batch", "encode_record"]


# (offset delta << 24 | value length) -> encoded record prefix, for append_values
_BULK_PREFIX_CACHE: dict[int, bytes] = {}


class RecordBatchBuilder:
    """Builds one magic-2 batch. Records are encoded as they are appended (one bytes each)."""

    def __init__(
        self, compression: int = Compression.NONE,
        timestamp_type: int = TimestampType.CREATE_TIME,
        producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
        is_control: bool = False, base_offset: int = 0, partition_leader_epoch: int = -1,
    ) -> None:
        self.compression = Compression(compression)
        self.timestamp_type = TimestampType(timestamp_type)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self._records: list[bytes] = []  # encoded records (or runs of them)
        self._count = 0
        self._size = 0
        self._base_ts: int | None = None
        self._max_ts = NO_TIMESTAMP
        self._last_delta = -1

    @property
    def record_count(self) -> int:
        return self._count

    def append(
        self, timestamp: int | None, key: bytes | None, value: bytes | None,
        headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> int:
        """Encode one record at the next offset delta; returns that delta."""
        delta = self._last_delta + 1
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        base_ts = self._base_ts
        if base_ts is None:
            base_ts = self._base_ts = timestamp
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        rec = encode_record(delta, timestamp - base_ts, key, value, headers)
        self._records.append(rec)
        self._count += 1
        self._size += len(rec)
        self._last_delta = delta
        return delta

    def append_values(self, values: Sequence[bytes], timestamp: int | None = None) -> None:
        """Append many records with a null key, no headers and one shared timestamp.

        The bulk path of line-oriented producers: each record's prefix (length, attributes,
        timestamp delta 0, offset delta, null key, value length) depends only on its offset
        delta and value length, so it is cached and a record costs one lookup and three
        list items. Falls back to `append` when the shared timestamp is not the batch's
        base timestamp or a value is None.
        """
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        if self._base_ts is None:
            self._base_ts = timestamp
        if timestamp != self._base_ts or None in values:
            for v in values:
                self.append(timestamp, None, v)
            return
        if timestamp > self._max_ts:
            self._max_ts = timestamp
        cache = _UNSIGNED_CACHE
        prefixes = _BULK_PREFIX_CACHE
        parts: list[bytes] = []
        extend = parts.extend
        start = self._last_delta + 1
        delta = start - 1
        for delta, v in enumerate(values, start):
            n = len(v)
            k = (delta << 24) | n
            pre = prefixes.get(k)
            if pre is None:
                off = cache[delta << 1] if delta < 8192 else encode_varint(delta)
                vl = cache[n << 1] if n < 8192 else encode_varint(n)
                size = 4 + len(off) + len(vl) + n
                pre = b"".join((encode_varint(size), b"\x00\x00", off, b"\x01", vl))
                if delta < 4096 and n < (1 << 24) and len(prefixes) < 1 << 18:
                    prefixes[k] = pre
            extend((pre, v, b"\x00"))
        chunk = b"".join(parts)
        self._records.append(chunk)
        self._count += delta - start + 1
        self._size += len(chunk)
        self._last_delta = delta

    def append_at(
        self, offset_delta: int, timestamp: int | None, key: bytes | None,
        value: bytes | None, headers: Iterable[tuple[str, bytes | None]] = (),
    ) -> int:
        """Append with an explicit offset delta (gaps allowed, as after compaction);
        deltas must increase."""
        if offset_delta <= self._last_delta:
            raise InvalidRecordError(
                f"offset delta {offset_delta} does not follow {self._last_delta}"
            )
        self._last_delta = offset_delta - 1
        return self.append(timestamp, key, value, headers)

    def size_in_bytes(self) -> int:
        """Size of the batch built now, before compression."""
        return RECORD_BATCH_OVERHEAD + self._size

    def estimated_size_after_append(self, key: bytes | None, value: bytes | None) -> int:
        return self.size_in_bytes() + 21 + (len(key) if key else 0) + (len(value) if value else 0)

    def _attributes(self) -> int:
        attrs = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attrs |= TRANSACTIONAL_FLAG
        if self.is_control:
            attrs |= CONTROL_FLAG
        return attrs

    def build(self) -> bytes:
        """The complete batch (header + records, compressed if asked) with its CRC."""
        records = b"".join(self._records)
        if self.compression != Compression.NONE:
            records = compress(self.compression, records)
        return assemble_batch(
            records, attributes=self._attributes(), last_offset_delta=max(self._last_delta, 0),
            base_timestamp=self._base_ts if self._base_ts is not None else NO_TIMESTAMP,
            max_timestamp=self._max_ts, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, base_sequence=self.base_sequence,
            record_count=self._count, base_offset=self.base_offset,
            partition_leader_epoch=self.partition_leader_epoch)


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None,
                  value: bytes | None, headers: Iterable[tuple[str, bytes | None]] = (),
                  *, header_section: bytes | None = None) -> bytes:
    """One v2 record, length prefix included (the one record encoder: RecordBatchBuilder
    and the client's ProducerBatch both call it). `header_section`: the headers already
    encoded (encode_headers), in place of `headers`."""
    cache = _UNSIGNED_CACHE
    # zigzag of small non-negative n is 2n: index the unsigned cache directly
    ts_enc = (cache[timestamp_delta << 1] if 0 <= timestamp_delta < 8192
              else encode_varlong(timestamp_delta))
    off_enc = cache[offset_delta << 1] if offset_delta < 8192 else encode_varint(offset_delta)
    if key is None:
        klen = b"\x01"
        key = b""
    else:
        n = len(key)
        klen = cache[n << 1] if n < 8192 else encode_varint(n)
    if value is None:
        vlen = b"\x01"
        value = b""
    else:
        n = len(value)
        vlen = cache[n << 1] if n < 8192 else encode_varint(n)
    hdr = (header_section if header_section is not None
           else encode_headers(headers) if headers else b"\x00")
    body = b"".join((b"\x00", ts_enc, off_enc, klen, key, vlen, value, hdr))
    n = len(body)
    return (cache[n << 1] if n < 8192 else encode_varint(n)) + body


def assemble_batch(records: bytes, *, attributes: int, last_offset_delta: int,
                   base_timestamp: int, max_timestamp: int, producer_id: int,
                   producer_epoch: int, base_sequence: int, record_count: int,
                   base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """A complete magic-2 batch around an (already compressed) records section, with its
    CRC-32C (which covers everything after the CRC field)."""
    return pack_header(
        records, attributes=attributes, last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp, max_timestamp=max_timestamp, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, record_count=record_count,
        base_offset=base_offset, partition_leader_epoch=partition_leader_epoch) + records


def encode_headers(headers: Iterable[tuple[str, bytes | None]]) -> bytes:
    """A record's header section: the count, then each key and value with its length."""
    cache = _UNSIGNED_CACHE
    parts = []
    n = 0
    for hkey, hval in headers:
        # a key read from a record whose key is not UTF-8 (record.batch) has those bytes
        # as surrogateescape's U+DC80..U+DCFF: they go back as they came
        kb = hkey.encode("utf-8", "surrogateescape") if isinstance(hkey, str) else bytes(hkey)
        k = len(kb)
        parts.append(cache[k << 1] if k < 8192 else encode_varint(k))
        parts.append(kb)
        if hval is None:
            parts.append(b"\x01")
        else:
            v = len(hval)
            parts.append(cache[v << 1] if v < 8192 else encode_varint(v))
            parts.append(hval if isinstance(hval, bytes) else bytes(hval))
        n += 1
    return (cache[n << 1] if n < 8192 else encode_varint(n)) + b"".join(parts)
