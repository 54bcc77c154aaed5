"""Null keys and values from lines (`kafkactl produce -Z` / `--null-marker`): LineProducer
against the definition, and every batch it builds against the general encoder.

-Z (kcat's): an empty value, and with a key separator an empty key, is null. --null-marker
(Kafka's console producer's null.marker): a value or key equal to the marker is. A run with
either takes lists (never Blocks), and every chunk, null fields and all, goes over the bulk
paths (send_values / send_key_values: record.columns encodes None as null), never record
by record: each batch is byte for byte the general encoder's (`ProducerBatch.append`, what
`producer.send` does) batch of its records. The inputs are what people pipe (`seq`, `yes`,
`yes ''`, log lines of many lengths, binary), the chunk boundaries land everywhere, nulls
sit at the edges of chunks, batches, RUN steps and the tables' offset deltas, by the
compiled encoders and by their pure-Python twins (the `twin` fixture; the module runs in
the pure step too), and with neither option the records are those of the default path
(Blocks with the compiled kernels, lists without).

The producer here is a RecordAccumulator's partition 0, with Producer's entry points (no
broker: each case takes milliseconds); tests/cli/test_produce_nulls.py runs the command
against a broker."""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.client import delimited, line_producer, producer_batch
from kafkactl.client.accumulator import RecordAccumulator
from kafkactl.client.delimited import Block, read_blocks, read_records
from kafkactl.client.line_producer import LineProducer, null_fields, null_positions
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.record import columns
from kafkactl.record._accel import kernels
from kafkactl.record.batch import RECORD_BATCH_OVERHEAD, RecordBatch, encode_record
from kafkactl.record.builder import encode_headers
from kafkactl.record.columns import MAX_DELTA, RUN
from tests.client.null_rows import null_rows
from tests.hypothesis_profiles import examples

TS = 1_700_000_000_000
MARKER = b"NULL"

Headers = tuple[tuple[str, bytes | None], ...]
Row = tuple[bytes | None, bytes | None, Headers]


class AccumulatorProducer:
    """Producer's entry points as LineProducer calls them, into partition 0 of a
    RecordAccumulator (what Producer does once it has chosen partition 0)."""

    sync = False

    def __init__(self, batch_size: int = 1 << 20) -> None:
        self.acc = RecordAccumulator(batch_size=batch_size, linger_ms=1e9,
                                     buffer_memory=1 << 34)
        self.calls: list[str] = []

    def add_batch_callback(self, callback: Any) -> None:
        pass

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
             partition: int | None = None,
             headers: Sequence[tuple[str, bytes | None]] | None = None,
             entry: Any = None) -> None:
        self.calls.append("send")
        self.acc.append(topic, 0, None, key, value, headers or (), entry)

    def send_values(self, topic: str, values: Sequence[bytes | None], *,
                    partition: int | None = None, keep_entries: bool = False) -> None:
        self.calls.append("send_values")
        self.acc.append_values(topic, 0, values, keep_entries)  # type: ignore[arg-type]

    def send_key_values(self, topic: str, keys: Sequence[bytes | None],
                        values: Sequence[bytes | None], *, partition: int | None = None,
                        entries: Sequence[Any] | None = None) -> None:
        self.calls.append("send_key_values")
        self.acc.append_key_values(topic, 0, keys, values, entries)  # type: ignore[arg-type]

    def send_lines(self, topic: str, data: bytes, start: int, end: int, delimiter: bytes,
                   key_separator: bytes | None = None, *, partition: int | None = None,
                   headers: Sequence[tuple[str, bytes | None]] = ()) -> int:
        self.calls.append("send_lines")
        return self.acc.append_lines(topic, 0, data, start, end, delimiter, key_separator,
                                     encode_headers(headers))

    def batches(self) -> list[ProducerBatch]:
        out = list(self.acc.batches.get(("t", 0), ()))
        for b in out:  # the reference batches' timestamp
            b.base_timestamp = b.max_timestamp = TS
        return out


