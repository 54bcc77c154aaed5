"""RecordBatchBuilder.append_values must produce exactly what append() produces."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.record import Compression
from kafkactl.record.batch import RecordBatch, RecordBatchBuilder
from tests.hypothesis_profiles import examples

values_st = st.lists(st.binary(max_size=300), min_size=1, max_size=300)


@settings(max_examples=examples(60), deadline=None)
@given(values=values_st, split=st.integers(0, 300), ts=st.integers(0, 2**40))
def test_append_values_matches_append(values: list[bytes], split: int, ts: int) -> None:
    one = RecordBatchBuilder(producer_id=7, producer_epoch=1, base_sequence=3)
    for v in values:
        one.append(ts, None, v)
    bulk = RecordBatchBuilder(producer_id=7, producer_epoch=1, base_sequence=3)
    bulk.append_values(values[:split], ts)
    bulk.append_values(values[split:], ts)
    assert bulk.record_count == len(values)
    assert bulk.build() == one.build()


def test_append_values_mixed_with_append_and_other_timestamps() -> None:
    b = RecordBatchBuilder(compression=Compression.GZIP)
    b.append(1000, b"k", b"v0")
    b.append_values([b"v1", b"v2"], 1000)
    b.append_values([b"v3", None], 1005)  # different timestamp + tombstone: slow path
    batch = RecordBatch(memoryview(b.build()))
    assert batch.is_valid()
    recs = [(r.offset, r.timestamp, None if r.key is None else bytes(r.key),
             None if r.value is None else bytes(r.value)) for r in batch]
    assert recs == [(0, 1000, b"k", b"v0"), (1, 1000, None, b"v1"), (2, 1000, None, b"v2"),
                    (3, 1005, None, b"v3"), (4, 1005, None, None)]


def test_append_values_long_batch_beyond_cache() -> None:
    values = [bytes([i % 256]) * (i % 50) for i in range(10_000)]
    one = RecordBatchBuilder()
    for v in values:
        one.append(5, None, v)
    bulk = RecordBatchBuilder()
    bulk.append_values(values, 5)
    assert bulk.build() == one.build()
