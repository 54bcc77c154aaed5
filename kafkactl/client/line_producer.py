"""LineProducer: produce an iterable of raw records (lines) to one topic, and account for
every one of them: acknowledged, failed, or read but never handed to the producer.

    lp = LineProducer(producer, "logs", key_separator=b"\\t", keep_failed=True)
    outcome = lp.run(read_records(sys.stdin.buffer, b"\\n"))   # flushes, then aborts
    lp.stats.acked, lp.stats.failed, lp.read, list(lp.failed_records())

`kafkactl produce` is this plus option parsing and the report; a mirror is this fed by a
TopicReader. Lines come in chunks (lists of records, or delimited.Blocks of whole records
still in their input buffer, when `takes_blocks`): without --sync a Block is handed over in
bulk (Producer.send_lines, headers included), and so is a list with no headers
(send_values / send_key_values: the batch fast paths); otherwise record by record. When
the run stops part-way (Ctrl-C, an input or producer error), `unsent()` names the records
of the interrupted chunk the producer never got.

Null keys and values (tombstones): with `null_empty` (kcat's -Z) an empty value, and with
a key_separator an empty key, is sent as null; with `null_marker` (Kafka's console producer's
null.marker) a value or key exactly equal to it is. Such a run takes lists, not Blocks (the
encoder of Blocks knows no null): split_keys / null_values put None for each null field
(compiled, in the pass that splits the keys) and the chunk goes over the bulk paths like any
other, nulls and all, in input order (record.columns encodes None as Kafka's null, length
-1, byte for byte as the record-by-record path does). Without a key separator and with
keep_failed, a chunk with a null value goes over send_key_values with null keys: its
entries must be the raw records, not the values (send_values keeps the values).

A record longer than any the producer can send (`limit()`: max.request.size and
buffer.memory less the record overhead, plus what a key separator or a null field can take
off) is read as a delimited.LongRecord, its bytes not held (spilled to a file with
keep_failed, else dropped): refused as the producer refuses one too large, with the same
error (its key and value size reckoned as send() would from the LongRecord's notes),
counted failed, and kept (the LongRecord, whose bytes are in the spill) with keep_failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol

from kafkactl.client.delimited import Block, Limit, LongRecord
from kafkactl.client.errors import RecordTooLargeError
from kafkactl.client.producer import RECORD_OVERHEAD
from kafkactl.record._accel import kernels

if TYPE_CHECKING:
    from kafkactl.client.producer import Producer
    from kafkactl.client.producer_batch import ProducerBatch

# After Ctrl-C (or SIGTERM) the records in flight get STOP_FLUSH s to be acknowledged (a
# broker that answers does in milliseconds; one that does not, not before request.timeout.ms,
# 30 s), then the producer's sender STOP_ABORT s to stop: one stuck in a call to a broker
# that does not answer is left behind and its batches fail (as Java's producer's
# close(timeout) aborts the incomplete batches). Together well within the 10 s a container
# runtime (docker stop) waits between SIGTERM and SIGKILL, with time left for the summary
# and --failed-file. After an error (of the input, say) the flush waits ERROR_FLUSH s.
STOP_FLUSH = 5.0
STOP_ABORT = 1.0
ERROR_FLUSH = 30.0

# Called from the sender thread with the raw records of a failed batch and its error.
FailedRecordsCallback = Callable[[list[bytes], BaseException], None]


def split_keys_py(records: list[bytes], separator: bytes,
                  nulls: Collection[bytes] | None = None
                  ) -> tuple[list[bytes | None], list[bytes | None]]:
    """key SEP value -> (key, value); a record without SEP has a null key. With `nulls`, a
    key or value equal to one of them is None (null_values). The definition of
    `split_keys`, the compiled twin when the kernels are in use (record/_accel.py)."""
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    key_append, value_append = keys.append, values.append
    for raw in records:
        k, sep, v = raw.partition(separator)
        if sep:
            key_append(k)
            value_append(v)
        else:
            key_append(None)
            value_append(raw)
    if nulls:
        return null_values_py(keys, nulls), null_values_py(values, nulls)
    return keys, values


def null_values_py(values: Sequence[bytes | None], nulls: Collection[bytes]
                   ) -> list[bytes | None]:
    """A list of `values` with each one equal to one of `nulls` as None (a null field);
    `values` itself when it is a list and none is. The definition of `null_values`, the
    compiled twin when the kernels are in use."""
    out = values if isinstance(values, list) else list(values)
    at = null_positions(nulls, out)
    if not at:
        return out
    out = list(out)
    for i in at:
        out[i] = None
    return out


class SplitKeys(Protocol):
    def __call__(self, records: list[bytes], separator: bytes,
                 nulls: Collection[bytes] | None = None
                 ) -> tuple[list[bytes | None], list[bytes | None]]: ...


split_keys: SplitKeys = split_keys_py if kernels is None else kernels.split_keys
null_values: Callable[[Sequence[bytes | None], Collection[bytes]], list[bytes | None]] = (
    null_values_py if kernels is None else kernels.null_values)


def null_fields(null_empty: bool = False, null_marker: bytes | None = None
                ) -> frozenset[bytes]:
    """The keys and values sent as null: b"" with null_empty (kcat's -Z), the marker
    (Kafka's console producer's null.marker); empty when neither is given."""
    return frozenset(([b""] if null_empty else [])
                     + ([null_marker] if null_marker is not None else []))


def null_positions(nulls: Collection[bytes], values: Sequence[bytes | None],
                   keys: Sequence[bytes | None] | None = None) -> list[int]:
    """The indexes, ascending, of the records whose value (or key) is one of `nulls`
    (index(): a scan in C per null spelling and per hit, comparing with ==; None, the key
    of a record without the separator, is none of them)."""
    found: set[int] = set()
    for column in (values,) if keys is None else (values, keys):
        for null in nulls:
            i = -1
            try:
                while True:
                    i = column.index(null, i + 1)
                    found.add(i)
            except ValueError:
                pass
    return sorted(found)


def entry_bytes(entry: Any) -> Any:
    """A kept entry is the raw input record (a LongRecord for one too long to hold), or
    (sequence number, raw record) where the order of hand-over is not the input order (the
    keyed path over several partitions)."""
    return entry[1] if isinstance(entry, tuple) else entry


class DeliveryStats:
    """Counts of the run, updated by the sender thread's batch callbacks."""

    def __init__(self, on_failed: FailedRecordsCallback | None = None) -> None:
        self.sent = 0  # records handed to the producer
        self.bytes = 0
        self.acked = 0
        self.failed = 0  # records of batches that failed
        self.failed_entries: list[Any] = []
        self.first_error: BaseException | None = None
        self.on_failed = on_failed
        self.lock = threading.Lock()
        self.start = time.monotonic()
        # entries of the batches acknowledged since the current input chunk was read, while
        # a chunk whose records are not handed over in input order is being sent (see
        # LineProducer.unsent); None otherwise
        self.recent_acked: list[list[Any]] | None = None

    def on_batch(self, batch: ProducerBatch, base_offset: int, error: BaseException | None,
                 ) -> None:
        with self.lock:
            if error is None:
                self.acked += batch.record_count
                if self.recent_acked is not None:
                    self.recent_acked.append(batch.entries)
            else:
                self.failed += batch.record_count
                self.failed_entries.extend(batch.entries)
                if self.first_error is None:
                    self.first_error = error
        if error is not None and self.on_failed is not None:
            self.on_failed([entry_bytes(e) for e in batch.entries], error)

    @property
    def handed_and_done(self) -> int:
        """Records the producer acknowledged or failed (after abort(): all it was given)."""
        with self.lock:
            return self.acked + self.failed


def call_finishing(finishing: Callable[[], None] | None) -> bool:
    """Call `finishing()` (the caller's signal handler stops raising KeyboardInterrupt
    there), whatever KeyboardInterrupt comes before it takes effect; True if one came."""
    came = False
    while finishing is not None:
        try:
            finishing()
            break
        except KeyboardInterrupt:
            came = True
    return came


@dataclass
class RunOutcome:
    """How LineProducer.run ended: Ctrl-C, or the first error that stopped it."""

    interrupted: bool = False
    error: BaseException | None = None


class LineProducer:
    """Hands records, chunk by chunk, to `producer` for `topic` (every record to
    `partition` when given; split into key SEP value with a key_separator; the same
    headers on every record). With keep_failed the raw records of failed batches are kept
    (`failed_records()`); `on_failed` is told of each failed batch as it fails. With
    null_empty an empty value (and key) is sent as null, with null_marker a value (and
    key) equal to it is."""

    def __init__(self, producer: Producer, topic: str, *, partition: int | None = None,
                 key_separator: bytes | None = None,
                 headers: list[tuple[str, bytes | None]] | None = None,
                 keep_failed: bool = False, on_failed: FailedRecordsCallback | None = None,
                 null_empty: bool = False, null_marker: bytes | None = None) -> None:
        self.producer = producer
        self.stats = DeliveryStats(on_failed)
        producer.add_batch_callback(self.stats.on_batch)
        self.topic = topic
        self.partition = partition
        self.ksep = key_separator
        self.headers = headers or []
        self.keep = keep_failed or on_failed is not None
        # the keys and values sent as null (-Z: b""; --null-marker: the marker); none: empty
        self.nulls = null_fields(null_empty, null_marker)
        sync = producer.sync
        self.simple = key_separator is None and not self.headers and not sync
        self.keyed = key_separator is not None and not self.headers and not sync
        # Blocks are encoded from their buffer (the compiled encoder; headers, the same on
        # every record, too): not when the raw records are kept, which need an object each
        # anyway, nor with --sync (a record at a time)
        self.takes_blocks = (not sync and not self.keep and kernels is not None
                             and not self.nulls)
        # the chunk being handed over; [] between chunks
        self.chunk: list[bytes] | Block | LongRecord = []
        self.chunk_base = 0  # stats.sent when it was read
        self.tagged: list[tuple[int, bytes]] | None = None
        self.input_done = False

    def limit(self, spill: IO[bytes] | None = None) -> Limit:
        """The reader's Limit for this producer: a record longer than `longest` is refused
        whatever its key and value (not held whole: its bytes go to `spill`)."""
        producer = self.producer
        most = min(producer.max_request_size, producer.buffer_memory) - RECORD_OVERHEAD
        ends = max(map(len, self.nulls), default=0)
        if self.ksep is None:  # (a value equal to a null spelling is null: size 0)
            longest = max(most, ends)
        else:  # key SEP value: SEP is not counted, nor one of them when null
            longest = max(most + len(self.ksep) + ends, len(self.ksep) + 2 * ends)
        return Limit(longest, spill, self.ksep, ends)

    def long_size(self, record: LongRecord) -> int:
        """The size send() counts for a LongRecord's key and value."""
        ksep, nulls = self.ksep, self.nulls
        at = record.separator_at
        if ksep is None or at < 0:
            return record.length  # (no null: longer than any null spelling)
        vlen = record.length - at - len(ksep)
        key_null = at <= len(record.head) and record.head[:at] in nulls
        tail = record.tail
        value_null = vlen <= len(tail) and tail[len(tail) - vlen:] in nulls
        return (0 if key_null else at) + (0 if value_null else vlen)

    def run(self, chunks: Iterable[list[bytes] | LongRecord]
            | Iterable[Block | LongRecord],
            finishing: Callable[[], None] | None = None) -> RunOutcome:
        """Send every chunk, then flush and abort the producer: afterwards every record read
        was acknowledged, failed or is unsent. Ctrl-C and errors (of the input too) end the
        run and are returned, not raised. After an error the flush waits ERROR_FLUSH s at
        most; after Ctrl-C (a KeyboardInterrupt: SIGTERM too, in `kafkactl produce`)
        STOP_FLUSH s, and a second one ends the wait; the producer then stops at once
        (STOP_ABORT s for its sender), failing what a broker did not answer for.
        `finishing()` is called before the producer is stopped, KeyboardInterrupt or not:
        the caller's signal handler stops raising it there (the rest must not be cut
        short)."""
        outcome = RunOutcome()
        try:
            self.send_all(chunks)
        except KeyboardInterrupt:
            outcome.interrupted = True
        except Exception as e:  # noqa: BLE001 - whatever stops the run, report every record
            outcome.error = e
        # What the producer was given is flushed whatever stopped the run: acknowledged
        # records stay acknowledged; the rest are counted (and kept with keep_failed).
        while True:
            try:
                self.producer.flush(STOP_FLUSH if outcome.interrupted
                                    else ERROR_FLUSH if outcome.error else None)
                break
            except KeyboardInterrupt:
                if outcome.interrupted:  # a second stop: no more waiting
                    break
                outcome.interrupted = True
            except Exception as e:  # noqa: BLE001
                outcome.error = outcome.error or e
                break
        if call_finishing(finishing):
            outcome.interrupted = True
        self.producer.abort(STOP_ABORT if outcome.interrupted else 10.0)
        return outcome

    def send_all(self, chunks: Iterable[list[bytes] | LongRecord]
                 | Iterable[Block | LongRecord]) -> None:
        """Hand every chunk to the producer (without waiting for acknowledgements)."""
        stats = self.stats
        for records in chunks:
            self.chunk = records
            self.chunk_base = stats.sent
            self.tagged = None
            if isinstance(records, Block):
                stats.sent = self.chunk_base + self._send_block(records)
            elif isinstance(records, LongRecord):
                self._refuse_long(records)
                stats.sent = self.chunk_base + 1
            else:
                self._send(records)
                stats.sent = self.chunk_base + len(records)
            self.chunk = []
        self.input_done = True

    def _refuse_long(self, record: LongRecord) -> None:
        """A record too long to send, as send() and the bulk paths refuse one too large:
        counted failed (kept with keep_failed), or with --sync the run's error."""
        producer = self.producer
        error = producer.record_too_large(self.long_size(record))
        if error is None:  # (never: longer than limit() allows whatever its key)
            raise AssertionError(f"{record!r} is not too large to send")
        if producer.sync:
            raise error
        self.stats.bytes += record.length
        producer.accumulator.refuse(self.topic, -1 if self.partition is None
                                    else self.partition, error, [record] if self.keep else ())

    def _send_block(self, block: Block) -> int:
        if not self.takes_blocks:
            records = block.records()
            self.chunk = records
            self._send(records)
            return len(records)
        n = self.producer.send_lines(self.topic, block.data, block.start, block.end,
                                     block.delimiter, self.ksep, partition=self.partition,
                                     headers=self.headers)
        block._count = n
        self.stats.bytes += block.end - block.start - n * len(block.delimiter)
        return n

    def _send(self, records: list[bytes]) -> None:
        if not (self.simple or self.keyed):
            self._send_each(records)
            return
        nulls = self.nulls
        keys: list[bytes | None] | None = None
        values: list[bytes] | list[bytes | None] = records
        if self.keyed:
            keys, values = split_keys(records, self.ksep, nulls or None)  # type: ignore[arg-type]
        elif nulls:
            values = null_values(records, nulls)
            if values is not records and self.keep:
                # the raw records are the entries: send_values would keep the values
                keys = [None] * len(records)
        self._send_bulk(records, keys, values)

    def _send_bulk(self, records: list[bytes], keys: list[bytes | None] | None,
                   values: list[bytes] | list[bytes | None]) -> None:
        """Records without headers over the batch fast paths, in input order (None: a null
        value or key): send_values (null keys: keys is None), send_key_values."""
        producer, stats, topic, partition = self.producer, self.stats, self.topic, self.partition
        if keys is None:
            producer.send_values(topic, values, partition=partition, keep_entries=self.keep)
            stats.bytes += sum(map(len, records))
            return
        entries: list[Any] | None = None
        if self.keep and partition is None:
            # records are handed over grouped by partition, not in input order: tag
            # each with its sequence number to tell later which ones were handed over
            entries = self.tagged = list(enumerate(records, self.chunk_base))
            with stats.lock:
                stats.recent_acked = []
        elif self.keep:
            entries = records
        producer.send_key_values(topic, keys, values, partition=partition, entries=entries)
        stats.bytes += sum(map(len, records))

    def _send_each(self, records: list[bytes]) -> None:
        """The general path: record by record, in input order (with --sync or headers)."""
        producer, stats, topic, partition = self.producer, self.stats, self.topic, self.partition
        ksep, headers, keep, nulls = self.ksep, self.headers, self.keep, self.nulls
        if stats.recent_acked is not None:  # (a keyed chunk before this one tagged its own)
            with stats.lock:
                stats.recent_acked = None
        for raw in records:
            key: bytes | None = None
            value: bytes | None = raw
            if ksep is not None:
                k, sep, v = raw.partition(ksep)
                if sep:
                    key, value = k, v
            if nulls:
                if value in nulls:
                    value = None
                if key in nulls:
                    key = None
            try:
                producer.send(topic, value, key, partition=partition, headers=headers,
                              entry=raw if keep else None)
            except RecordTooLargeError as e:
                if producer.sync:  # --sync stops at the first refusal (Java's --sync)
                    raise
                # as the bulk paths: counted failed (and in --failed-file), then go on
                producer.accumulator.refuse(topic, -1 if partition is None else partition,
                                            e, [raw] if keep else ())
            stats.sent += 1
            stats.bytes += len(raw)

    def unsent(self) -> list[bytes] | list[LongRecord]:
        """Records of the interrupted chunk the producer never got; call after abort(),
        when every record it got was acknowledged or failed."""
        if not self.chunk:
            return []
        stats = self.stats
        chunk = (self.chunk.records() if isinstance(self.chunk, Block | LongRecord)
                 else self.chunk)
        if self.tagged is not None:
            with stats.lock:
                got = {e[0] for batch in stats.recent_acked or () for e in batch
                       if isinstance(e, tuple)}
                got.update(e[0] for e in stats.failed_entries if isinstance(e, tuple))
            return [raw for n, raw in self.tagged if n not in got]
        # every other path hands records over in input order: the first `handed` went
        handed = min(max(stats.handed_and_done - self.chunk_base, 0), len(chunk))
        return chunk[handed:]

    def failed_records(self) -> Iterator[bytes | LongRecord]:
        """Every record read and not acknowledged, after run(): those of failed batches
        (kept with keep_failed), then the unsent ones (a LongRecord for each one too long
        to hold: its bytes are in the spill of the reader's Limit)."""
        for entry in self.stats.failed_entries:
            yield entry_bytes(entry)
        yield from self.unsent()

    @property
    def read(self) -> int:
        """Records read from the input so far."""
        return self.chunk_base + len(self.chunk) if self.chunk else self.stats.sent
