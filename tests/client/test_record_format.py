"""BatchFormat (a -f format over a whole batch) against the per-record render of the same
format (cli.consume.compile_format): the same bytes for every token it takes, from any start
offset, with null and empty keys and values; None for the batches and formats it leaves to
the per-record path."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.cli.consume import compile_batch_format, compile_format
from kafkactl.client.fetcher import ConsumerRecord
from kafkactl.record.batch import RecordBatch, RecordBatchBuilder
from kafkactl.record.codecs import Compression
from tests.hypothesis_profiles import examples

FORMATS = ["%k\\t%s\\n", "%s\\n", "%o %p %t %K %S %k=%s\\n", "x%%%s|%k\\n", "%t\\n",
           "%k%s\\n", "[%o]\\n", "%S:%K\\n", "%p%%%t %s\\n"]


def batch(records: list[tuple[bytes | None, bytes | None]], base: int = 0,
          codec: Compression = Compression.NONE, headers: bool = False) -> RecordBatch:
    b = RecordBatchBuilder(compression=codec, base_offset=base)
    for i, (k, v) in enumerate(records):
        b.append(1_700_000_000_000 + i, k, v, [("h", None)] if headers else ())
    return RecordBatch(memoryview(b.build()))


def per_record(fmt: str, b: RecordBatch, start: int) -> bytes:
    render = compile_format(fmt)
    return b"".join(render(ConsumerRecord("lines", 3, r.offset, r.timestamp, 0, r.key,
                                          r.value, r.headers)) for r in b if r.offset >= start)


def check(fmt: str, b: RecordBatch, start: int) -> None:
    form = compile_batch_format(fmt)
    assert form is not None
    got = form.render(b, start, "lines", 3)
    assert got is not None
    assert got == (per_record(fmt, b, start), sum(1 for r in b if r.offset >= start))


field = st.one_of(st.none(), st.binary(max_size=60), st.sampled_from([b"", b"\n", b"%s"]))


@settings(max_examples=examples(100))
@given(st.sampled_from(FORMATS), st.lists(st.tuples(field, field), min_size=1, max_size=30),
       st.integers(min_value=0, max_value=35), st.integers(min_value=0, max_value=1 << 40),
       st.sampled_from([Compression.NONE, Compression.ZSTD]))
def test_batch_render_is_the_per_record_render(fmt, records, skip, base, codec) -> None:
    check(fmt, batch(records, base, codec), base + skip)


@pytest.mark.parametrize("fmt", FORMATS)
def test_many_lengths_and_offset_widths(fmt: str) -> None:
    records = [(None if i % 9 == 0 else b"10.0.%d.%d" % (i % 256, i % 7),
                None if i % 13 == 0 else b"y" * (50 + i * 37 % 450)) for i in range(9000)]
    b = batch(records, base=123)
    for start in (0, 123, 123 + 64, 123 + 8192, 123 + 8999):
        check(fmt, b, start)


def test_left_to_the_per_record_path() -> None:
    assert compile_batch_format("%T %s\\n") is None  # a token only a record renders
    assert compile_batch_format("%h %s\\n") is None
    assert compile_batch_format("%s") is None  # records not ending with a newline
    form = compile_batch_format("%k %s\\n")
    assert form is not None
    assert form.render(batch([(b"k", b"v")], headers=True), 0, "t", 0) is None


@settings(max_examples=examples(100))
@given(st.sampled_from(FORMATS), st.lists(st.tuples(field, field), min_size=1, max_size=30),
       st.sampled_from([b"NULL", b"null", b"\x00", b"%s", b""]),
       st.integers(min_value=0, max_value=35))
def test_a_null_text_is_the_per_record_render(fmt, records, null, skip) -> None:
    """consume -Z / --null-literal: the batch path prints a null key or value as the
    per-record path does."""
    b = batch(records)
    form = compile_batch_format(fmt, null)
    assert form is not None
    render = compile_format(fmt, null)
    want = b"".join(render(ConsumerRecord("lines", 3, r.offset, r.timestamp, 0, r.key,
                                          r.value, r.headers)) for r in b if r.offset >= skip)
    assert form.render(b, skip, "lines", 3) == (want, sum(1 for r in b if r.offset >= skip))


def test_the_null_text_stands_for_null_only() -> None:
    b = batch([(None, b"v"), (b"k", None), (b"", b""), (None, None)])
    for form in (compile_batch_format("%k|%s|%K|%S\\n", b"NULL"),):
        assert form is not None
        assert form.render(b, 0, "lines", 3) == (
            b"NULL|v|-1|1\nk|NULL|1|-1\n||0|0\nNULL|NULL|-1|-1\n", 4)
