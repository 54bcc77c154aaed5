"""Fetch and ListOffsets requests/responses, and lazy record decoding for consumers.

Records stay in the response buffer: keys, values and header values are memoryviews until
the caller asks for bytes. Control batches (transaction markers) are never handed out;
with isolation_level=1 (read_committed) the broker answers up to the last stable offset
with the aborted transactions of the range, and the batches of those are dropped too
(Kafka's Fetcher: a producer's batches from an aborted transaction's first offset up to
its ABORT marker).

Damaged data ends a partition's records where it is, as in Kafka's consumer: the batches
before it are handed out, then `CorruptFetchError` names the first offset not read. A
batch whose CRC does not match (unless check_crcs is off), a record that does not decode,
and a header that cannot be framed (a size below the minimum, an unknown magic: a
zero-filled hole in the log, say) are damage; a response that ends inside a batch is not
(the broker cuts a response at its size limit: the next fetch starts at that batch).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkactl.record.codecs import decompress
from kafkactl.record.errors import CorruptRecordError
from kafkactl.record.memory_records import RecordBatch, iter_batches
from kafkactl.record.uniform import uniform_values

TopicPartition = tuple[str, int]
EARLIEST = -2
LATEST = -1


class CorruptFetchError(CorruptRecordError):
    """Fetched data of `topic`-`partition` that cannot be read, raised after every record
    before it was handed out: `offset` is the first offset not handed out (the consumer
    stops there, as Kafka's does at a CorruptRecordException)."""

    def __init__(self, topic: str, partition: int, offset: int, message: str) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class UnframableFetchError(CorruptFetchError):
    """A batch header in a fetch response that cannot be framed (`detail` says why): the
    batches before it are complete, nothing after it can be found. `offset` is the one
    after the last complete batch (the fetch offset when there is none)."""

    def __init__(self, topic: str, partition: int, offset: int, detail: str) -> None:
        super().__init__(topic, partition, offset,
                         f"{topic}-{partition}: the data at offset {offset} cannot be read: "
                         f"{detail}")
        self.detail = detail


class ConsumerRecord:
    __slots__ = ("topic", "partition", "offset", "timestamp", "timestamp_type", "key",
                 "value", "headers")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int,
                 timestamp_type: int, key: memoryview | None, value: memoryview | None,
                 headers: list[tuple[str, memoryview | None]]) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.timestamp_type = timestamp_type
        self.key = key
        self.value = value
        self.headers = headers

    def __repr__(self) -> str:
        v = None if self.value is None else bytes(self.value[:40])
        return (f"ConsumerRecord({self.topic}-{self.partition}@{self.offset}, "
                f"key={None if self.key is None else bytes(self.key)!r}, value={v!r})")


