"""RecordAccumulator: per-partition queues of ProducerBatches (the seed's batch.size /
queue.time), bounded by buffer.memory with backpressure on the appending thread."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from kafkactl.client.errors import KafkaTimeoutError
from kafkactl.client.producer_batch import ProducerBatch, klen_of
from kafkactl.record.batch import RECORD_BATCH_OVERHEAD
from kafkactl.record.columns import NO_HEADERS, encode_lines_into

TopicPartition = tuple[str, int]
# The producer's check of a record whose key and value take that many bytes: the error
# refusing it (too large to send), or None (Producer.record_too_large)
SizeCheck = Callable[[int], BaseException | None]
SPARE_BUFFERS = 4  # buffers of batches of lines done, kept for the next ones


class RecordAccumulator:
    def __init__(self, *, batch_size: int = 16384, linger_ms: float = 5.0,
                 buffer_memory: int = 32 * 1024 * 1024, max_block_ms: int = 60000,
                 on_full_batch: Callable[[], None] | None = None) -> None:
        self.batch_size = batch_size
        self.linger = linger_ms / 1000.0
        self.buffer_memory = buffer_memory
        self.max_block = max_block_ms / 1000.0
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.lock = threading.Condition()
        # held by append_lines while it encodes into the open batch's buffer (not under
        # `lock`): two threads sending lines never write into the same buffer at once
        self.lines_lock = threading.Lock()
        # batch.size buffers of batches of lines that are done: the next ones are encoded
        # into them (no zeroed megabyte and fresh pages per batch)
        self.spare_buffers: list[bytearray] = []
        self.used_memory = 0
        self.incomplete: set[ProducerBatch] = set()
        self.flushes_in_progress = 0
        self.closed = False
        self._on_full_batch = on_full_batch or (lambda: None)
        self.on_new_batch: Callable[[str, int], None] | None = None
        self.batch_callbacks: list[Callable[[ProducerBatch, int, BaseException | None], None]] = []
        self._next_order = 0  # batches are sent, and re-sent, in this order per partition
        # the earliest creation time (time.monotonic() s, as created_ms / 1000) of a batch
        # put back in a queue (reenqueue) since the sender last looked for expired
        # batches: the sender's hint of the earliest expiry is no later than it
        self.requeued_created = float("inf")

    # -- appending (caller's thread) ---------------------------------------------------------

    def _reserve(self, nbytes: int) -> None:
        """Block while the buffer is full (backpressure); caller holds the lock."""
        if self.used_memory + nbytes <= self.buffer_memory or not self.incomplete:
            self.used_memory += nbytes
            return
        deadline = time.monotonic() + self.max_block
        self._on_full_batch()
        while self.used_memory + nbytes > self.buffer_memory and self.incomplete:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"buffer.memory ({self.buffer_memory} bytes) stayed full for "
                    f"{self.max_block:g} s: the broker is not taking records fast enough")
            self.lock.wait(min(remaining, 0.5))
        self.used_memory += nbytes

    def _charge(self, batch: ProducerBatch) -> None:
        """Charge buffer.memory with what `batch` takes beyond what it was charged so far
        (with the lock): batch.size, or the bytes of its records and header when more (a
        record larger than batch.size, alone in its batch; a tiny batch.size), or of its
        lines buffer, as Kafka's BufferPool allocates max(batch.size, the record's size).
        Its records are in already, so this never blocks: the next batch waits (_reserve)."""
        buf = batch.buf
        real = max(self.batch_size, batch.size, 0 if buf is None else len(buf))
        if real > batch.reserved:
            self.used_memory += real - batch.reserved
            batch.reserved = real

    def _new_batch(self, tp: TopicPartition, dq: deque[ProducerBatch],
                   timestamp: int | None) -> ProducerBatch:
        # (a batch takes its header at least, whatever batch.size: a tiny batch.size does
        # not let the queue outgrow buffer.memory)
        reserved = max(self.batch_size, RECORD_BATCH_OVERHEAD)
        self._reserve(reserved)
        batch = ProducerBatch(tp[0], tp[1], self.batch_size, timestamp)
        batch.reserved = reserved
        batch.order = (self._next_order,)
        self._next_order += 1
        if self.batch_callbacks:
            batch.callbacks.extend(self.batch_callbacks)
        if dq and not dq[-1].record_count:
            # an empty batch (its lines were being encoded when records of another path
            # came) gives way: behind the new one the sender would wait for it forever
            self._drop_empty(dq)
        if dq:
            dq[-1].closed = True
            self._on_full_batch()
            if self.on_new_batch is not None:
                self.on_new_batch(tp[0], tp[1])
        elif not self.closed:
            # A partition that had nothing queued: the sender may be asleep on its idle
            # poll, so wake it to start this batch's linger clock (kafka-python does the
            # same). The caller still holds the lock, so the sender sees the first record.
            self._on_full_batch()
        dq.append(batch)
        self.incomplete.add(batch)
        return batch

    def _drop_empty(self, dq: deque[ProducerBatch]) -> None:
        """Take the partition's last batch, an empty one, out of the queue (with the
        lock): never sent, its memory and buffer back."""
        empty = dq.pop()
        empty.closed = True
        self.incomplete.discard(empty)
        self.used_memory -= empty.reserved
        self._keep_buffer(empty)

    def refuse(self, topic: str, partition: int, error: BaseException,
               entries: Sequence[Any] = ()) -> None:
        """A record refused before it was appended (too large to send): a failed batch of
        its own for the batch callbacks (`entries`: its entry, if kept), never queued. Not
        with the lock held (the callbacks run here)."""
        batch = ProducerBatch(topic, partition, self.batch_size)
        batch.record_count = 1
        batch.closed = True
        batch.entries = list(entries)
        batch.callbacks = list(self.batch_callbacks)
        batch.complete(-1, error)

    def _open_deque(self, tp: TopicPartition) -> deque[ProducerBatch]:
        """The partition's batch queue (made when absent); called with the lock held.
        RuntimeError once the producer is closed."""
        if self.closed:
            raise RuntimeError("the producer is closed")
        dq = self.batches.get(tp)
        if dq is None:
            dq = self.batches[tp] = deque()
        return dq

    def append(self, topic: str, partition: int, timestamp: int | None, key: bytes | None,
               value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = (),
               entry: Any = None, future: Any = None) -> ProducerBatch:
        tp = (topic, partition)
        with self.lock:
            dq = self._open_deque(tp)
            batch = dq[-1] if dq else None
            delta = None if batch is None else batch.append(timestamp, key, value, headers)
            if delta is None:
                batch = self._new_batch(tp, dq, timestamp)
                delta = batch.append(timestamp, key, value, headers)
                assert delta is not None
            assert batch is not None
            self._charge(batch)
            if entry is not None:
                batch.entries.append(entry)
            if future is not None:
                batch.futures.append((delta, future))
            return batch

    def append_values(self, topic: str, partition: int, values: Sequence[bytes],
                      entries: bool = False, too_large: SizeCheck | None = None) -> None:
        """Append null-key, header-less values (the CLI fast path). With `too_large`, a
        value it refuses is not appended but failed (`refuse`)."""
        self._fill((topic, partition), len(values),
                   lambda batch, i: batch.append_values(values, i),
                   values if entries else None,
                   None if too_large is None else lambda i: too_large(klen_of(values[i])))

    def append_key_values(self, topic: str, partition: int, keys: Sequence[bytes | None],
                          values: Sequence[bytes], entries: Sequence[Any] | None = None,
                          too_large: SizeCheck | None = None) -> None:
        """Append keyed, header-less records (the CLI's `--key-separator` fast path);
        `entries[i]` is kept with record i for failure reports when given. With
        `too_large`, a record it refuses is not appended but failed (`refuse`)."""
        self._fill((topic, partition), len(values),
                   lambda batch, i: batch.append_key_values(keys, values, i), entries,
                   None if too_large is None
                   else lambda i: too_large(klen_of(keys[i]) + klen_of(values[i])))

    def append_lines(self, topic: str, partition: int, data: bytes, start: int, end: int,
                     delimiter: bytes, key_separator: bytes | None,
                     headers: bytes = NO_HEADERS, too_large: SizeCheck | None = None
                     ) -> int:
        """Append the delimited lines of data[start:end] (record.columns.encode_lines_into:
        null keys, or `key SEP value`, every record with the header section `headers`
        (builder.encode_headers), stamped with a reading of the clock per batch they go
        into: ProducerBatch.lines_stamp); returns how many there were. The
        lines are encoded straight into the open batch's buffer, by one caller at a time
        (`lines_lock`) but without `lock` (and without the GIL: the compiled encoder), so
        the sender builds and sends
        the batches before meanwhile; they count when the batch they were encoded for is
        still the partition's open one, with as many records as then (else they are
        encoded again for the one that is). With `too_large`, a line it refuses (its key
        and value) is counted but not appended: failed (`refuse`)."""
        tp = (topic, partition)
        refused: list[BaseException] = []
        try:
            with self.lines_lock:
                return self._append_lines(tp, data, start, end, delimiter, key_separator,
                                          headers, too_large, refused)
        finally:
            for error in refused:
                self.refuse(topic, partition, error)

    def _append_lines(self, tp: TopicPartition, data: bytes, pos: int, end: int,
                      delimiter: bytes, key_separator: bytes | None, headers: bytes,
                      too_large: SizeCheck | None, refused: list[BaseException]) -> int:
        count = 0
        need = 0  # bytes the next line needs, when it did not fit an empty batch's buffer
        batch = None
        while pos < end:
            with self.lock:
                dq = self._open_deque(tp)
                batch = dq[-1] if dq else None
                now = None if batch is None or batch.closed else batch.lines_stamp()
                if batch is None or now is None:
                    batch = self._new_batch(tp, dq, None)
                    now = batch.lines_stamp()  # (an empty batch: its timestamp)
                    assert now is not None
                buf = batch.lines_buffer(need, self.spare_buffers)
                self._charge(batch)
                first, size = batch.record_count, batch.size
                ts_delta = now - batch.base_timestamp
            after, took, used = encode_lines_into(data, pos, end, delimiter, key_separator,
                                                  first, buf, size, headers, ts_delta)
            with self.lock:
                if self.closed:
                    raise RuntimeError("the producer is closed")
                if (not dq or dq[-1] is not batch or batch.closed or batch.buf is not buf
                        or batch.record_count != first):
                    continue  # sent or appended to meanwhile: encode for the open one
                if took:
                    batch.took_lines(took, used, now)
                    self._charge(batch)
                    count += took
                    pos = after
                    need = 0
                elif first:  # full
                    self._new_batch(tp, dq, None)
                else:  # a line longer than a batch: a buffer of its size, unless refused
                    # (a line too large to send never fits a batch: it is checked here)
                    error = None
                    if too_large is not None:
                        size, after = _line_size(data, pos, end, delimiter, key_separator)
                        error = too_large(size)
                    if error is None:
                        need = used
                        continue
                    refused.append(error)
                    count += 1
                    pos = after
        if refused and batch is not None:
            with self.lock:  # the batch made for a refused last line stays empty
                queue = self.batches.get(tp)
                if queue and queue[-1] is batch and not batch.record_count:
                    self._drop_empty(queue)
        return count

    def append_records_section(self, topic: str, partition: int, section: bytes,
                               record_count: int, base_timestamp: int, max_timestamp: int,
                               entries: Sequence[Any] | None = None) -> None:
        """A v2 records section encoded elsewhere (offset deltas 0..record_count-1, timestamp
        deltas from `base_timestamp`) as a batch of its own, byte for byte."""
        tp = (topic, partition)
        with self.lock:
            dq = self._open_deque(tp)
            batch = self._new_batch(tp, dq, base_timestamp)
            batch.parts.append(section)
            batch.size += len(section)
            batch.record_count = record_count
            batch.max_timestamp = max(max_timestamp, base_timestamp)
            batch.closed = True
            self._charge(batch)
            if entries is not None:
                batch.entries.extend(entries)

    def _fill(self, tp: TopicPartition, n: int,
              append: Callable[[ProducerBatch, int], int],
              entries: Sequence[Any] | None,
              too_large: Callable[[int], BaseException | None] | None = None) -> None:
        """Records 0..n-1 into tp's batches: `append(batch, i)` takes records from i until
        the batch is full and returns the next index; a full batch gets a successor.
        `too_large(i)`: the error refusing record i, which is then failed (`refuse`), not
        appended; asked only of a record that would begin a batch (one too large to send
        never fits a batch with records: Producer sizes the batches so), so once a batch
        and not once a record."""
        i = 0
        checked = -1
        refused: list[tuple[int, BaseException]] = []
        try:
            with self.lock:
                dq = self.batches.get(tp)
                if dq is None:
                    dq = self.batches[tp] = deque()
                while i < n:
                    if self.closed:
                        raise RuntimeError("the producer is closed")
                    batch = dq[-1] if dq else None
                    if (too_large is not None and i != checked
                            and (batch is None or not batch.record_count)):
                        checked = i
                        error = too_large(i)
                        if error is not None:
                            refused.append((i, error))
                            i += 1
                            continue
                    j = i if batch is None else append(batch, i)
                    if batch is not None and j != i:
                        self._charge(batch)
                        if entries is not None:
                            batch.entries.extend(entries[i:j])
                    if j == i:
                        if too_large is not None and i != checked:
                            checked = i
                            error = too_large(i)
                            if error is not None:  # (in no batch: none is made for it)
                                refused.append((i, error))
                                i += 1
                                continue
                        self._new_batch(tp, dq, None)
                    i = j
        finally:
            for k, error in refused:
                self.refuse(tp[0], tp[1], error, () if entries is None else (entries[k],))

    # -- sender side -------------------------------------------------------------------------

    def ready(self, now: float, sendable: Callable[[TopicPartition], bool]
              ) -> tuple[list[TopicPartition], float]:
        """Partitions whose head batch should be sent now, and the seconds until the next
        linger expiry (or a long wait when nothing is pending)."""
        out: list[TopicPartition] = []
        wait = 1.0
        now_ms = now * 1000.0
        with self.lock:
            flushing = self.flushes_in_progress > 0 or self.closed
            for tp, dq in self.batches.items():
                if not dq:
                    continue
                head = dq[0]
                if head.record_count == 0:
                    # Being filled right now: look again within one linger.
                    wait = min(wait, max(self.linger, 0.001))
                    continue
                if not sendable(tp):
                    continue
                if head.retry_at > now:
                    wait = min(wait, head.retry_at - now)
                    continue
                if head.closed or len(dq) > 1 or flushing:
                    out.append(tp)
                    continue
                due = head.created_ms + self.linger * 1000.0 - now_ms
                if due <= 0:
                    out.append(tp)
                else:
                    wait = min(wait, due / 1000.0)
        return out, wait

    def pop_head(self, tp: TopicPartition) -> ProducerBatch | None:
        with self.lock:
            dq = self.batches.get(tp)
            if not dq:
                return None
            batch = dq.popleft()
            batch.closed = True
            if self.on_new_batch is not None and not dq:
                self.on_new_batch(tp[0], tp[1])
            return batch

    def reenqueue(self, batch: ProducerBatch) -> None:
        """Put a batch back for retry, in front of every batch that came after it (and so
        behind every batch made before it: a queue stays in creation order)."""
        tp = (batch.topic, batch.partition)
        with self.lock:
            self.requeued_created = min(self.requeued_created, batch.created_ms / 1000.0)
            dq = self.batches.setdefault(tp, deque())
            pos = 0
            while pos < len(dq) and dq[pos].order < batch.order:
                pos += 1
            dq.insert(pos, batch)

    def split_and_reenqueue(self, batch: ProducerBatch) -> None:
        """Replace a batch the broker refused as too large by its two halves, in its place
        (their records, futures and entries move with them)."""
        halves = batch.split()
        with self.lock:
            for half in halves:
                self._charge(half)
                self.incomplete.add(half)
        for half in halves:
            self.reenqueue(half)
        self.done(batch)

    def done(self, batch: ProducerBatch) -> None:
        with self.lock:
            self._keep_buffer(batch)
            if batch in self.incomplete:
                self.incomplete.discard(batch)
                self.used_memory -= batch.reserved
                self.lock.notify_all()

    def _keep_buffer(self, batch: ProducerBatch) -> None:
        """Keep the buffer of a batch of lines that is done for the next (with the lock;
        it is reused only by append_lines, one thread at a time, so not while an encoder
        that still writes into it for this batch runs)."""
        buf = batch.release_buffer()
        if (buf is not None and len(buf) == self.batch_size
                and len(self.spare_buffers) < SPARE_BUFFERS):
            self.spare_buffers.append(buf)

    def has_pending(self) -> bool:
        with self.lock:
            return bool(self.incomplete)

    def all_batches(self) -> list[ProducerBatch]:
        with self.lock:
            return [b for dq in self.batches.values() for b in dq]

    # -- flush -------------------------------------------------------------------------------

    def flush(self, timeout: float | None, wake: Callable[[], None]) -> bool:
        with self.lock:
            self.flushes_in_progress += 1
            # Every batch appended so far, and the halves a split makes of them later
            # (they inherit their batch's order as a prefix).
            limit = self._next_order
        wake()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            with self.lock:
                while any(b.order[0] < limit for b in self.incomplete):
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self.lock.wait(0.5 if remaining is None else min(remaining, 0.5))
            return True
        finally:
            with self.lock:
                self.flushes_in_progress -= 1


def _line_size(data: bytes, pos: int, end: int, delimiter: bytes,
               key_separator: bytes | None) -> tuple[int, int]:
    """The bytes of the key and value of the line at data[pos:] (ended by `delimiter` or
    `end`; `key SEP value` with a key_separator, as encode_lines_into splits it), and the
    position after it."""
    stop = data.find(delimiter, pos, end)
    stop, after = (end, end) if stop < 0 else (stop, stop + len(delimiter))
    size = stop - pos
    if key_separator is not None and data.find(key_separator, pos, stop) >= 0:
        size -= len(key_separator)
    return size, after
