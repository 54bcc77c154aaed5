"""Header names of any bytes, as Kafka takes them (Java's DefaultRecord.readHeaders checks
nothing; Utils.utf8 decodes leniently): record.batch reads them (bytes that are not UTF-8
as surrogateescape's U+DC80..U+DCFF), builder.encode_headers gives back the same bytes, the
log cleaner compacts such records on a real Log directory, and the output kernel renders
them exactly as consume's per-record renderers (-f %h, -J with headers_encoding)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.log.cleaner import LogCleaner
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.record.batch import RecordBatch, RecordBatchBuilder
from kafkactl.record.builder import encode_headers
from tests.hypothesis_profiles import examples
from tests.record.test_render_kernel import _format, _json, check, compiled


def header_key_bytes(key: str) -> bytes:  # (record.batch's, here so old code fails on
    return key.encode("utf-8", "surrogateescape")  # reading, not on importing it)


NAMES = [b"h\xe9", b"\xff", b"\xed\xa0\x80", b"\xc3", b"a\x00b", b"\xf4\x90\x80\x80",
         "é".encode(), b"", b"plain"]


def _batch(headers: list[tuple[bytes, bytes | None]], key: bytes | None = b"k") -> bytes:
    """A batch whose one record has these raw header names (encode_headers takes bytes)."""
    b = RecordBatchBuilder()
    b.append(1_000, key, b"v", [(n, v) for n, v in headers])  # type: ignore[misc]
    return b.build()


@pytest.mark.parametrize("name", NAMES)
def test_a_header_name_of_any_bytes_reads_and_writes_back_the_same(name: bytes) -> None:
    raw = _batch([(name, b"v"), (b"x", None)])
    (rec,) = list(RecordBatch(memoryview(raw)))
    key, value = rec.headers[0]
    assert header_key_bytes(key) == name
    assert bytes(value) == b"v" and rec.headers[1] == ("x", None)
    from kafkactl.record.batch import header_key_text

    assert header_key_text(key) == name.decode("utf-8", "replace")  # Java's String
    # written again from what was read (the mirror, the cleaner): the same bytes
    again = RecordBatchBuilder()
    again.append(1_000, b"k", b"v", [(k, None if v is None else bytes(v))
                                     for k, v in rec.headers])
    assert again.build() == raw


@given(st.lists(st.tuples(st.binary(max_size=12), st.none() | st.binary(max_size=6)),
                max_size=4))
@settings(max_examples=examples(200), deadline=None)
def test_encode_headers_inverts_the_decoder(headers: list[tuple[bytes, bytes | None]]) -> None:
    (rec,) = list(RecordBatch(memoryview(_batch(headers))))
    assert [(header_key_bytes(k), None if v is None else bytes(v))
            for k, v in rec.headers] == headers
    assert encode_headers(rec.headers) == encode_headers(headers)  # type: ignore[arg-type]


def test_the_cleaner_compacts_records_with_such_names(tmp_path: Path) -> None:
    """Before, the cleaner logged "skipping unparseable batch" and kept every version."""
    config = LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": "65536",
                                        "min.cleanable.dirty.ratio": "0.01"})
    lg = Log(tmp_path / "hk-0", config)
    for i in range(3):
        lg.append(_batch([(b"h\xe9", b"%d" % i)], key=b"same"))
    lg.append(_batch([(b"\xff", b"other")], key=b"other"))
    lg.roll()
    lg.append(_batch([], key=b"active"))
    stats = LogCleaner().clean(lg, force=True)
    assert stats is not None and stats.records_out < stats.records_in
    left = [(r.offset, bytes(r.key), [(header_key_bytes(k), bytes(v)) for k, v in r.headers])
            for batch in lg.iter_batches() for r in batch]
    assert left == [(2, b"same", [(b"h\xe9", b"2")]), (3, b"other", [(b"\xff", b"other")]),
                    (4, b"active", [])]


@compiled
@pytest.mark.parametrize("name", NAMES)
def test_the_kernel_renders_such_names_as_the_reference(name: bytes) -> None:
    """-f %h prints the name's own bytes, -J base64s a name or value that is not UTF-8 and
    flags it in headers_encoding: the kernel as the per-record renderers (it used to
    decline the batch, leaving it to the reference, which raised)."""
    b = RecordBatch(memoryview(_batch([(name, b"v"), (b"x", b"\xe9"), (b"n", None),
                                       (b"e", b"")])))
    for pair in (_format("%h|%s\\n"), _json()):
        assert check(*pair, b, 0) is not None
    data, _n, _ends = _format("%h\\n")[1].render(b, 0, "t", 0)  # type: ignore[misc]
    assert data == name + b"=v,x=\xe9,n=NULL,e=\n"


@compiled
@given(st.lists(st.tuples(st.binary(max_size=8), st.none() | st.binary(max_size=6)),
                min_size=1, max_size=4))
@settings(max_examples=examples(300), deadline=None)
def test_the_kernel_agrees_on_any_header_bytes(headers: list[tuple[bytes, bytes | None]]
                                               ) -> None:
    b = RecordBatch(memoryview(_batch(headers)))
    for pair in (_format("%h|%k\\n"), _json()):
        assert check(*pair, b, 0) is not None
