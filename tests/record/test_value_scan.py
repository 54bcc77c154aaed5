"""record.value_scan's one-pass decoder against the per-record decoder (RecordBatch
iteration): the same keys, values and offsets for any record it takes, and None (the
general path) for any it does not: headers, keys where none are asked for, fields past its
varint widths, and malformed bytes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.record.batch import RecordBatch, RecordBatchBuilder, _iter_records
from kafkactl.record.codecs import Compression
from kafkactl.record.errors import RecordError
from kafkactl.record.value_scan import _scan, fast_columns, fast_key_values, fast_values
from tests.hypothesis_profiles import examples

TS = 1_700_000_000_000


def build(records: list[tuple[int, bytes | None, bytes | None]], *,
          codec: Compression = Compression.NONE, base_offset: int = 0,
          headers: bool = False) -> RecordBatch:
    b = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for ts, k, v in records:
        b.append(TS + ts, k, v, [("h", b"x")] if headers else ())
    return RecordBatch(memoryview(b.build()))


def general(batch: RecordBatch, start: int) -> tuple[list[bytes | None], list[bytes | None],
                                                     list[int]]:
    keys, values, offsets = [], [], []
    for r in batch:
        if r.offset >= start:
            keys.append(None if r.key is None else bytes(r.key))
            values.append(None if r.value is None else bytes(r.value))
            offsets.append(r.offset)
    return keys, values, offsets


def same(batch: RecordBatch, start: int) -> None:
    """The fast decoder gives what the general one gives, or declines."""
    keys, values, offsets = general(batch, start)
    found = fast_columns(batch, start, keys=True, offsets=True)
    if found is not None:
        k, v, d = found
        assert k is not None and d is not None
        assert [None if x is None else bytes(x) for x in k] == keys
        assert [None if x is None else bytes(x) for x in v] == values
        assert [batch.base_offset + x for x in d] == offsets
    plain = fast_values(batch, start)  # the values, keys or not
    assert (plain is None) == (found is None)
    if plain is not None:
        assert [None if x is None else bytes(x) for x in plain] == values
    kv = fast_key_values(batch, start)
    assert (kv is None) == (found is None)


field = st.one_of(st.none(), st.binary(max_size=200),
                  st.sampled_from([63, 64, 65, 8191, 8192]).map(lambda n: b"z" * n))
ts_delta = st.one_of(st.integers(min_value=0, max_value=63),
                     st.integers(min_value=-(1 << 40), max_value=1 << 40))


@settings(max_examples=examples(150))
@given(st.lists(st.tuples(ts_delta, field, field), max_size=40),
       st.integers(min_value=-2, max_value=45), st.sampled_from(list(Compression)),
       st.integers(min_value=0, max_value=1 << 40))
def test_keys_values_offsets_like_the_general_decoder(records, start, codec, base) -> None:
    batch = build(records, codec=codec, base_offset=base)
    same(batch, base + start)
    if records and all(len(v or b"") + len(k or b"") < 8000 for _, k, v in records):
        # records under 8 KiB without headers: the fast path
        assert fast_columns(batch, base + start) is not None


@pytest.mark.parametrize("count", [63, 64, 65, 8191, 8192, 8193, 16384, 16385])
def test_offset_delta_widths(count: int) -> None:
    """One-, two- and three-byte offset deltas (batches of more than 8192 records)."""
    batch = build([(i % 3, None if i % 4 else b"k", b"%d" % i) for i in range(count)])
    for start in (0, 63, 64, 8191, 8192, count - 1):
        same(batch, start)
    assert fast_columns(batch, 0) is not None


def test_declines_what_it_does_not_take_and_passes_keys_over() -> None:
    assert fast_columns(build([(0, None, b"v")], headers=True), 0) is None
    keyed = fast_values(build([(0, b"key", b"v"), (1, b"k" * 200, b"w")]), 0)
    assert keyed is not None and [bytes(v) for v in keyed] == [b"v", b"w"]  # keys passed over
    big = build([(0, None, b"x" * 9000)])  # a length of three varint bytes
    assert fast_columns(big, 0) is None
    same(big, 0)


def test_timestamp_deltas_of_every_width() -> None:
    records = [(d, None, b"v%d" % i) for i, d in enumerate(
        [0, 63, 64, -1, -65, 1 << 20, -(1 << 40), (1 << 55)])]
    batch = build(records)
    same(batch, 0)
    assert fast_columns(batch, 0) is not None
    ten_bytes = build([(0, None, b"u"), (1 << 62, None, b"v")])  # a ten-byte varlong
    same(ten_bytes, 0)
    assert fast_columns(ten_bytes, 0) is None


def test_empty_and_null_keys_and_values() -> None:
    batch = build([(0, None, None), (0, b"", b""), (0, None, b""), (0, b"", None)])
    same(batch, 0)
    assert fast_columns(batch, 0) is not None


def test_real_inputs() -> None:
    rng = random.Random(7)
    logs = [b"10.%d.%d.%d - - GET /%s 200" % (rng.randrange(256), rng.randrange(256),
                                              rng.randrange(256), b"p" * rng.randrange(480))
            for _ in range(3000)]
    binary = [bytes(rng.randrange(256) for _ in range(rng.randrange(300))) for _ in range(300)]
    for values in ([b"%d" % i for i in range(1, 20001)], [b"y"] * 5000, logs, binary,
                   [b"a\r", b"b\r", b""]):
        batch = build([(0, None, v) for v in values])
        found = fast_values(batch, 0)
        assert found is not None and list(map(bytes, found)) == values
        keyed = build([(0, *v.partition(b" ")[::2]) for v in values])
        same(keyed, 0)


@settings(max_examples=examples(300))
@given(st.lists(st.tuples(ts_delta, field, field), min_size=1, max_size=12),
       st.data())
def test_malformed_sections_decline_or_agree(records, data) -> None:
    """A section with one byte changed: the fast decoder declines, or agrees with the
    general decoder when that one still decodes it (never a different answer)."""
    batch = build(records)
    section = bytearray(batch.records_section())
    at = data.draw(st.integers(min_value=0, max_value=len(section) - 1))
    section[at] = data.draw(st.integers(min_value=0, max_value=255))
    count = len(records) + data.draw(st.integers(min_value=-1, max_value=1))
    fast = _scan(bytes(section), count)
    try:
        expected = [(None if r.key is None else bytes(r.key),
                     None if r.value is None else bytes(r.value), r.offset)
                    for r in _iter_records(memoryview(bytes(section)), count, 0, TS, None)]
    except (RecordError, IndexError, ValueError):
        assert fast is None
        return
    if fast is not None:
        keys, values, deltas = fast
        assert list(zip(keys, values, deltas, strict=True)) == expected