@dataclass(slots=True)
class PartitionFetch:
    """One partition's part of a Fetch response."""

    topic: str
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview
    fetch_offset: int = 0
    # read_committed: (producer id, first offset) of each aborted transaction in the range
    aborted: list[tuple[int, int]] | None = None
    # a chunk cut after a consumer's max.poll.records-th record (split()): the offset after
    # that record, where its records end (the bytes end with the batch holding it); None:
    # the records are every complete batch's
    end_offset: int | None = None
    _next: int = -1  # next_offset(), once worked out
    # why the batch header after the last complete batch cannot be framed (next_offset())
    _damage: str | None = field(default=None, init=False, repr=False)
    # split() cut inside a batch: what reading the part before left for this chunk's first
    # batch, and where reading this chunk's part of its last batch leaves it (Carry)
    _carry_in: Carry | None = field(default=None, init=False, repr=False)
    _carry_out: Carry | None = field(default=None, init=False, repr=False)

    def batches(self) -> Iterator[Any]:
        """Complete batches (a truncated tail batch is dropped), control batches and, with
        the response's aborted transactions (read_committed), their batches skipped. A
        header that cannot be framed raises UnframableFetchError once the batches before
        it are yielded."""
        if self.aborted:
            yield from self._committed_batches()
            return
        for b in self._framed():
            if b.last_offset < self.fetch_offset:
                continue
            if isinstance(b, RecordBatch) and b.is_control:
                continue
            yield b

    def _committed_batches(self) -> Iterator[Any]:
        """Kafka's read_committed filter: an aborted transaction of producer P starting at
        offset F makes P's transactional batches from F on aborted, until P's ABORT
        marker (a control batch) ends it."""
        pending = sorted(self.aborted or (), key=lambda a: a[1])
        i = 0
        aborting: set[int] = set()
        for b in self._framed():
            if not isinstance(b, RecordBatch):
                if b.last_offset >= self.fetch_offset:
                    yield b
                continue
            while i < len(pending) and pending[i][1] <= b.last_offset:
                aborting.add(pending[i][0])
                i += 1
            if b.is_control:
                if b.producer_id in aborting and control_type(b) == ABORT_MARKER:
                    aborting.discard(b.producer_id)
                continue
            if b.is_transactional and b.producer_id in aborting:
                continue
            if b.last_offset >= self.fetch_offset:
                yield b

    def _framed(self) -> Iterator[Any]:
        """Every complete batch of the response; a header that cannot be framed raises
        UnframableFetchError after the batches before it, naming the offset it stands at."""
        try:
            yield from iter_batches(self.records)
        except CorruptRecordError as e:
            raise UnframableFetchError(self.topic, self.partition, self._scan(),
                                       str(e)) from None

    def _scan(self) -> int:
        """next_offset(), never raising (the damage, if any, noted in `_damage`)."""
        if self._next < 0:
            nxt = self.fetch_offset
            try:
                for b in iter_batches(self.records):
                    if b.last_offset + 1 > nxt:
                        nxt = b.last_offset + 1
            except CorruptRecordError as e:
                self._damage = str(e)
            self._next = nxt
        return self._next

    def next_offset(self) -> int:
        """The offset after the last complete batch (fetch_offset when there is none),
        control batches and aborted transactions' batches included: the consumer's next
        position, and what it may commit once the records before it are done with. A
        header that cannot be framed ends the batches counted (see `damage_offset`); when
        it leaves nothing to read (it stands at the fetch offset) this raises
        UnframableFetchError: there is no next position to go on from."""
        nxt = self._scan()
        if self._damage is not None and nxt == self.fetch_offset:
            raise UnframableFetchError(self.topic, self.partition, nxt, self._damage)
        return nxt

    @property
    def damaged(self) -> bool:
        """True when a batch header after the complete batches cannot be framed: reading
        the batches ends with UnframableFetchError at `damage_offset` (a response cut
        short inside a batch is not damage)."""
        return self.damage_offset is not None

    @property
    def damage_offset(self) -> int | None:
        """The offset a header that cannot be framed stands at (the one after the last
        complete batch, the fetch offset when there is none), None when there is none."""
        nxt = self._scan()
        return None if self._damage is None else nxt

    def records_iter(self, check_crcs: bool = True) -> Iterator[ConsumerRecord]:
        """The records from the fetch offset on; damaged data (a CRC mismatch when
        `check_crcs`, a record that does not decode, a header that cannot be framed)
        raises CorruptFetchError after the records before it."""
        t, p, start = self.topic, self.partition, self.fetch_offset
        stop = NO_END if self.end_offset is None else self.end_offset
        for b in self.batches():
            first = max(b.base_offset, start)
            if check_crcs and self.carried(b) is None and not b.is_valid():
                raise CorruptFetchError(
                    t, p, first, f"CRC mismatch in batch at offset {b.base_offset} of {t}-{p}")
            tstype = int(b.timestamp_type)
            try:
                for r in self.batch_records(b):
                    if r.offset >= start:
                        if r.offset >= stop:
                            return
                        first = r.offset + 1
                        yield ConsumerRecord(t, p, r.offset, r.timestamp, tstype, r.key,
                                             r.value, r.headers)
            except CorruptRecordError as e:
                raise CorruptFetchError(
                    t, p, first, f"{t}-{p}: the record at offset {first} (in the batch at "
                    f"offset {b.base_offset}) cannot be read: {e}") from None

    def carried(self, b: Any) -> Carry | None:
        """What reading the part of batch `b` before this chunk left (the chunk starts
        inside `b`, after a cut), if anything: the batch was decoded and its CRC checked
        then."""
        c = self._carry_in
        if (c is None or c.base_offset != b.base_offset or c.at != self.fetch_offset
                or (c.records is None and c.rendered is None)):
            return None
        return c

    def carry(self, b: Any) -> Carry | None:
        """Where reading this chunk's part of batch `b` leaves what the next part goes on
        from (the chunk ends inside `b`), else None."""
        c = self._carry_out
        return c if c is not None and c.base_offset == b.base_offset else None

    def batch_records(self, b: Any) -> Iterable[Any]:
        """Batch `b`'s records, for a caller that skips those before the fetch offset and
        from end_offset on. A batch max.poll.records hands out over many polls is decoded
        once: reading goes on from where reading the part before stopped (when it left its
        records: carried), and leaves them to the next part when the chunk ends inside
        `b`. The batch itself when no part of it is carried."""
        if self._carry_in is None and self._carry_out is None:
            return b
        return self._carried_records(b)

    def _carried_records(self, b: Any) -> Iterator[Any]:
        start = self.fetch_offset
        stop = NO_END if self.end_offset is None else self.end_offset
        c = self.carried(b)
        if c is not None and c.records is not None:
            (following, rest), c.records = c.records, None  # (once: an iterator)
            it: Iterator[Any] = itertools.chain((following,), rest)
        else:
            it = iter(b)
        for r in it:
            if r.offset < start:
                continue
            if r.offset >= stop:
                out = self.carry(b)
                if out is not None:
                    out.records = (r, it)
                return
            yield r

    def cuts(self, batch: Any) -> bool:
        """True when the chunk ends inside `batch` (split(): its records from end_offset on
        are the next poll's): the batch cannot be used whole."""
        return self.end_offset is not None and batch.last_offset >= self.end_offset

    def split(self, limit: int) -> tuple[PartitionFetch, PartitionFetch | None, int]:
        """A consumer's max.poll.records (Java's CompletedFetch.fetchRecords): (the chunk
        up to its `limit`-th record, the rest of it from the offset after that record or
        None when no record follows, how many records the first holds). Records are
        counted from the batch headers (a batch with compaction gaps, or of magic 0/1,
        record by record); control batches and aborted transactions' batches hold none.
        Damage ends the count: the chunk holds the records before it, and reading it
        raises there as it would uncut."""
        taken = 0
        last: tuple[Any, int] | None = None  # the batch of the last record taken, after it
        try:
            for b in self.batches():
                start = max(b.base_offset, self.fetch_offset)
                if last is not None and taken == limit:
                    n, _after, _more, damaged = _take(b, start, 1)
                    if n or damaged:  # the next poll's (damage: it raises there)
                        return (*self._cut(*last), taken)
                    continue
                n, after, more, damaged = _take(b, start, limit - taken)
                if n:
                    taken += n
                    last = (b, after)
                if more:
                    return (*self._cut(b, after), taken)
                if damaged:
                    break
        except CorruptRecordError:  # a header that cannot be framed: the chunk ends there
            pass
        return self, None, taken

    def _cut(self, b: Any, after: int) -> tuple[PartitionFetch, PartitionFetch]:
        """This chunk cut at offset `after`, inside or at the end of batch `b`: (its bytes
        up to the end of `b`, ending at `after`; the bytes from `b` on (or from the batch
        after it), starting at `after`). The rest of a read_committed chunk with aborted
        transactions keeps every batch: the filter needs the markers before the cut."""
        end = b.position + b.size
        head = PartitionFetch(self.topic, self.partition, self.error_code,
                              self.high_watermark, self.last_stable_offset,
                              self.log_start_offset, self.records[:end], self.fetch_offset,
                              self.aborted, after, after)
        inside = after <= b.last_offset  # (else the cut is at the end of `b`)
        tail = self.records if self.aborted else self.records[b.position if inside else end:]
        rest = PartitionFetch(self.topic, self.partition, self.error_code,
                              self.high_watermark, self.last_stable_offset,
                              self.log_start_offset, tail, after, self.aborted,
                              self.end_offset, self._next)
        rest._damage = self._damage
        head._carry_in = self._carry_in
        if inside:
            head._carry_out = rest._carry_in = Carry(b.base_offset, after)
        rest._carry_out = self._carry_out
        return head, rest


