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
    _next: int = -1  # next_offset(), once worked out
    # why the batch header after the last complete batch cannot be framed (next_offset())
    _damage: str | None = field(default=None, init=False, repr=False)

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
        for b in self.batches():
            first = max(b.base_offset, start)
            if check_crcs and not b.is_valid():
                raise CorruptFetchError(
                    t, p, first, f"CRC mismatch in batch at offset {b.base_offset} of {t}-{p}")
            tstype = int(b.timestamp_type)
            try:
                for r in b:
                    if r.offset >= start:
                        first = r.offset + 1
                        yield ConsumerRecord(t, p, r.offset, r.timestamp, tstype, r.key,
                                             r.value, r.headers)
            except CorruptRecordError as e:
                raise CorruptFetchError(
                    t, p, first, f"{t}-{p}: the record at offset {first} (in the batch at "
                    f"offset {b.base_offset}) cannot be read: {e}") from None


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
