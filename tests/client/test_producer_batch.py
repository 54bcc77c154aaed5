"""ProducerBatch encodes standard v2 batches; fast_values agrees with the general decoder."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from kafkactl.client.accumulator import RecordAccumulator
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.record.batch import RecordBatch
from kafkactl.record.codecs import Compression
from kafkactl.record.value_scan import fast_values
from tests.hypothesis_profiles import examples

records_st = st.lists(st.tuples(
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=9000)),
    st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
             max_size=2),
    st.integers(min_value=-5000, max_value=5000)), min_size=1, max_size=40)


@settings(max_examples=examples(60), deadline=None)
@given(records_st, st.sampled_from(list(Compression)))
def test_batch_decodes_with_kafka_python_and_our_reader(records, codec) -> None:
    b = ProducerBatch("t", 0, 1 << 22, timestamp=1_700_000_000_000)
    for key, value, headers, dts in records:
        assert b.append(1_700_000_000_000 + dts, key, value, headers) is not None
    b.set_producer_state(42, 3, 7)
    data = b.build(codec)
    kb = MemoryRecords(data).next_batch()
    assert kb.validate_crc() and kb.producer_id == 42 and kb.base_sequence == 7
    got = [(r.key, r.value, r.headers, r.timestamp) for r in kb]
    assert got == [(k, v, [(hk, hv) for hk, hv in h], 1_700_000_000_000 + d)
                   for k, v, h, d in records]
    ours = RecordBatch(memoryview(data))
    assert ours.is_valid() and ours.record_count == len(records)
    assert [None if r.value is None else bytes(r.value) for r in ours] == \
        [v for _, v, _, _ in records]


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.binary(max_size=20000), min_size=1, max_size=300),
       st.integers(min_value=0, max_value=50), st.sampled_from([Compression.NONE,
                                                                 Compression.LZ4]))
def test_fast_values_matches_general_decoder(values, start, codec) -> None:
    b = ProducerBatch("t", 0, 1 << 24)
    assert b.append_values(values) == len(values)
    batch = RecordBatch(memoryview(b.build(codec)))
    fast = fast_values(batch, start)
    assert fast is not None
    assert [bytes(v) for v in fast] == [bytes(r.value) for r in batch if r.offset >= start]


def test_fast_values_passes_keys_over_and_declines_headers() -> None:
    b = ProducerBatch("t", 0, 1 << 20)
    b.append(None, b"k", b"v")
    b.append(None, None, b"w")
    fast = fast_values(RecordBatch(memoryview(b.build())), 0)
    assert fast is not None and [bytes(v) for v in fast] == [b"v", b"w"]
    b = ProducerBatch("t", 0, 1 << 20)
    b.append(None, None, b"v", [("h", b"1")])
    assert fast_values(RecordBatch(memoryview(b.build())), 0) is None


def test_accumulator_batches_by_size_and_keeps_order() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=10_000, buffer_memory=1 << 20)
    acc.append_values("t", 0, [b"x" * 100] * 30, entries=True)
    dq = acc.batches[("t", 0)]
    assert len(dq) >= 3 and all(b.size <= 1000 for b in dq)
    assert sum(b.record_count for b in dq) == 30
    ready, _ = acc.ready(0.0, lambda tp: True)
    assert ready == [("t", 0)]  # full batches are ready before linger.ms
    first = acc.pop_head(("t", 0))
    assert first is not None
    first.set_producer_state(1, 0, 0)
    acc.reenqueue(first)  # a retried batch goes back in front
    assert acc.batches[("t", 0)][0] is first


def test_accumulator_backpressure_times_out() -> None:
    import pytest

    from kafkactl.client.errors import KafkaTimeoutError

    acc = RecordAccumulator(batch_size=1000, linger_ms=0, buffer_memory=2000, max_block_ms=200)
    acc.append_values("t", 0, [b"x" * 900] * 2)
    with pytest.raises(KafkaTimeoutError, match="buffer.memory"):
        acc.append_values("t", 0, [b"x" * 900])


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(min_value=0, max_value=300),
                          st.integers(min_value=1, max_value=400)), min_size=1, max_size=6),
       st.integers(min_value=200, max_value=60_000), st.integers(min_value=0, max_value=3))
def test_uniform_runs_fill_batches_exactly_like_the_record_loop(runs, batch_size, pre) -> None:
    """Runs of equal-length values take the interleaving path; the batches it fills must
    hold the same records, decode the same and respect batch.size like the loop does."""
    values = [bytes([65 + r % 26]) * vlen + b"%d" % (i % 10)
              for r, (vlen, count) in enumerate(runs) for i in range(count)]
    acc = RecordAccumulator(batch_size=batch_size, linger_ms=10_000, buffer_memory=1 << 30)
    for v in values[:pre]:  # a batch that already holds records from the general path
        acc.append("t", 0, None, None, v, ())
    acc.append_values("t", 0, values[pre:])
    got: list[bytes] = []
    for b in acc.batches[("t", 0)]:
        data = b.build()
        assert len(data) == b.size
        assert b.size <= batch_size or b.record_count == 1
        batch = RecordBatch(memoryview(data))
        assert batch.is_valid() and batch.record_count == b.record_count
        assert [r.offset for r in batch] == list(range(b.record_count))
        assert all(r.key is None and r.headers == [] for r in batch)
        got += [bytes(r.value) for r in batch]
        kb = MemoryRecords(data).next_batch()
        assert kb.validate_crc() and [r.value for r in kb] == got[-b.record_count:]
    assert got == values


def test_uniform_run_fills_a_batch_to_the_byte() -> None:
    b = ProducerBatch("t", 0, 100_000)
    values = [b"v" * 100] * 5000
    n = b.append_values(values)
    assert 900 < n < 5000  # the batch filled up: the remaining values wait for the next
    assert b.size <= 100_000 < b.size + 104  # one more 100-byte record would not fit
    assert b.append_values(values, n) == n
    assert len(b.build()) == b.size


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=200)),
                          st.binary(max_size=20_000)), min_size=1, max_size=200),
       st.integers(min_value=100, max_value=200_000))
def test_key_values_path_matches_the_general_encoder(pairs, batch_size) -> None:
    """append_key_values (the CLI's -K path) must fill batches with exactly the records
    the general append would write, readable by kafka-python and our reader."""
    keys = [k for k, _ in pairs]
    values = [v for _, v in pairs]
    acc = RecordAccumulator(batch_size=batch_size, linger_ms=10_000, buffer_memory=1 << 30)
    acc.append_key_values("t", 0, keys, values, entries=list(range(len(pairs))))
    got, entries = [], []
    for b in acc.batches[("t", 0)]:
        data = b.build()
        assert len(data) == b.size
        assert b.size <= batch_size or b.record_count == 1
        ours = RecordBatch(memoryview(data))
        assert ours.is_valid() and [r.offset for r in ours] == list(range(b.record_count))
        kb = MemoryRecords(data).next_batch()
        assert kb.validate_crc()
        got += [(r.key, r.value) for r in kb]
        assert [(None if r.key is None else bytes(r.key), bytes(r.value)) for r in ours] == \
            got[-b.record_count:]
        entries += b.entries
    assert got == pairs
    assert entries == list(range(len(pairs)))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=300)),
                          st.one_of(st.none(), st.binary(max_size=9000))),
                min_size=1, max_size=60),
       st.integers(min_value=0, max_value=70), st.sampled_from([Compression.NONE,
                                                                Compression.ZSTD]))
def test_fast_key_values_matches_general_decoder(pairs, start, codec) -> None:
    from kafkactl.record.value_scan import fast_key_values

    b = ProducerBatch("t", 0, 1 << 24)
    for k, v in pairs:
        assert b.append(None, k, v) is not None
    batch = RecordBatch(memoryview(b.build(codec)))
    found = fast_key_values(batch, start)
    assert found is not None
    keys, values = found
    general = [r for r in batch if r.offset >= start]
    assert [None if k is None else bytes(k) for k in keys] == \
        [None if r.key is None else bytes(r.key) for r in general]
    assert [None if v is None else bytes(v) for v in values] == \
        [None if r.value is None else bytes(r.value) for r in general]


def test_fast_key_values_declines_headers() -> None:
    from kafkactl.record.value_scan import fast_key_values

    b = ProducerBatch("t", 0, 1 << 20)
    b.append(None, b"k", b"v", [("h", b"1")])
    assert fast_key_values(RecordBatch(memoryview(b.build())), 0) is None