def definition(records: Iterable[bytes], ksep: bytes | None, null_empty: bool,
               marker: bytes | None, headers: Headers = ()) -> list[Row]:
    """What each record must land as (null_rows), with `headers` on each."""
    return [(k, v, headers) for k, v in null_rows(records, ksep, null_empty, marker)]


def general_batch(rows: Sequence[Row]) -> bytes:
    """The general encoder's batch of exactly these records (ProducerBatch.append, one at a
    time)."""
    b = ProducerBatch("t", 0, 1 << 31, TS)
    for key, value, headers in rows:
        assert b.append(None, key, value, headers) is not None
    return bytes(b.build())


def landed(producer: AccumulatorProducer) -> list[Row]:
    """The records of every batch, each batch checked byte for byte against the general
    encoder's batch of its records."""
    rows: list[Row] = []
    for b in producer.batches():
        data = bytes(b.build())
        batch = RecordBatch(memoryview(data))
        assert batch.is_valid()
        these: list[Row] = [
            (None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
             tuple((k, None if v is None else bytes(v)) for k, v in r.headers))
            for r in batch]
        assert data == general_batch(these), "a batch differs from the general encoder's"
        rows += these
    return rows


def run(chunks: Iterable[list[bytes]] | Iterable[Block], *, ksep: bytes | None = None,
        null_empty: bool = False, marker: bytes | None = None, headers: Headers = (),
        keep: bool = False, batch_size: int = 1 << 20) -> tuple[list[Row], LineProducer]:
    producer = AccumulatorProducer(batch_size)
    lp = LineProducer(producer, "t", partition=0, key_separator=ksep,  # type: ignore[arg-type]
                      headers=list(headers), keep_failed=keep, null_empty=null_empty,
                      null_marker=marker)
    lp.send_all(chunks)
    assert lp.input_done
    return landed(producer), lp


def calls(lp: LineProducer) -> list[str]:
    """The producer entry points the run called."""
    return lp.producer.calls  # type: ignore[attr-defined]


def in_bulk(lp: LineProducer) -> bool:
    """Whether every record went over a bulk path (none through `send`)."""
    return "send" not in calls(lp)


@pytest.fixture(autouse=True)
def one_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bulk call at one clock reading, TS: the bulk encoders stamp each call's
    records with its own reading (a timestamp delta from the batch timestamp), and the
    general encoder's batches compared here have timestamp delta 0."""
    monkeypatch.setattr(producer_batch, "now_ms", lambda: TS)