class Carry:
    """What reading the part of a batch one chunk holds leaves for the next chunk, which
    holds the batch's next part (split() cut inside it, at offset `at`): the batch's
    records decoded on from there (the first of them, and the iterator of the others), or
    the whole batch rendered (a reader's own: `rendered`). So a batch that max.poll.records
    hands out over many polls is decoded, and its CRC checked, once."""

    __slots__ = ("at", "base_offset", "records", "rendered")

    def __init__(self, base_offset: int, at: int) -> None:
        self.base_offset = base_offset
        self.at = at
        self.records: tuple[Any, Iterator[Any]] | None = None
        self.rendered: Any = None


NO_END = 1 << 63  # past any offset


def _take(b: Any, start: int, k: int) -> tuple[int, int, bool, bool]:
    """Of batch `b`'s records from offset `start` on: how many of them, up to `k`, the
    offset after the last of those (`start` for none), whether more records follow them,
    and whether a record that does not decode ends them. A magic-2 batch whose offset
    deltas leave no gap (last_offset_delta + 1 records) is counted from its header."""
    if isinstance(b, RecordBatch) and b.last_offset_delta == b.record_count - 1:
        total = max(0, b.last_offset - start + 1)
        n = min(total, k)
        return n, start + n, total > k, False
    offsets: list[int] = []
    damaged = False
    try:
        for r in b:
            if r.offset >= start:
                offsets.append(r.offset)
                if len(offsets) > k:
                    break
    except CorruptRecordError:
        damaged = True
    n = min(len(offsets), k)
    return n, offsets[n - 1] + 1 if n else start, len(offsets) > k, damaged


