"""record.uniform: the fixed-size line layout, checked against the general v2 builder and
reader. The decoder must never disagree with RecordBatch: any section it accepts decodes to
the same values record by record; everything else it declines."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.record.batch import RecordBatch, RecordBatchBuilder
from kafkactl.record.uniform import MIN_RUN, layout_for, uniform_values
from tests.hypothesis_profiles import examples

TS = 1_700_000_000_000


def _batch(values: list[bytes]) -> RecordBatch:
    builder = RecordBatchBuilder()
    builder.append_values(values, TS)
    return RecordBatch(memoryview(builder.build()))


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(min_value=0, max_value=300), st.integers(min_value=MIN_RUN, max_value=300))
def test_layout_is_the_builders_encoding(value_size: int, count: int) -> None:
    values = [bytes([i % 251]) * value_size for i in range(count)]
    batch = _batch(values)
    section = bytes(batch.records_section())
    assert b"".join(layout_for(value_size).encode(values, 0)) == section
    assert layout_for(value_size).ends[count] == len(section)
    assert uniform_values(section, count) == tuple(values)


def test_offset_deltas_past_one_byte_varints() -> None:
    values = [b"%09d" % i for i in range(9000)]  # deltas 64.. and 8192.. need longer varints
    section = bytes(_batch(values).records_section())
    assert uniform_values(section, len(values)) == tuple(values)


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(min_value=1, max_value=40), st.integers(min_value=MIN_RUN, max_value=60),
       st.data())
def test_a_changed_byte_is_declined_or_decoded_like_the_general_reader(
        value_size: int, count: int, data: st.DataObject) -> None:
    values = [b"v" * value_size for _ in range(count)]
    raw = bytearray(_batch(values).records_section())
    pos = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    raw[pos] = data.draw(st.integers(min_value=0, max_value=255))
    got = uniform_values(bytes(raw), count)
    if got is None:
        return
    # Accepted: the change was inside a value (or a no-op); the general reader agrees.
    builder = RecordBatchBuilder()
    builder.append_values(list(got), TS)
    assert bytes(RecordBatch(memoryview(builder.build())).records_section()) == bytes(raw)


def test_declines_other_shapes() -> None:
    values = [b"x" * 10] * 40
    section = bytes(_batch(values).records_section())
    assert uniform_values(section, 39) is None  # wrong count
    assert uniform_values(section[:-1], 40) is None  # truncated
    assert uniform_values(section, 8) is None  # short runs take the loop
    keyed = RecordBatchBuilder()
    for v in values:
        keyed.append(TS, b"k", v)
    assert uniform_values(bytes(RecordBatch(memoryview(keyed.build())).records_section()),
                          40) is None
    stamped = RecordBatchBuilder()
    for i, v in enumerate(values):
        stamped.append(TS + i, None, v)  # timestamp deltas differ
    assert uniform_values(bytes(RecordBatch(memoryview(stamped.build())).records_section()),
                          40) is None
    mixed = [b"x" * 10] * 20 + [b"y" * 11] * 20
    assert uniform_values(bytes(_batch(mixed).records_section()), 40) is None


def test_varying_lengths_build_no_tables() -> None:
    """Sections and value runs whose lengths vary are turned away before a layout is
    built (building one per length thrashed the cache and cost ~10 ms per batch)."""
    from kafkactl.client.producer_batch import ProducerBatch
    from kafkactl.record import uniform

    uniform._LAYOUTS.clear()
    values = [b"v" * (50 + (i * 37) % 101) for i in range(2000)]
    assert uniform_values(bytes(_batch(values).records_section()), len(values)) is None
    batch = ProducerBatch("t", 0, 1 << 20)
    assert batch.append_values(values) == len(values)
    assert uniform._LAYOUTS == {}
    same = [b"s" * 77] * 100
    assert uniform_values(bytes(_batch(same).records_section()), 100) == tuple(same)
    assert list(uniform._LAYOUTS) == [77]
    assert len(uniform._LAYOUTS[77].heads) == 100  # grown as far as it was used