@pytest.fixture(params=["compiled", "pure"])
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The compiled encoders and key split, or their pure-Python twins (record.columns'
    encode_values_py / encode_key_values_py, split_keys_py / null_values_py; lists, not
    Blocks, as without the kernels)."""
    if request.param == "compiled":
        if kernels is None:
            pytest.skip("the compiled kernels are not in use")
        assert producer_batch.encode_values is kernels.encode_values
        return "compiled"
    monkeypatch.setattr(producer_batch, "encode_values", columns.encode_values_py)
    monkeypatch.setattr(producer_batch, "encode_key_values", columns.encode_key_values_py)
    monkeypatch.setattr(line_producer, "split_keys", line_producer.split_keys_py)
    monkeypatch.setattr(line_producer, "null_values", line_producer.null_values_py)
    monkeypatch.setattr(line_producer, "kernels", None)
    return "pure"


def read(data: bytes, lp_blocks: bool, delim: bytes = b"\n"
         ) -> Iterator[list[bytes]] | Iterator[Block]:
    stream = io.BytesIO(data)
    return read_blocks(stream, delim) if lp_blocks else read_records(stream, delim)


def takes_blocks(null_empty: bool, marker: bytes | None) -> bool:
    """What `kafkactl produce` gives LineProducer: Blocks when it takes them."""
    lp = LineProducer(AccumulatorProducer(), "t", null_empty=null_empty,  # type: ignore[arg-type]
                      null_marker=marker)
    return lp.takes_blocks


# -- what people pipe -------------------------------------------------------------------


def seq(n: int) -> bytes:
    return b"".join(b"%d\n" % i for i in range(1, n + 1))


def log_lines(n: int, seed: int, sep: bytes = b" ") -> bytes:
    """Log lines from empty to ~3 KB (most short, a few long), some keyless, some with an
    empty key or value, a few exactly the marker, in either field."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        shape = rng.random()
        body = bytes(rng.randrange(33, 127) for _ in range(
            rng.choice((0, 1, 2, 7, 60, 127, 128, 300, 3000)) if shape < 0.3
            else rng.randrange(40, 200)))
        if shape < 0.04:
            lines.append(b"")
        elif shape < 0.07:
            lines.append(MARKER)
        elif shape < 0.10:
            lines.append(b"user%d%s" % (i % 50, sep))  # a tombstone: key, empty value
        elif shape < 0.12:
            lines.append(b"user%d%s%s" % (i % 50, sep, MARKER))
        elif shape < 0.14:
            lines.append(sep + body)  # an empty key
        elif shape < 0.16:
            lines.append(MARKER + sep + body)
        elif shape < 0.2:
            lines.append(body.replace(sep, b"_"))  # no separator: a null key
        else:
            lines.append(b"user%d%s%s" % (i % 50, sep, body))
    return b"\n".join(lines) + b"\n"


def binary(n: int, seed: int) -> bytes:
    """Random bytes, newlines and NULs among them: records of any length, empty ones too."""
    rng = random.Random(seed)
    return bytes(rng.choice(b"\n\n\x00 :NUL\xff\x80") if rng.random() < 0.2
                 else rng.randrange(256) for _ in range(n))


INPUTS = {  # name -> (input, its key separator)
    "seq": (seq(20_000), b":"),  # several chunks and more than MAX_DELTA records
    "yes": (b"y\n" * 8_000, b":"),
    "yes-empty": (b"\n" * 5_000, b":"),  # `yes ''`: every record empty
    "yes-tombstone": (b"k:\n" * 5_000, b":"),  # `yes k:`: every one a key's tombstone
    "yes-marker": ((MARKER + b"\n") * 2_000, b":"),
    "log": (log_lines(3_000, 1), b" "),
    "log-tab": (log_lines(1_500, 2, b"\t"), b"\t"),
    "binary": (binary(60_000, 3), b":"),
    "unterminated": (b"a:1\n\nb:\n:c\n" + MARKER, b":"),  # no delimiter at the end
}

OPTIONS = {"none": (False, None), "Z": (True, None), "marker": (False, MARKER),
           "Z+marker": (True, MARKER), "empty-marker": (False, b"")}


@pytest.fixture
def small_chunks() -> Iterator[None]:
    """Chunks of 4 KiB: chunk boundaries all over every input (inside records, at nulls)."""
    saved = delimited.CHUNK
    delimited.CHUNK = 4096
    try:
        yield
    finally:
        delimited.CHUNK = saved


@pytest.mark.parametrize("name", list(INPUTS))
@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("keyed", [False, True])
def test_piped_input_lands_as_defined(small_chunks: None, twin: str, name: str, option: str,
                                      keyed: bool) -> None:
    data, sep = INPUTS[name]
    ksep = sep if keyed else None
    null_empty, marker = OPTIONS[option]
    blocks = takes_blocks(null_empty, marker)
    rows, lp = run(read(data, blocks), ksep=ksep, null_empty=null_empty, marker=marker)
    records = [r for chunk in read_records(io.BytesIO(data), b"\n") for r in chunk]
    assert rows == definition(records, ksep, null_empty, marker)
    assert lp.read == lp.stats.sent == len(records)
    assert lp.stats.bytes == sum(map(len, records))
    assert in_bulk(lp), "a record went through send(): the null fields must go in bulk"


