from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder

from kafkactl.record.codecs import Compression
from kafkactl.record.convert import down_convert, up_convert
from kafkactl.record.legacy import LegacyBatch, build_message_set
from kafkactl.record.memory_records import iter_batches, scan

large = st.builds(lambda n, s: (s * n)[:n], st.integers(5000, 40000),
                  st.binary(min_size=1, max_size=8))
maybe_bytes = st.none() | st.binary(max_size=64) | large
legacy_codecs = st.sampled_from([Compression.NONE, Compression.GZIP, Compression.SNAPPY,
                                 Compression.LZ4])
recs = st.lists(st.tuples(st.integers(0, 2**41), maybe_bytes, maybe_bytes), min_size=1,
                max_size=8)


def _b(m: memoryview | None) -> bytes | None:
    return None if m is None else bytes(m)


@given(st.sampled_from([0, 1]), recs, legacy_codecs, st.integers(0, 2**40))
def test_roundtrip(magic, records, codec, base) -> None:
    data = build_message_set(magic, records, codec, base_offset=base)
    got = [(r.offset, r.timestamp, _b(r.key), _b(r.value))
           for b in iter_batches(data) for r in b]
    assert got == [(base + i, ts if magic == 1 else -1, k, v)
                   for i, (ts, k, v) in enumerate(records)]
    res = scan(data)
    assert res.error is None and res.valid_bytes == len(data)
    assert (res.first_offset, res.last_offset) == (base, base + len(records) - 1)
    batches = list(iter_batches(data))
    assert all(b.is_valid() for b in batches)
    if codec != Compression.NONE:
        [wrapper] = batches
        assert wrapper.last_offset == base + len(records) - 1  # wrapper = last inner offset
        assert wrapper.base_offset == base and wrapper.record_count == len(records)
        if magic == 1:
            assert wrapper.max_timestamp == max(r[0] for r in records)


@given(st.sampled_from([0, 1]), recs, st.sampled_from([0, 1, 2]))
def test_kafka_python_reads_ours(magic, records, codec) -> None:
    data = build_message_set(magic, records, codec, base_offset=100)
    pos = 0
    got = []
    while pos < len(data):
        entry = LegacyBatch(data, pos)
        theirs = LegacyRecordBatch(data[pos:pos + entry.size], magic)
        got += [(r.offset, r.key, r.value) for r in theirs]
        pos += entry.size
    assert got == [(100 + i, k, v) for i, (_ts, k, v) in enumerate(records)]


@pytest.mark.parametrize("codec", [0, 1, 2, 3])
def test_we_read_kafka_python_wrappers(codec: int) -> None:
    kb = LegacyRecordBatchBuilder(1, codec, 1 << 30)
    for i in range(5):
        kb.append(i, 1000 + i, b"k%d" % i, b"v%d" % i)
    data = bytearray(kb.build())
    if codec:  # a producer leaves the wrapper offset 0; the broker stamps the last offset
        struct.pack_into(">q", data, 0, 4)
    got = [(r.offset, bytes(r.key), bytes(r.value), r.timestamp)
           for b in iter_batches(data) for r in b]
    assert got == [(i, b"k%d" % i, b"v%d" % i, 1000 + i) for i in range(5)]


def test_magic1_relative_inner_offsets_resolve_from_the_wrapper() -> None:
    # seed 003: wrapper offset 1030 holds inner offsets 0..5 -> absolute 1025..1030
    data = build_message_set(1, [(i, None, b"x") for i in range(6)], Compression.GZIP,
                             base_offset=1025)
    [wrapper] = list(iter_batches(data))
    assert wrapper.last_offset == 1030
    assert [off for off, _m in wrapper.iter_messages()] == list(range(1025, 1031))


@given(st.lists(st.tuples(st.integers(0, 2**41), maybe_bytes, maybe_bytes), min_size=1,
                max_size=6), legacy_codecs, st.sampled_from([0, 1]))
def test_up_then_down_convert(records, codec, magic) -> None:
    legacy = build_message_set(magic, records, codec, base_offset=3)
    v2 = up_convert(legacy)
    assert all(b.magic == 2 and b.is_valid() for b in iter_batches(v2))
    expect = [(3 + i, ts if magic == 1 else -1, k, v) for i, (ts, k, v) in enumerate(records)]
    assert [(r.offset, r.timestamp, _b(r.key), _b(r.value))
            for b in iter_batches(v2) for r in b] == expect
    back = down_convert(v2, magic)
    assert [(r.offset, r.timestamp, _b(r.key), _b(r.value))
            for b in iter_batches(back) for r in b] == expect
    assert scan(back).error is None
