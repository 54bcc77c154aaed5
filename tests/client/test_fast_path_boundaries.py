"""Every producer/consumer fast path against the general path at its edges: exactly at, one
below and one above each table size (record.uniform's MAX_RECORDS offset deltas and
MAX_VALUE_SIZE, the varint tables' _TABLE_SIZE, record.columns' MAX_DELTA and MAX_FIELDS,
MIN_RUN, one-/two-byte varint lengths) and
batch.size (a batch that holds exactly n records, one byte less, one byte more).

The reference is the general encoder: `ProducerBatch.append` (record.batch.encode_record)
one record at a time into a batch of the same base timestamp. A fast-built batch must be
byte-identical to the reference batch of the same records, never exceed batch.size (unless it
holds one record), and leave no room for the next record when it stopped for size."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.client.accumulator import RecordAccumulator
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.record.batch import RecordBatch, encode_record
from kafkactl.record.codecs import Compression
from kafkactl.record.columns import MAX_DELTA, MAX_FIELDS, ZIGZAG
from kafkactl.record.uniform import MAX_RECORDS, MAX_VALUE_SIZE, MIN_RUN
from kafkactl.record.value_scan import fast_key_values, fast_values
from tests.hypothesis_profiles import examples

TS = 1_700_000_000_000
_TABLE_SIZE = len(ZIGZAG)  # the varint tables' size


def reference(keys: Sequence[bytes | None], values: Sequence[bytes]) -> bytes:
    """The general encoder's batch of exactly these records."""
    b = ProducerBatch("t", 0, 1 << 31, TS)
    for k, v in zip(keys, values, strict=True):
        assert b.append(None, k, v) is not None
    return b.build()


def record_size(delta: int, key: bytes | None, value: bytes) -> int:
    return len(encode_record(delta, 0, key, value, ()))


def fill(keys: Sequence[bytes | None] | None, values: Sequence[bytes], batch_size: int
         ) -> list[ProducerBatch]:
    acc = RecordAccumulator(batch_size=batch_size, linger_ms=1e9, buffer_memory=1 << 34)
    if keys is None:
        acc.append_values("t", 0, values)
    else:
        acc.append_key_values("t", 0, keys, values)
    batches = list(acc.batches[("t", 0)])
    for b in batches:  # the reference batches use the same timestamp
        b.base_timestamp = b.max_timestamp = TS
    return batches


def check(keys: Sequence[bytes | None] | None, values: Sequence[bytes], batch_size: int
          ) -> list[int]:
    """Fill, then compare each batch with the reference; returns the record counts."""
    batches = fill(keys, values, batch_size)
    ks: list[bytes | None] = [None] * len(values) if keys is None else list(keys)
    at = 0
    counts = []
    for i, b in enumerate(batches):
        n = b.record_count
        data = b.build()
        assert len(data) == b.size
        assert data == reference(ks[at:at + n], values[at:at + n]), f"batch {i}"
        assert b.size <= batch_size or n == 1
        if i + 1 < len(batches) and b.size <= batch_size and n != MAX_DELTA:
            # It stopped for size: the next record would not have fit (the general
            # encoder's estimate may stop a little early, never late). Else it stopped
            # full of MAX_DELTA records, the tables' end (ProducerBatch._table_full).
            nxt = record_size(n, ks[at + n], values[at + n])
            assert b.size + nxt > batch_size - 32, (b.size, nxt, batch_size)
        assert n <= MAX_DELTA, "the fast paths never go past the tables' offset deltas"
        rb = RecordBatch(memoryview(data))
        assert rb.is_valid() and rb.record_count == n
        at += n
        counts.append(n)
    assert at == len(values)
    return counts


def exact_size(keys: Sequence[bytes | None] | None, values: Sequence[bytes]) -> int:
    ks = [None] * len(values) if keys is None else keys[:len(values)]
    return len(reference(ks, values))


def in_batches(count: int) -> list[int]:
    """The record counts of `count` small records in one batch.size: batches of MAX_DELTA
    records, the tables' end, then the rest."""
    full, rest = divmod(count, MAX_DELTA)
    return [MAX_DELTA] * full + ([rest] if rest else [])


# -- record counts at the uniform tables' edge (MAX_RECORDS offset deltas) -------------------

@pytest.mark.parametrize("count", [MAX_RECORDS - 1, MAX_RECORDS, MAX_RECORDS + 1,
                                   2 * MAX_RECORDS + 1])
@pytest.mark.parametrize("vlen", [1, 5, 63, 64])
def test_equal_length_runs_around_max_records(count: int, vlen: int) -> None:
    values = [bytes([48 + i % 10]) * vlen for i in range(count)]
    assert check(None, values, 1 << 30) == in_batches(count)


@pytest.mark.parametrize("count", [MAX_RECORDS - 1, MAX_RECORDS, MAX_RECORDS + 1, 64, 65,
                                   8192, 8193, MAX_DELTA, MAX_DELTA + 1, MAX_DELTA + 2])