@pytest.mark.parametrize("name", list(INPUTS))
@pytest.mark.parametrize("keyed", [False, True])
def test_without_null_fields_the_options_change_nothing(small_chunks: None, name: str,
                                                        keyed: bool) -> None:
    """An input without the null spellings (its empty records and markers dropped) lands
    record for record as the default path puts it, -Z and --null-marker or not, and over the
    bulk paths only (never record by record)."""
    data, sep = INPUTS[name]
    ksep = sep if keyed else None
    records = [r for chunk in read_records(io.BytesIO(data), b"\n") for r in chunk]
    kept = [r for r in records if r and MARKER not in r
            and not (ksep and (r.startswith(ksep) or r.endswith(ksep)))]
    data = b"".join(r + b"\n" for r in kept)
    default, _ = run(read(data, takes_blocks(False, None)), ksep=ksep)
    for null_empty, marker in ((True, None), (True, MARKER)):
        producer = AccumulatorProducer()
        lp = LineProducer(producer, "t", partition=0,  # type: ignore[arg-type]
                          key_separator=ksep, null_empty=null_empty, null_marker=marker)
        lp.send_all(read(data, lp.takes_blocks))
        assert landed(producer) == default
        assert "send" not in producer.calls
    assert default == definition(kept, ksep, False, None)


def test_a_null_delimited_binary_input(small_chunks: None) -> None:
    data = binary(60_000, 4)
    records = [r for chunk in read_records(io.BytesIO(data), b"\x00") for r in chunk]
    assert len(records) > 1000 and b"" in records
    for null_empty, marker in OPTIONS.values():
        rows, _ = run(read(data, takes_blocks(null_empty, marker), b"\x00"), ksep=b":",
                      null_empty=null_empty, marker=marker)
        assert rows == definition(records, b":", null_empty, marker)


# -- the edges: nulls at chunk starts and ends, runs of them, whole chunks ---------------

FIELDS = [b"", MARKER, b"v", b"vv", b"x" * 200, b"NUL", b"NULLL", b"\x00", b"a b"]


