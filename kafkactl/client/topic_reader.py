"""TopicReader: the records of a Consumer's partitions, from start offsets to an end condition.

The read loop of `kafkactl consume`, for anything built on client/ (mirror, spark):

    reader = TopicReader(consumer, max_records=1000, until_end=True)
    reader.seek(StartOffset("relative", -1000))   # static assignments; groups use commits
    for record in reader.records(): ...           # ConsumerRecord objects, or
    for pieces in reader.lines(): ...             # a poll's records as ready-made lines

It ends when `max_records` records were read, when every partition is read to its end
(`until_end`: the end offsets at the start, or a higher high watermark seen since), when
`stop_when_idle()` says so after a poll that brought nothing, or never (follow). `lines()`
keeps the fast path of value-per-line output: a header-less magic-2 batch becomes its lines
in C (record.value_scan), with no Python object per record; with the compiled kernels any
batch becomes its output in one call (client.record_format.KernelFormat), plain, -f or -J.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from kafkactl.client.consumer import Consumer
from kafkactl.client.fetcher import (
    EARLIEST,
    LATEST,
    NO_END,
    ConsumerRecord,
    CorruptFetchError,
    PartitionFetch,
    TopicPartition,
    UnframableFetchError,
)
from kafkactl.client.record_format import BatchFormat, KernelFormat
from kafkactl.protocol.errors import OffsetOutOfRangeError
from kafkactl.record.batch import RecordBatch
from kafkactl.record.errors import CorruptRecordError
from kafkactl.record.value_scan import fast_key_values, fast_values

RecordRenderer = Callable[[ConsumerRecord], bytes]
log = logging.getLogger(__name__)


class Piece(NamedTuple):
    """Rendered records of one partition: `data` holds `records` of them, each ending with a
    newline when there is more than one (a batch's lines); `next_offset` is the offset after
    the last of them, the partition's consumed offset once all of `data` is written. A piece
    of a whole batch keeps the `batch` and the offset it was rendered from (`start`), so
    that a write cut short can tell the offset after its first k records; a piece the
    kernel rendered also knows where each record ends in `data` (`ends`, ascending), and
    then its records need not end with a newline."""

    data: bytes
    records: int
    tp: TopicPartition
    next_offset: int
    batch: Any = None
    start: int = 0
    ends: Any = None

    @property
    def first_offset(self) -> int:
        """The offset the piece's records start at (or a gap before the first)."""
        return self.start if self.batch is not None else self.next_offset - 1

    def offset_after(self, k: int) -> int | None:
        """The offset after the first `k` records of the piece (None for k = 0: the piece
        moved nothing)."""
        if k <= 0:
            return None
        if k >= self.records or self.batch is None:
            return self.next_offset
        seen = 0
        for r in self.batch:
            if r.offset >= self.start:
                seen += 1
                if seen == k:
                    return int(r.offset) + 1
        return self.next_offset
START_KINDS = ("earliest", "latest", "absolute", "relative", "timestamp")


class StartOffset(NamedTuple):
    """Where reading starts in every partition: `earliest`, `latest`, `absolute` (offset
    `value`; one the partition does not have, before its log start or past its end, goes
    where the consumer's auto.offset.reset says, as in Kafka's consumer and kcat: the
    earliest or latest offset, or with none an OffsetOutOfRangeError), `relative` (`value`
    < 0 records before the end, clamped to the log start) or `timestamp` (the first offset
    at or after `value` ms; the end when no record is that new)."""

    kind: str
    value: int


def seek_to_start(consumer: Consumer, tps: list[TopicPartition], start: StartOffset) -> None:
    """Position every partition of `tps` at `start`: at once where it has a leader, at a
    later poll for a partition that has none yet (the others are read meanwhile)."""
    if start.kind not in START_KINDS:
        raise ValueError(f"start offset kind {start.kind!r}: use one of "
                         f"{', '.join(START_KINDS)}")
    consumer.seek_when_available(tps, functools.partial(start_offsets, consumer, start))


def start_offsets(consumer: Consumer, start: StartOffset, tps: list[TopicPartition]
                  ) -> dict[TopicPartition, int]:
    """The offset `start` means in each partition of `tps` that can be asked now (one
    with no leader, or whose leader cannot be reached, is left out)."""
    kind, value = start

    def offsets(at: int) -> dict[TopicPartition, int]:
        return {tp: v[0] for tp, v in consumer.available_offsets(
            dict.fromkeys(tps, at)).items()}

    if kind == "earliest":
        return offsets(EARLIEST)
    if kind == "latest":
        return offsets(LATEST)
    hi = offsets(LATEST)
    if kind == "timestamp":
        found = offsets(value)
        return {tp: hi[tp] if off < 0 else off for tp, off in found.items() if tp in hi}
    lo = offsets(EARLIEST)
    if kind == "absolute":
        return {tp: _absolute(consumer, tp, value, lo[tp], hi[tp]) for tp in lo if tp in hi}
    return {tp: max(lo[tp], hi[tp] + value) for tp in lo if tp in hi}  # relative


def _absolute(consumer: Consumer, tp: TopicPartition, offset: int, lo: int, hi: int) -> int:
    """An explicit offset of a partition whose log is [lo, hi]: itself when the partition
    has it (hi, the end, is where the next record goes), else where auto.offset.reset puts
    it, as Kafka's consumer does when its fetch at the offset is OFFSET_OUT_OF_RANGE (kcat
    the same): earliest (lo), latest (hi), or with none an OffsetOutOfRangeError (Java's
    OffsetOutOfRangeException)."""
    if lo <= offset <= hi:
        return offset
    reset = getattr(consumer, "auto_offset_reset", "latest")
    if reset == "none":
        raise OffsetOutOfRangeError(
            f"offset {offset} is out of range for {tp[0]}-{tp[1]} (its log is {lo}..{hi}) "
            "and auto.offset.reset=none")
    log.warning("offset %d is out of range for %s-%d (its log is %d..%d): starting at the "
                "%s offset (auto.offset.reset)", offset, tp[0], tp[1], lo, hi, reset)
    return lo if reset == "earliest" else hi


def plain_lines(batch: Any, fetch_offset: int, sep: bytes | None, limit: int | None
                ) -> tuple[bytes, int] | None:
    """`value\\n` (or `key SEP value\\n`) for every record of a header-less magic-2 batch
    from fetch_offset on (at most `limit`), joined in C; (lines, count), or None when the
    batch needs the per-record render. Null keys and values print as nothing."""
    if batch.magic != 2:
        return None
    keys: Any = None
    if sep is None:
        values: Any = fast_values(batch, fetch_offset)
        if values is None:
            return None
    else:
        found = fast_key_values(batch, fetch_offset)
        if found is None:
            return None
        keys, values = found
    if limit is not None and len(values) > limit:
        values = values[:limit]
        keys = keys[:limit] if keys is not None else None
    n = len(values)
    if n == 0:
        return b"", 0
    if None in values:
        values = [b"" if v is None else v for v in values]
    if keys is None:
        return b"\n".join([*values, b""]), n  # the empty last item: the last newline
    if None in keys:
        keys = [b"" if k is None else k for k in keys]
    parts: list[bytes | None] = [b"\n"] * (4 * n)
    parts[0::4] = keys
    parts[1::4] = [sep] * n
    parts[2::4] = values
    return b"".join(parts), n  # type: ignore[arg-type]  # no None is left


def plain_renderer(sep: bytes | None) -> RecordRenderer:
    """The per-record form of plain_lines: `value\\n` or `key SEP value\\n`, nulls empty."""
    def render(r: ConsumerRecord) -> bytes:
        value = b"" if r.value is None else bytes(r.value)
        if sep is None:
            return value + b"\n"
        return (b"" if r.key is None else bytes(r.key)) + sep + value + b"\n"

    return render


class TopicReader:
    """Reads the partitions assigned to `consumer` (sorted in `partitions`), from their
    positions on, until the end condition holds. The consumer stays the caller's to close."""

    def __init__(self, consumer: Consumer, *, max_records: int | None = None,
                 until_end: bool = False, stop_when_idle: Callable[[], bool] | None = None,
                 poll_timeout: float = 1.0) -> None:
        self.consumer = consumer
        self.partitions: list[TopicPartition] = sorted(consumer.assignment())
        self.remaining = max_records  # records still to read; None: no limit
        self.until_end = until_end
        self.stop_when_idle = stop_when_idle
        self.poll_timeout = poll_timeout

    def seek(self, start: StartOffset) -> None:
        """Position every partition at `start` (for static assignments: a group's members
        start from the committed offsets)."""
        seek_to_start(self.consumer, self.partitions, start)

    def polls(self) -> Iterator[list[PartitionFetch]]:
        """The fetched partition chunks, a poll at a time, until the end condition. Callers
        that read records from them take them off `remaining`."""
        consumer = self.consumer
        ends: dict[TopicPartition, int] = {}
        while self.remaining is None or self.remaining > 0:
            if self.until_end and self._at_end(ends):
                return
            chunks = consumer.poll_fetches(self.poll_timeout)
            if not chunks and self.stop_when_idle is not None and self.stop_when_idle():
                return
            yield chunks

    def _at_end(self, ends: dict[TopicPartition, int]) -> bool:
        """Every partition is read up to its end offset (asked once, when the partition
        first has a leader: a partition without one holds up only the end) or to a
        higher high watermark seen since."""
        consumer = self.consumer
        missing = [tp for tp in self.partitions if tp not in ends]
        if missing:
            ends.update((tp, v[0]) for tp, v in consumer.available_offsets(
                dict.fromkeys(missing, LATEST)).items())
        if len(ends) < len(self.partitions):
            return False
        if any(tp not in consumer.positions for tp in self.partitions):
            consumer.init_positions()
        for tp in self.partitions:
            pos = consumer.positions.get(tp)
            if pos is None or pos < max(ends[tp], consumer.high_watermarks.get(tp, ends[tp])):
                return False
        return True

    def _rewind(self, chunks: list[PartitionFetch], next_offsets: dict[TopicPartition, int]
                ) -> None:
        """Stopped inside a poll (max_records): put each fetched partition back at the
        first record not returned, so that a group commits only what was read."""
        for pf in chunks:
            tp = (pf.topic, pf.partition)
            self.consumer.seek(tp, next_offsets.get(tp, pf.fetch_offset))

    def give_back(self, pieces: list[Piece], unwritten: int) -> None:
        """The caller wrote only part of `pieces` (it marked what it wrote in the consumer's
        `consumed`): read the `unwritten` records again, from each partition's first record
        not written."""
        consumed = self.consumer.consumed
        first: dict[TopicPartition, int] = {}
        for piece in pieces:
            first.setdefault(piece.tp, piece.first_offset)
        for tp, off in first.items():
            self.consumer.seek(tp, max(consumed.get(tp, off), off))
        if self.remaining is not None:
            self.remaining += unwritten

    def records(self) -> Iterator[ConsumerRecord]:
        """Every record read, in fetch order (CRCs checked as the consumer's check_crcs).
        A record counts as consumed (what a group commits) once it is handed out."""
        check_crcs = self.consumer.check_crcs
        consumed = self.consumer.consumed
        for chunks in self.polls():
            returned: dict[TopicPartition, int] = {}
            for pf in chunks:
                tp = (pf.topic, pf.partition)
                for r in pf.records_iter(check_crcs):
                    if self.remaining is not None:
                        self.remaining -= 1
                    returned[tp] = consumed[tp] = r.offset + 1
                    yield r
                    if self.remaining is not None and self.remaining <= 0:
                        self._rewind(chunks, returned)
                        return
                # past what follows the last record (markers, an aborted transaction's
                # batches), as Kafka's consumer commits
                nxt = pf.next_offset()
                if nxt > returned.get(tp, pf.fetch_offset):
                    returned[tp] = consumed[tp] = nxt

    def lines(self, render: RecordRenderer | None = None, key_separator: bytes | None = None,
              batch_format: BatchFormat | None = None,
              kernel_format: KernelFormat | None = None) -> Iterator[list[Piece]]:
        """The records of each poll that brought any, rendered: by `render` one by one, or
        without it as `value\\n` (`key SEP value\\n` with a key_separator), where a
        header-less magic-2 batch is joined in C as a whole. A `batch_format` (the same
        format as `render`) renders such batches as a whole too, and a `kernel_format` (the
        same format again, compiled; made here for plain output) any batch it can.

        Nothing here marks records consumed: the caller does, for the pieces it has written
        (Piece.next_offset, Piece.offset_after). Damaged data ends the reading: with the
        consumer's check_crcs a batch whose CRC does not match, and always a record that
        does not decode or a batch header that cannot be framed (a hole in the log). The
        pieces before it are yielded, then CorruptFetchError names the partition and the
        first offset not printed."""
        plain = render is None
        if render is None:
            render = plain_renderer(key_separator)
            kernel_format = KernelFormat.plain(key_separator)
        check_crcs = self.consumer.check_crcs
        for chunks in self.polls():
            remaining = self.remaining
            buf: list[Piece] = []
            returned: dict[TopicPartition, int] = {}
            corrupt: CorruptRecordError | None = None
            for pf in chunks:
                try:
                    for b in pf.batches():
                        # (a batch an earlier poll handed out a part of: checked then)
                        if check_crcs and pf.carried(b) is None and not b.is_valid():
                            corrupt = _crc_error(pf, b)
                            break
                        try:
                            n = _render_batch(b, pf, buf, returned, remaining, render, plain,
                                              key_separator, batch_format, kernel_format)
                        except CorruptRecordError as e:  # its pieces so far are whole
                            corrupt = _record_error(pf, b, returned, e)
                            break
                        if remaining is not None:
                            remaining -= n
                            if remaining <= 0:
                                break
                except UnframableFetchError as e:
                    # every batch before it is rendered; what it ends with (markers) is
                    # passed too: the consumed offset is where the damage is
                    _skip_tail(pf, buf, returned, e.offset)
                    corrupt = _unframable_error(e)
                if corrupt is not None or (remaining is not None and remaining <= 0):
                    break
                _skip_tail(pf, buf, returned)
            self.remaining = remaining
            if corrupt is not None or (remaining is not None and remaining <= 0):
                self._rewind(chunks, returned)
            if buf:
                yield buf
            if corrupt is not None:
                raise corrupt


def _skip_tail(pf: PartitionFetch, buf: list[Piece], returned: dict[TopicPartition, int],
               nxt: int | None = None) -> None:
    """A fetch that ends in batches with nothing to print (transaction markers, an aborted
    transaction's batches under read_committed): an empty piece that moves the partition's
    consumed offset past them, to `nxt` (default: the fetch's next offset), once what comes
    before it is written (Kafka's consumer commits its position there; else a group's lag
    on a transactional topic never ends)."""
    tp = (pf.topic, pf.partition)
    if nxt is None:
        nxt = pf.next_offset()
    if nxt > returned.get(tp, pf.fetch_offset):
        buf.append(Piece(b"", 0, tp, nxt))
        returned[tp] = nxt


def _crc_error(pf: PartitionFetch, b: Any) -> CorruptFetchError:
    first = max(b.base_offset, pf.fetch_offset)
    return CorruptFetchError(
        pf.topic, pf.partition, first,
        f"{pf.topic}-{pf.partition}: the batch at offset {b.base_offset} fails its CRC check "
        f"(the data is damaged; nothing from offset {first} on is printed); "
        "-X check.crcs=false reads it unchecked")


def _record_error(pf: PartitionFetch, b: Any, returned: dict[TopicPartition, int],
                  error: CorruptRecordError) -> CorruptFetchError:
    """A record of batch `b` that does not decode (its CRC unchecked, or a producer that
    wrote it so): the records of `b` before it are rendered."""
    first = max(b.base_offset, pf.fetch_offset, returned.get((pf.topic, pf.partition), 0))
    return CorruptFetchError(
        pf.topic, pf.partition, first,
        f"{pf.topic}-{pf.partition}: the record at offset {first} (in the batch at offset "
        f"{b.base_offset}) cannot be read: {error} (the data is damaged; nothing from "
        f"offset {first} on is printed)")


def _unframable_error(error: UnframableFetchError) -> CorruptFetchError:
    return CorruptFetchError(
        error.topic, error.partition, error.offset,
        f"{error} (the data is damaged; nothing from offset {error.offset} on is printed)")


class _Ends:
    """Where each record of a piece sliced out of a rendered batch ends in the piece's
    bytes: the batch's `ends[lo:hi]`, less `at` (where the piece starts), read lazily (a
    sequence for bisect)."""

    __slots__ = ("at", "ends", "lo", "n")

    def __init__(self, ends: Any, lo: int, hi: int, at: int) -> None:
        self.ends, self.lo, self.n, self.at = ends, lo, hi - lo, at

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(i)
        return int(self.ends[self.lo + i]) - self.at


def _render_part(b: Any, pf: PartitionFetch, start: int, stop: int,
                 kernel_format: KernelFormat | None) -> Piece | None:
    """Records [start, stop) of batch `b`, a part of it max.poll.records hands out, as one
    piece sliced out of the batch the kernel renders once for all the polls that hand out
    a part of it (it goes from chunk to chunk: Carry.rendered, (first offset, bytes,
    ends)). None (the per-record path, which goes on decoding where the part before
    stopped) without the kernel, or for a batch with offset gaps."""
    if (kernel_format is None or not isinstance(b, RecordBatch)
            or b.last_offset_delta != b.record_count - 1):
        return None
    carried = pf.carried(b)
    whole = None if carried is None else carried.rendered
    if whole is None or whole[0] > start:
        made = kernel_format.render(b, start, pf.topic, pf.partition)
        if made is None or made[1] != b.last_offset + 1 - start:
            return None
        whole = (start, made[0], made[2])
    carry = pf.carry(b)
    if carry is not None:
        carry.rendered = whole
    first, data, ends = whole  # (no gaps: the record at offset o ends at ends[o - first])
    lo, hi = start - first, stop - first
    at = int(ends[lo - 1]) if lo else 0
    return Piece(data[at:int(ends[hi - 1])], hi - lo, (pf.topic, pf.partition), stop, b,
                 start, _Ends(ends, lo, hi, at))


def _render_batch(b: Any, pf: PartitionFetch, buf: list[Piece],
                  returned: dict[TopicPartition, int], remaining: int | None,
                  render: RecordRenderer, plain: bool, key_separator: bytes | None,
                  batch_format: BatchFormat | None, kernel_format: KernelFormat | None
                  ) -> int:
    """Append batch `b`'s records from the fetch offset on (at most `remaining`, and
    before the end max.poll.records cut the chunk at) to `buf`, whole (one piece) when a
    fast path can and the limits do not cut it, or the part of it this poll hands out
    (`_render_part`), else one piece per record; note the offset after the last in
    `returned`. Returns how many."""
    tp = (pf.topic, pf.partition)
    start = max(b.base_offset, pf.fetch_offset)
    cut = pf.cuts(b)
    if cut or pf.carried(b) is not None:  # a batch handed out over several polls
        stop = pf.end_offset if cut else b.last_offset + 1
        assert stop is not None
        if remaining is None or remaining >= stop - start:
            piece = _render_part(b, pf, start, stop, kernel_format)
            if piece is not None:
                buf.append(piece)
                returned[tp] = stop
                return piece.records
    whole = (remaining is None or remaining > b.last_offset - start) and not cut
    fast = None
    if whole:
        fast = _whole_batch(b, pf, plain, key_separator, batch_format, kernel_format)
    if fast is not None:
        buf.append(Piece(fast[0], fast[1], tp, b.last_offset + 1, b, start,
                         fast[2] if len(fast) > 2 else None))
        returned[tp] = b.last_offset + 1
        return int(fast[1])
    n = 0
    stop = NO_END if pf.end_offset is None else pf.end_offset  # (max.poll.records)
    tstype = int(b.timestamp_type)
    for r in pf.batch_records(b):
        if r.offset < pf.fetch_offset:
            continue
        if (remaining is not None and n >= remaining) or r.offset >= stop:
            break
        buf.append(Piece(render(ConsumerRecord(pf.topic, pf.partition, r.offset, r.timestamp,
                                               tstype, r.key, r.value, r.headers)),
                         1, tp, r.offset + 1))
        returned[tp] = r.offset + 1
        n += 1
    return n


def _whole_batch(b: RecordBatch, pf: PartitionFetch, plain: bool, key_separator: bytes | None,
                 batch_format: BatchFormat | None, kernel_format: KernelFormat | None) -> Any:
    """A batch rendered as a whole (by the kernel, else as plain lines or `batch_format`), or
    None when it needs the record-by-record path. The kernel takes every batch the pure
    fast paths take (it declines only batches the record iterator refuses)."""
    if kernel_format is not None:
        return kernel_format.render(b, pf.fetch_offset, pf.topic, pf.partition)
    if plain:
        return plain_lines(b, pf.fetch_offset, key_separator, None)
    if batch_format is not None:
        return batch_format.render(b, pf.fetch_offset, pf.topic, pf.partition)
    return None