ABORT_MARKER = 0
COMMIT_MARKER = 1


def control_type(batch: Any) -> int | None:
    """The type of a control batch's record (0 ABORT, 1 COMMIT; the key is version int16,
    type int16), None when it has none that reads."""
    try:
        for r in batch:
            key = r.key
            if key is None or len(key) < 4:
                return None
            return int.from_bytes(bytes(key[2:4]), "big", signed=True)
    except Exception:  # noqa: BLE001 - a damaged marker is no marker
        return None
    return None


def uniform_columns(batch: Any, start: int) -> tuple[int, int, tuple[bytes, ...]] | None:
    """For a magic-2 batch in record.uniform's layout (null keys, no headers, timestamp
    delta 0, offset delta = index): (offset of the first value returned, the timestamp of
    every record, the values from offset `start` on); None for any other batch (decode it
    record by record). The columnar fast path of the Spark reader."""
    if batch.magic != 2:
        return None
    section = batch.records_section()
    codec = batch.attributes & 0x07
    if codec:
        section = memoryview(decompress(codec, section))
    values = uniform_values(section, batch.record_count)
    if values is None:
        return None
    skip = max(0, start - batch.base_offset)
    ts = batch.max_timestamp if int(batch.timestamp_type) == 1 else batch.first_timestamp
    return batch.base_offset + skip, ts, values[skip:] if skip else values


# -- request / response bodies --------------------------------------------------------------

def fetch_request_body(positions: Mapping[TopicPartition, int], *, max_wait_ms: int,
                       min_bytes: int, max_bytes: int, partition_max_bytes: int,
                       isolation_level: int = 0) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), off in positions.items():
        topics.setdefault(t, []).append({
            "partition": p, "current_leader_epoch": -1, "fetch_offset": off,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": partition_max_bytes})
    return {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
        "max_bytes": max_bytes, "isolation_level": isolation_level, "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [], "rack_id": "",
    }


def parse_fetch_response(resp: dict[str, Any],
                         positions: Mapping[TopicPartition, int]) -> list[PartitionFetch]:
    out = []
    for t in resp.get("responses") or ():
        name = t.get("topic")
        for p in t.get("partitions") or ():
            tp = (name, p["partition_index"])
            rec = p.get("records")
            mv = memoryview(b"") if rec is None else (
                rec if isinstance(rec, memoryview) else memoryview(rec))
            aborted = p.get("aborted_transactions")
            out.append(PartitionFetch(
                name, tp[1], p.get("error_code", 0), p.get("high_watermark", -1),
                p.get("last_stable_offset", -1), p.get("log_start_offset", -1), mv,
                positions.get(tp, 0),
                [(a["producer_id"], a["first_offset"]) for a in aborted] if aborted else None))
    return out


def list_offsets_body(requests: Mapping[TopicPartition, int],
                      isolation_level: int = 0) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), ts in requests.items():
        topics.setdefault(t, []).append({"partition_index": p, "current_leader_epoch": -1,
                                         "timestamp": ts, "max_num_offsets": 1})
    return {"replica_id": -1, "isolation_level": isolation_level,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            "timeout_ms": 30000}


def parse_list_offsets(resp: dict[str, Any]) -> dict[TopicPartition, tuple[int, int, int]]:
    """(topic, partition) -> (error_code, offset, timestamp)."""
    out = {}
    for t in resp.get("topics") or ():
        for p in t.get("partitions") or ():
            off = p.get("offset", -1)
            if off == -1 and p.get("old_style_offsets"):
                off = p["old_style_offsets"][0]
            out[(t["name"], p["partition_index"])] = (p.get("error_code", 0), off,
                                                      p.get("timestamp", -1))
    return out


def group_by_leader(cluster: Any, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
    out: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        out.setdefault(cluster.leader_for(*tp), []).append(tp)
    return out
