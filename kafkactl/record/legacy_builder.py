"""Rewriting a magic 0/1 compressed wrapper with some of its inner messages (the log cleaner),
as Kafka's MemoryRecordsBuilder writes a legacy message set:

* the inner messages keep their offsets: relative to the first kept one for magic 1
  (0, 2, 5, ... when messages between them went), absolute for magic 0; they keep the
  wrapper's magic (a KAFKA-4298 wrapper whose inner messages had another one is repaired);
* LogAppendTime (magic 1): every message and the wrapper carry the wrapper's timestamp, and
  the timestamp-type bit is set on each; CreateTime: each message keeps its own timestamp and
  the wrapper carries the largest (-1 when none);
* the wrapper: the offset of the last kept message, a null key, the same codec (magic 0 LZ4
  with Kafka 0.8's frame checksum).
"""

from __future__ import annotations

from collections.abc import Sequence

from kafkactl.record.codecs import Compression, compress
from kafkactl.record.errors import InvalidRecordError
from kafkactl.record.legacy import TIMESTAMP_TYPE_MASK, encode_message

__all__ = ["LegacyRecord", "build_legacy_wrapper"]

# (absolute offset, timestamp, key, value) of one message
LegacyRecord = tuple[int, int, bytes | None, bytes | None]


def build_legacy_wrapper(magic: int, compression: int, records: Sequence[LegacyRecord], *,
                         log_append_time: int | None = None) -> bytes:
    """One compressed wrapper entry (log overhead included) holding `records` in order.
    `log_append_time`: the wrapper is LogAppendTime (magic 1 only) with that timestamp."""
    if magic not in (0, 1):
        raise InvalidRecordError(f"legacy wrappers have magic 0 or 1, not {magic}")
    codec = Compression(compression)
    if codec == Compression.NONE or not records:
        raise InvalidRecordError("a wrapper needs a codec and at least one message")
    log_append = magic == 1 and log_append_time is not None
    attrs = TIMESTAMP_TYPE_MASK if log_append else 0
    base = records[0][0]
    inner = []
    max_ts = -1
    for offset, ts, key, value in records:
        if log_append:
            ts = log_append_time  # type: ignore[assignment]
        max_ts = max(max_ts, ts)
        inner.append(encode_message(magic, offset - base if magic == 1 else offset, key, value,
                                    timestamp=ts, attributes=attrs))
    payload = compress(codec, b"".join(inner), legacy_lz4_checksum=(magic == 0))
    return encode_message(magic, records[-1][0], None, payload,
                          timestamp=log_append_time if log_append else max_ts,
                          attributes=int(codec) | attrs)