@st.composite
def chunked_records(draw: st.DrawFn) -> list[list[bytes]]:
    """Records of keys and values drawn from the null spellings and near misses, cut into
    chunks of any size (empty ones too)."""
    records = draw(st.lists(st.one_of(
        st.sampled_from(FIELDS),
        st.tuples(st.sampled_from(FIELDS), st.sampled_from(FIELDS)).map(b":".join)),
        max_size=60))
    cuts = sorted(draw(st.lists(st.integers(0, len(records)), max_size=6)))
    bounds = [0, *cuts, len(records)]
    return [records[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@given(chunks=chunked_records(), ksep=st.sampled_from([None, b":"]),
       option=st.sampled_from(list(OPTIONS)), keep=st.booleans(),
       headers=st.sampled_from([(), (("h", b"1"), ("n", None))]),
       batch_size=st.sampled_from([1 << 20, 300]))
@settings(max_examples=examples(300))
def test_chunks_of_edge_records_land_as_defined(chunks: list[list[bytes]], ksep: bytes | None,
                                                option: str, keep: bool, headers: Headers,
                                                batch_size: int) -> None:
    null_empty, marker = OPTIONS[option]
    rows, lp = run(chunks, ksep=ksep, null_empty=null_empty, marker=marker, headers=headers,
                   keep=keep, batch_size=batch_size)
    flat = [r for c in chunks for r in c]
    assert rows == definition(flat, ksep, null_empty, marker, headers)
    assert lp.read == lp.stats.sent == len(flat)
    assert lp.stats.bytes == sum(map(len, flat))
    assert lp.unsent() == []
    # headers: record by record, null fields or not; else in bulk
    assert in_bulk(lp) == (not headers or not flat)


@pytest.mark.parametrize("count", [RUN - 1, RUN, RUN + 1, MAX_DELTA - 1, MAX_DELTA,
                                   MAX_DELTA + 1])
@pytest.mark.parametrize("where", ["first", "last", "every-other", "every-third", "all",
                                   "edges", "none"])
@pytest.mark.parametrize("keyed", [False, True])
def test_nulls_around_the_delta_tables(twin: str, count: int, where: str, keyed: bool
                                       ) -> None:
    """A chunk of `count` records (one below, at and one above a RUN-record step and the
    bulk tables' MAX_DELTA end) with tombstones (and, keyed, null keys) at its first or
    last record, every other or third one, all of them, or at the records where an offset
    delta's varint grows, a RUN step ends and the tables end: the bulk paths fill batches
    as far as the tables go, the next batch the rest, byte for byte."""
    edges = {0, 63, 64, RUN - 1, RUN, 8191, 8192, MAX_DELTA - 1, MAX_DELTA, count - 1}
    at = {"first": [0], "last": [count - 1], "every-other": range(0, count, 2),
          "every-third": range(2, count, 3), "all": range(count),
          "edges": [i for i in edges if i < count], "none": []}[where]
    records = [b"k%d:%d" % (i % 11, i) if keyed else b"%d" % i for i in range(count)]
    for i in at:
        # a tombstone; keyed, every other one's key null too (an empty key)
        records[i] = (b":" if i % 2 else b"k%d:" % (i % 11)) if keyed else b""
    ksep = b":" if keyed else None
    rows, lp = run([records], ksep=ksep, null_empty=True)
    assert rows == definition(records, ksep, True, None)
    assert in_bulk(lp)


def record_sizes(rows: Sequence[tuple[bytes | None, bytes | None]]) -> list[int]:
    """Each record's bytes at its offset delta in one batch."""
    return [len(encode_record(i, 0, k, v, ())) for i, (k, v) in enumerate(rows)]


@pytest.mark.parametrize("slack", [-1, 0, 1])
@pytest.mark.parametrize("null_at", [0, 38, 39, 40, 41])
@pytest.mark.parametrize("option", ["Z", "marker"])
@pytest.mark.parametrize("keyed", [False, True])
def test_a_batch_filled_to_a_null_record(twin: str, slack: int, null_at: int, option: str,
                                         keyed: bool) -> None:
    """batch.size ends at the end of record 40 (one byte less, exactly, one byte more): a
    null as the first record of a batch, the last one that fits, the first one that does
    not, the one after it. Each null counted at its true size: the batches hold 40
    records (39 with a byte less), as the general encoder's sizes say."""
    null_empty, marker = OPTIONS[option]
    null = marker if marker is not None else b""
    records = [b"10.0.%d.%d:%s" % (i % 7, i, b"x" * (50 + i * 37 % 400)) for i in range(100)]
    if not keyed:
        records = [r.partition(b":")[2] for r in records]
    records[null_at] = (b"k:" + null) if keyed else null
    if keyed and null_at % 2:
        records[null_at] = null + b":" + null  # a null key too
    ksep = b":" if keyed else None
    want = definition(records, ksep, null_empty, marker)
    batch_size = (RECORD_BATCH_OVERHEAD + sum(record_sizes([(k, v) for k, v, _ in want[:40]]))
                  + slack)
    producer = AccumulatorProducer(batch_size)
    lp = LineProducer(producer, "t", partition=0, key_separator=ksep,  # type: ignore[arg-type]
                      null_empty=null_empty, null_marker=marker)
    lp.send_all([records])
    assert landed(producer) == want and in_bulk(lp)
    first = 40 if slack >= 0 else 39
    assert [b.record_count for b in producer.batches()][0] == first


@pytest.mark.parametrize("slack", [-1, 0, 1])
@pytest.mark.parametrize("null_at", [29, 30, 31])
@pytest.mark.parametrize("keyed", [False, True])
def test_a_chunk_boundary_at_a_null_record(twin: str, monkeypatch: pytest.MonkeyPatch,
                                           slack: int, null_at: int, keyed: bool) -> None:
    """The input read in chunks that end at the end of line 30 (one byte before, exactly,
    one byte after): a null as a chunk's last record, the next chunk's first, or the one
    after; and chunks of nulls only (`yes ''`, `yes k:`) cut the same way."""
    lines = [b"user%d:%d" % (i % 9, i) if keyed else b"%d" % i for i in range(90)]
    lines[null_at] = b"user1:" if keyed else b""
    ksep = b":" if keyed else None
    data = b"".join(line + b"\n" for line in lines)
    monkeypatch.setattr(delimited, "CHUNK", sum(len(x) + 1 for x in lines[:30]) + slack)
    chunks = list(read_records(io.BytesIO(data), b"\n"))
    # (one byte more reads all of an empty line 30: its delimiter)
    assert len(chunks[0]) == (29 if slack < 0 else 31 if slack and not lines[30] else 30)
    rows, lp = run(chunks, ksep=ksep, null_empty=True)
    assert rows == definition(lines, ksep, True, None) and in_bulk(lp)
    all_null = (b"user1:\n" if keyed else b"\n") * 90
    chunks = list(read_records(io.BytesIO(all_null), b"\n"))
    rows, lp = run(chunks, ksep=ksep, null_empty=True)
    assert rows == definition([r for c in chunks for r in c], ksep, True, None)
    assert len(rows) == 90 and all(v is None for _, v, _ in rows) and in_bulk(lp)


@pytest.mark.parametrize("keyed", [False, True])
def test_chunks_of_nulls_at_their_edges(twin: str, keyed: bool) -> None:
    """A null first and last in a chunk, a chunk of one null, chunks of nulls only, an
    empty chunk, nulls in keys and in values, both spellings."""
    n = b"k:" if keyed else b""
    m = b"k:NULL" if keyed else b"NULL"
    chunks = [[n, b"a:1", b"b:2", m], [n], [], [b"c:3"], [n, m, n], [m] * 5, [b":", b"::"],
              [b"NULL:", b"NULL:NULL", b":NULL"], [b"d:4", n]]
    if not keyed:
        chunks = [[r.replace(b":", b"") for r in c] for c in chunks]
    ksep = b":" if keyed else None
    for option in ("Z", "marker", "Z+marker", "empty-marker"):
        null_empty, marker = OPTIONS[option]
        for keep in (False, True):
            rows, lp = run(chunks, ksep=ksep, null_empty=null_empty, marker=marker,
                           keep=keep, batch_size=120)
            flat = [r for c in chunks for r in c]
            assert rows == definition(flat, ksep, null_empty, marker), (option, keep)
            assert in_bulk(lp)


# -- keep_failed: the raw records of failed batches; unsent() after an interruption -------


class Interrupting(AccumulatorProducer):
    """Ctrl-C at the `at`-th call of a send entry point: before it hands anything over, or
    after it handed all of it."""

    def __init__(self, batch_size: int, at: int, after: bool) -> None:
        super().__init__(batch_size)
        self.at, self.after = at, after

    def _tick(self) -> None:
        if len(self.calls) == self.at:
            raise KeyboardInterrupt

    def send(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("send")
        if not self.after:
            self._tick()
        self.acc.append(args[0], 0, None, kwargs.get("key", args[2] if len(args) > 2 else
                                                      None), args[1],
                        kwargs.get("headers") or (), kwargs.get("entry"))
        self._tick()

    def send_values(self, topic: str, values: Sequence[bytes | None], *,
                    partition: int | None = None, keep_entries: bool = False) -> None:
        self.calls.append("send_values")
        if not self.after:
            self._tick()
        self.acc.append_values(topic, 0, values, keep_entries)  # type: ignore[arg-type]
        self._tick()

    def send_key_values(self, topic: str, keys: Sequence[bytes | None],
                        values: Sequence[bytes | None], *, partition: int | None = None,
                        entries: Sequence[Any] | None = None) -> None:
        self.calls.append("send_key_values")
        if not self.after:
            self._tick()
        self.acc.append_key_values(topic, 0, keys, values, entries)  # type: ignore[arg-type]
        self._tick()


@given(chunks=chunked_records(), ksep=st.sampled_from([None, b":"]),
       option=st.sampled_from(["Z", "marker", "Z+marker", "empty-marker"]),
       partition=st.sampled_from([0, None]), at=st.integers(1, 8), after=st.booleans(),
       outcomes=st.lists(st.booleans(), min_size=1), batch_size=st.sampled_from([1 << 20, 200]))
@settings(max_examples=examples(300))
def test_keep_failed_and_unsent_with_null_fields(chunks: list[list[bytes]], ksep: bytes | None,
                                                 option: str, partition: int | None, at: int,
                                                 after: bool, outcomes: list[bool],
                                                 batch_size: int) -> None:
    """keep_failed with null fields in bulk: stopped at any hand-over (before or after it),
    then each batch acknowledged or failed: the acknowledged records and
    failed_records() (the raw records of the failed batches, then the unsent ones) are
    every record read, each once. With a partition, in input order (the keyed path over
    several partitions tags its records instead)."""
    null_empty, marker = OPTIONS[option]
    producer = Interrupting(batch_size, at, after)
    lp = LineProducer(producer, "t", partition=partition,  # type: ignore[arg-type]
                      key_separator=ksep, keep_failed=True, null_empty=null_empty,
                      null_marker=marker)
    with contextlib.suppress(KeyboardInterrupt):
        lp.send_all(chunks)
    acked: list[bytes] = []
    error = RuntimeError("refused")
    batches = producer.batches()
    for i, b in enumerate(batches):
        ok = outcomes[i % len(outcomes)]
        entries = list(b.entries)
        lp.stats.on_batch(b, 0 if ok else -1, None if ok else error)
        if ok:
            acked += [e[1] if isinstance(e, tuple) else e for e in entries]
    failed = list(lp.failed_records())
    flat = [r for c in chunks for r in c]
    assert lp.read <= len(flat) and (lp.read == len(flat) or not lp.input_done)
    read = flat[:lp.read]
    assert sorted(acked + failed) == sorted(read)
    assert lp.stats.acked == len(acked) and lp.stats.acked + len(failed) == lp.read
    assert in_bulk(lp)
    if partition == 0 and all(outcomes):
        assert acked + failed == read  # in input order


def test_null_positions() -> None:
    nulls = null_fields(True, MARKER)
    assert nulls == frozenset({b"", MARKER}) and null_fields() == frozenset()
    assert null_positions(nulls, [b"", b"a", MARKER, b"", b"NULLx"]) == [0, 2, 3]
    assert null_positions(nulls, [b"a", b"b"], [None, b""]) == [1]
    assert null_positions(nulls, [b"a", b""], [MARKER, None]) == [0, 1]
    assert null_positions(nulls, [], []) == []
    assert null_positions(frozenset({MARKER}), [b""], [None]) == []


def test_a_value_then_its_tombstone_keep_their_order() -> None:
    """What a compacted topic keeps is the last record of a key: a value then its tombstone
    must land in that order (never the bulk run after the record-by-record ones)."""
    records = [b"a:1", b"b:1", b"a:", b"b:2", b"c:1", b"b:", b"a:3", b"c:"]
    rows, _ = run([records], ksep=b":", null_empty=True)
    assert [(k, v) for k, v, _ in rows] == [
        (b"a", b"1"), (b"b", b"1"), (b"a", None), (b"b", b"2"), (b"c", b"1"), (b"b", None),
        (b"a", b"3"), (b"c", None)]


def test_the_options_take_lists_not_blocks() -> None:
    assert takes_blocks(True, None) is False and takes_blocks(False, b"") is False