def test_keyed_runs_around_the_delta_table(count: int) -> None:
    keys = [b"k%d" % (i % 7) for i in range(count)]
    values = [b"v" * (i % 9) for i in range(count)]
    assert check(keys, values, 1 << 30) == in_batches(count)


def test_seq_lines_fill_one_big_batch() -> None:
    """`seq 1 50000` at a 1 MB batch.size: the crash this file was written for."""
    values = [b"%d" % i for i in range(1, 50_001)]
    counts = check(None, values, 1_000_000)
    assert sum(counts) == 50_000


# -- batch.size exactly at, one below, one above a whole number of records --------------------

@pytest.mark.parametrize("n", [1, MIN_RUN - 1, MIN_RUN, MIN_RUN + 1, 200])
@pytest.mark.parametrize("slack", [-1, 0, 1])
@pytest.mark.parametrize("vlen", [0, 10, 63, 64, 100])
def test_batch_size_boundaries(n: int, slack: int, vlen: int) -> None:
    values = [b"x" * vlen] * (3 * n + 5)
    size = exact_size(None, values[:n]) + slack
    counts = check(None, values, size)
    if slack >= 0:
        assert counts[0] == n  # exactly n fit (one more byte does not make room for n+1)
    else:
        assert counts[0] == max(n - 1, 1)


@pytest.mark.parametrize("slack", [-1, 0, 1])
def test_keyed_batch_size_boundaries(slack: int) -> None:
    keys = [b"key"] * 50
    values = [b"value-%02d" % i for i in range(50)]
    size = exact_size(keys, values[:20]) + slack
    counts = check(keys, values, size)
    assert counts[0] == (20 if slack >= 0 else 19)


# -- value lengths at each table's edge --------------------------------------------------------

@pytest.mark.parametrize("vlen", [MAX_VALUE_SIZE - 1, MAX_VALUE_SIZE, MAX_VALUE_SIZE + 1,
                                  _TABLE_SIZE - 9, _TABLE_SIZE - 8, _TABLE_SIZE - 7,
                                  MAX_FIELDS - 1, MAX_FIELDS, MAX_FIELDS + 1,
                                  MAX_FIELDS // 2, MAX_FIELDS // 2 + 1])
@pytest.mark.parametrize("count", [MIN_RUN - 1, MIN_RUN, MIN_RUN + 1])
def test_value_lengths_at_table_edges(vlen: int, count: int) -> None:
    values = [bytes([65 + i % 26]) * vlen for i in range(count)]
    check(None, values, 1 << 30)
    check(None, values, exact_size(None, values[:3]))  # three per batch
    keys = [b"k"] * count
    check(keys, values, 1 << 30)


def test_oversized_record_then_a_uniform_run() -> None:
    """A record bigger than batch.size followed by 16+ equal short lines (the second way
    the uniform path crashed)."""
    values = [b"B" * 5000] + [b"s" * 10] * (MIN_RUN + 40)
    counts = check(None, values, 1000)
    assert counts[0] == 1


# -- the consumer's fast decoders at the same edges --------------------------------------------

@pytest.mark.parametrize("count", [MIN_RUN - 1, MIN_RUN, MIN_RUN + 1, MAX_RECORDS - 1,
                                   MAX_RECORDS, MAX_RECORDS + 1])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_fast_decoders_at_count_edges(count: int, codec: Compression) -> None:
    values = [b"%05d" % i for i in range(count)]
    b = ProducerBatch("t", 0, 1 << 30, TS)
    n = b.append_values(values)  # up to MAX_DELTA records; other producers' batches hold more
    for value in values[n:]:
        assert b.append(None, None, value) is not None
    batch = RecordBatch(memoryview(b.build(codec)))
    general = [bytes(r.value) for r in batch]
    assert general == values
    for start in (0, 1, count - 1):
        fast = fast_values(batch, start)
        assert fast is not None and [bytes(v) for v in fast] == values[start:]
    kv = fast_key_values(batch, 0)
    assert kv is not None
    assert [bytes(v) for v in kv[1]] == values and all(k is None for k in kv[0])


# -- random shapes drawn around the edges ------------------------------------------------------

edge_len = st.sampled_from([0, 1, 62, 63, 64, 65, 127, 128, MAX_VALUE_SIZE - 1, MAX_VALUE_SIZE,
                            MAX_VALUE_SIZE + 1])


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(edge_len, st.sampled_from([1, MIN_RUN - 1, MIN_RUN, MIN_RUN + 1, 40])),
                min_size=1, max_size=6),
       st.integers(min_value=-1, max_value=1), st.integers(min_value=1, max_value=30),
       st.booleans())
def test_runs_of_edge_lengths_against_the_general_encoder(runs, slack, per_batch, keyed) -> None:
    values = [bytes([65 + r % 26]) * vlen for r, (vlen, count) in enumerate(runs)
              for _ in range(count)]
    keys = [b"k%d" % (i % 3) if i % 4 else None for i in range(len(values))] if keyed else None
    size = exact_size(keys, values[:per_batch]) + slack
    check(keys, values, max(size, 80))
