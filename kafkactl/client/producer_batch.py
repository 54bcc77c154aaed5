"""ProducerBatch: the records of one partition being filled, encoded straight into v2 bytes.

The producer is the only place records are ever encoded (the broker stores and serves these
bytes unchanged). A record in general goes through record.batch.encode_record and the batch
is framed by record.batch_header.pack_header (the header RecordBatchBuilder writes); the bulk
paths (values only, keyed values) fill batch.size a run of records at a time with
record.columns (table lookups over the whole run, or the compiled encoders: no per-record
Python loop), joined once at `build()` time; lines still in their input buffer are encoded
straight into the batch's own buffer behind room for the header (`lines_buffer`), which
`build()` sends as it is. The base offset is 0 and the broker stamps the real one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from kafkactl.record.batch import (
    RECORD_BATCH_OVERHEAD,
    encode_record,
    set_producer_state,
)
from kafkactl.record.batch_header import pack_header
from kafkactl.record.codecs import Compression, compress
from kafkactl.record.columns import (
    MAX_DELTA,
    MAX_FIELDS,
    encode_key_values,
    encode_values,
)

_HEADER_ROOM = bytes(RECORD_BATCH_OVERHEAD)


def klen_of(field: bytes | None) -> int:
    """The length of a key or value; 0 for None (null)."""
    return 0 if field is None else len(field)


def now_ms() -> int:
    return int(time.time() * 1000)


class ProducerBatch:
    """Records for one topic-partition, appended until `batch_size` bytes are reached.

    `entries` keeps whatever the caller wants back for each record when the batch fails
    (the CLI keeps the raw input line for --failed-file). `futures` holds per-record futures
    (index, future) for records sent through `Producer.send`.
    """

    __slots__ = (
        "topic", "partition", "batch_size", "created_ms", "base_timestamp", "max_timestamp",
        "parts", "size", "record_count", "entries", "futures", "callbacks", "closed",
        "producer_id", "producer_epoch", "base_sequence", "attempts", "built", "retry_at",
        "drained_ms", "order", "first_index", "buf", "clock_stamped", "reserved",
    )

    def __init__(self, topic: str, partition: int, batch_size: int,
                 timestamp: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.batch_size = batch_size
        self.created_ms = time.monotonic() * 1000.0
        ts = now_ms() if timestamp is None else timestamp
        self.base_timestamp = ts
        self.max_timestamp = ts
        self.parts: list[bytes] = []
        self.size = RECORD_BATCH_OVERHEAD
        self.record_count = 0
        self.entries: list[Any] = []
        self.futures: list[tuple[int, Any]] = []
        self.callbacks: list[Callable[[ProducerBatch, int, BaseException | None], None]] = []
        self.closed = False
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.attempts = 0
        self.built: bytes | bytearray | memoryview | None = None
        self.retry_at = 0.0
        self.drained_ms = 0.0
        self.order: tuple[int, ...] = ()  # the partition's send order (the accumulator's)
        self.first_index = 0  # of its first record in the batch first appended (split())
        # the header room and records of a batch of lines (append_lines), else None
        self.buf: bytearray | None = None
        # the batch timestamp is the clock reading of the bulk call that began the batch
        # (`_takes_stamp`), not a timestamp a record was sent with (`append`)
        self.clock_stamped = False
        # the bytes of buffer.memory the accumulator charged for it (RecordAccumulator._charge)
        self.reserved = 0

    # -- appending -----------------------------------------------------------------------

    def append(self, timestamp: int | None, key: bytes | None, value: bytes | None,
               headers: Sequence[tuple[str, bytes | None]] = (), *,
               force: bool = False) -> int | None:
        """Encode one record; return its offset delta, or None if the batch is full
        (`force`: append even past batch.size, for split()). `timestamp` None: the batch
        timestamp (timestamp delta 0). Records sent without a timestamp are stamped before
        this with the time they were sent (Producer.send, as Kafka's KafkaProducer.doSend;
        the bulk paths once per call): a batch's timestamp is its first record's, never an
        earlier record's for a later one."""
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        estimate = klen + vlen + 24 + sum(len(k) + len(v or b"") + 6 for k, v in headers)
        if self.closed or self.buf is not None or (
                self.record_count and self.size + estimate > self.batch_size and not force):
            return None
        delta = self.record_count
        if timestamp is None:
            ts_delta = 0
        else:
            if not delta:
                # the batch's timestamp is its first record's; later ones are deltas from it
                # (negative for an older explicit timestamp: a zig-zag varlong, as Kafka's)
                self.base_timestamp = self.max_timestamp = timestamp
                self.clock_stamped = False
            elif timestamp > self.max_timestamp:
                self.max_timestamp = timestamp
            ts_delta = timestamp - self.base_timestamp
        record = encode_record(delta, ts_delta, key, value, headers)
        self.parts.append(record)
        self.size += len(record)
        self.record_count = delta + 1
        return delta

    def append_values(self, values: Sequence[bytes | None], start: int = 0) -> int:
        """Fast path: null-key, header-less records (a None value: null) stamped with the
        call's clock reading (`_takes_stamp`), encoded a run at a time (record.columns:
        the reading's timestamp delta from the batch timestamp). Appends values[start:]
        until the batch is full (of bytes, or of MAX_DELTA records: see `_table_full`);
        returns the index after the last value appended (== start when nothing fit)."""
        if self.closed or self.buf is not None:
            return start
        now = now_ms()
        if not self._takes_stamp(now):
            return start
        parts, i, used = encode_values(values, start, self.record_count,
                                       self.batch_size - self.size, now - self.base_timestamp)
        self._took(parts, i - start, used, now)
        if i < len(values) and not self._table_full() and (
                i == start or klen_of(values[i]) > MAX_FIELDS):
            # A value past the tables, or a first record bigger than the batch: the
            # general encoder takes values until the batch is full.
            i = self._append_each(None, values, i, now)
        return i

    def _takes_stamp(self, now: int) -> bool:
        """Whether a bulk call reading the clock at `now` appends to this batch (its
        records stamped `now`: the bulk encoders, record.columns and its compiled twins,
        write it as the timestamp delta from the batch timestamp, as Kafka's producer
        stamps each record with its send time, KafkaProducer.doSend). An empty batch takes
        now as its timestamp (its first record's, as Kafka's); a batch a bulk call began
        takes the records of later calls too, at their own readings. A batch begun by a
        record sent with a timestamp (or stamped by Producer.send) takes bulk records only
        at that very millisecond: else the next batch, begun now, takes them."""
        if not self.record_count:
            self.base_timestamp = self.max_timestamp = now
            self.clock_stamped = True
            return True
        return self.clock_stamped or now == self.base_timestamp

    def _append_each(self, keys: Sequence[bytes | None] | None,
                     values: Sequence[bytes | None], start: int, now: int) -> int:
        """Records from `start` stamped `now` (`_takes_stamp`), as the bulk encoders write
        them, by the general encoder until the batch is full; returns the index after the
        last one appended."""
        # at the batch timestamp: None (an explicit timestamp for the first record would
        # make the batch one a record sent with a timestamp began: `_takes_stamp`)
        timestamp = None if now == self.base_timestamp else now
        i = start
        n = len(values)
        while i < n and self.append(timestamp, None if keys is None else keys[i],
                                    values[i]) is not None:
            i += 1
        return i

    def _table_full(self) -> bool:
        """A batch the tables filled to MAX_DELTA records (their offset deltas' end) is
        full: the next batch takes the rest by the tables too. Going on record by record
        with the general encoder cost ~5 us a record: 84% of `seq`'s records at a 1 MB
        batch.size. (librdkafka caps its batches too: batch.num.messages, 10,000 by
        default. A batch of lines, `append_lines`, has no such cap.)"""
        return self.record_count >= MAX_DELTA

    def append_key_values(self, keys: Sequence[bytes | None], values: Sequence[bytes | None],
                          start: int = 0) -> int:
        """Fast path for keyed lines: (key or None, value or None) pairs, no headers,
        stamped as `append_values` stamps them. Appends from `start` until the batch is
        full; returns the index after the last pair appended (== start when nothing fit)."""
        if self.closed or self.buf is not None:
            return start
        now = now_ms()
        if not self._takes_stamp(now):
            return start
        parts, i, used = encode_key_values(keys, values, start, self.record_count,
                                           self.batch_size - self.size,
                                           now - self.base_timestamp)
        self._took(parts, i - start, used, now)
        if i < len(values) and not self._table_full() and (
                i == start or max(klen_of(keys[i]), klen_of(values[i])) > MAX_FIELDS // 2):
            i = self._append_each(keys, values, i, now)
        return i

    def takes_lines(self) -> bool:
        """Whether lines can be encoded into this batch (`lines_stamp`)."""
        return self.lines_stamp() is not None

    def lines_stamp(self) -> int | None:
        """The timestamp of lines encoded into this batch now (a reading of the clock,
        which the lines encoder writes as the timestamp delta from the batch timestamp,
        as `_takes_stamp`), or None when it takes no lines: it takes them when it is a
        batch of lines, or an empty one (records of the other paths and lines do not share
        a batch), which takes the reading as its timestamp (its first record's)."""
        now = now_ms()
        if not self.record_count:
            self.base_timestamp = self.max_timestamp = now
            self.clock_stamped = True
            return now
        return now if self.buf is not None else None

    def lines_buffer(self, need: int = 0, spare: list[bytearray] | None = None) -> bytearray:
        """The buffer lines are encoded into at `size` (record.columns.encode_lines_into):
        for an empty batch, batch.size bytes (one of `spare`, the buffers of batches
        done, when there is one), or header room and `need` bytes for a first line longer
        than that."""
        size = RECORD_BATCH_OVERHEAD + need
        if self.buf is None or (self.record_count == 0 and len(self.buf) < size):
            self.buf = (spare.pop() if spare and size <= self.batch_size
                        else bytearray(max(self.batch_size, size)))
        return self.buf

    def release_buffer(self) -> bytearray | None:
        """The lines buffer of a batch that is done (it is never sent again), for another
        batch; the batch keeps no view of it."""
        buf, self.buf, self.built = self.buf, None, None
        return buf

    def took_lines(self, count: int, size: int, timestamp: int | None = None) -> None:
        """`count` records of `size` bytes were encoded into the buffer at `size`, stamped
        `timestamp` (`lines_stamp`; None: the batch timestamp)."""
        self.size += size
        self.record_count += count
        if count and timestamp is not None and timestamp > self.max_timestamp:
            self.max_timestamp = timestamp

    def _took(self, parts: list[bytes], count: int, size: int, timestamp: int) -> None:
        if count:
            self.parts += parts
            self.size += size
            self.record_count += count
            if timestamp > self.max_timestamp:
                self.max_timestamp = timestamp

    # -- building --------------------------------------------------------------------------

    def build(self, compression: int = Compression.NONE) -> bytes | bytearray | memoryview:
        """The v2 batch bytes (cached: a retried batch is re-sent byte for byte)."""
        if self.built is not None:
            return self.built
        self.closed = True
        attributes = 0
        buf = self.buf
        size = self.size
        if buf is None or compression:
            parts: list[Any] = (self.parts if buf is None else
                                [memoryview(buf)[RECORD_BATCH_OVERHEAD:size]])
            if compression:
                parts = [compress(Compression(compression), b"".join(parts))]
                attributes = int(compression) & 0x07
            # the records copied once, behind room for the header (assemble_batch's bytes)
            buf = bytearray().join((_HEADER_ROOM, *parts))
            size = len(buf)
        # (a batch of lines is sent from its buffer: the records are behind the header room)
        with memoryview(buf) as view:
            buf[:RECORD_BATCH_OVERHEAD] = pack_header(
                view[RECORD_BATCH_OVERHEAD:size], attributes=attributes,
                last_offset_delta=self.record_count - 1,
                base_timestamp=self.base_timestamp, max_timestamp=self.max_timestamp,
                producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence, record_count=self.record_count,
                base_offset=0, partition_leader_epoch=-1)
        self.built = buf if size == len(buf) else memoryview(buf)[:size]
        self.parts = []
        return self.built

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        """Stamp the idempotent producer's id, epoch and base sequence: before the batch is
        built, or on a built batch that is re-sent under a new producer id (its header is
        rewritten and its CRC recomputed; the records stay byte for byte)."""
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.base_sequence = base_sequence
        if self.built is not None:
            buf = bytearray(self.built)
            set_producer_state(buf, 0, producer_id, epoch, base_sequence)
            self.built = bytes(buf)

    def split(self) -> list[ProducerBatch]:
        """Two batches holding this built batch's records, first half and second half, each
        with its records' futures, entries and the batch callbacks (Kafka's producer splits
        a batch the broker refused as too large, until single records are left). They keep
        its creation time, as Kafka's ProducerBatch.split: delivery.timeout.ms counts from
        the records' send, and a partition's queue stays in creation order (the sender's
        expiry walks it only up to its first batch not expired)."""
        assert self.built is not None and self.record_count > 1
        from kafkactl.record.batch import RecordBatch

        records = list(RecordBatch(memoryview(self.built)))
        futures = dict(self.futures)
        cut = len(records) // 2
        halves = []
        for n, part in enumerate((records[:cut], records[cut:])):
            first = 0 if n == 0 else cut
            half = ProducerBatch(self.topic, self.partition, self.batch_size,
                                 self.base_timestamp)
            half.order = (*self.order, n)
            half.created_ms = self.created_ms
            half.first_index = self.first_index + first
            for i, r in enumerate(part):
                half.append(r.timestamp, None if r.key is None else bytes(r.key),
                            None if r.value is None else bytes(r.value),
                            [(k, None if v is None else bytes(v)) for k, v in r.headers],
                            force=True)
                fut = futures.get(first + i)
                if fut is not None:
                    half.futures.append((i, fut))
            half.entries = list(self.entries[first:first + len(part)])
            half.callbacks = list(self.callbacks)
            if self.base_sequence >= 0:
                half.set_producer_state(self.producer_id, self.producer_epoch,
                                        (self.base_sequence + first) & 0x7FFFFFFF)
            halves.append(half)
        return halves

    # -- completion ------------------------------------------------------------------------

    def complete(self, base_offset: int, error: BaseException | None,
                 log_append_time: int = -1) -> None:
        for index, fut in self.futures:
            if error is None:
                fut.set_result_from_batch(
                    self, base_offset + index if base_offset >= 0 else -1, index, log_append_time)
            else:
                fut.set_exception(error)
        run_batch_callbacks(self.callbacks, self, base_offset, error)
        self.entries = []
        self.futures = []
        self.callbacks = []


def run_batch_callbacks(callbacks: list[Any], batch: ProducerBatch, base_offset: int,
                        error: BaseException | None) -> None:
    """Each of `callbacks(batch, base_offset, error)`; one raising (logged) leaves the
    others to run, as Java's ProducerBatch does."""
    for cb in callbacks:
        try:
            cb(batch, base_offset, error)
        except Exception:
            import logging  # (not at start-up: a plain produce logs nothing)

            logging.getLogger(__name__).exception(
                "a batch callback raised for %s-%d", batch.topic, batch.partition)
