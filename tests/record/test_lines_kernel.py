"""`encode_lines_into`: the producer's records of delimited lines straight from the input
buffer into the batch's buffer (record/columns.py `encode_lines_into_py`, the definition,
and its compiled twin in record/_kernels.pyx). The reference is checked against the other
encoders and the batch reader; the twin against the reference on the same inputs: the lines
users pipe (seq, yes, log lines, JSON, binary, empty and huge lines), every delimiter and
key separator shape, cuts anywhere, offset deltas at every varint width, output offsets,
and room one below, at and one above the exact size of the first k records. Same result
and the same bytes in the whole output buffer (nothing written outside the records), or
the same error class and message. Under KAFKACTL_NO_EXTENSIONS=1 the twin comparisons
skip."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.record import _accel, columns
from kafkactl.record.batch import RecordBatch, assemble_batch, encode_record
from kafkactl.record.builder import encode_headers
from kafkactl.record.columns import encode_lines_into_py
from tests.hypothesis_profiles import examples

kernels = _accel.kernels
compiled = pytest.mark.skipif(kernels is None, reason=f"pure Python: {_accel.REASON}")

# data, pos, end, delimiter, key separator, first offset delta, output size, output offset
Case = tuple[bytes, int, int, bytes, bytes | None, int, int, int]
Result = tuple[int, int, int]
FILL = 0xA5  # what the output buffer holds before: left as it is outside the records


def test_the_switch_picks_the_twin_unless_told_not_to() -> None:
    if kernels is None:
        assert columns.encode_lines_into is encode_lines_into_py
    else:
        assert columns.encode_lines_into is kernels.encode_lines_into


def _encode(data: bytes, delim: bytes, ksep: bytes | None, first_delta: int, room: int,
            offset: int = 0, fn: Callable[..., Result] = encode_lines_into_py
            ) -> tuple[bytes, int, int, int]:
    """(records, position after them, count, size) of the lines of `data` encoded into
    `room` bytes at `offset`; the buffer's other bytes are checked untouched."""
    out = bytearray([FILL]) * (offset + room)
    after, count, used = fn(data, 0, len(data), delim, ksep, first_delta, out, offset)
    written = used if count else 0
    assert out[:offset] == bytearray([FILL]) * offset
    assert out[offset + written:] == bytearray([FILL]) * (room - written)
    return bytes(out[offset:offset + written]), after, count, used


def _enough(data: bytes) -> int:
    """Room for every line of `data` as a record (a record adds at most 24 bytes)."""
    return len(data) + 24 * (len(data) + 1)


def _split(data: bytes, delim: bytes, ksep: bytes | None
           ) -> list[tuple[bytes | None, bytes]]:
    """The definition in other words: lines as bytes.split gives them (no empty line after
    a final delimiter), keys as bytes.partition splits them."""
    if not data:
        return []
    lines = data.split(delim)
    if data.endswith(delim):
        lines.pop()
    out: list[tuple[bytes | None, bytes]] = []
    for line in lines:
        if ksep is not None and ksep in line:
            k, _, v = line.partition(ksep)
            out.append((k, v))
        else:
            out.append((None, line))
    return out


def _decode(records: bytes, count: int, first_delta: int) -> list[tuple[bytes | None, bytes]]:
    """The records read back by the batch reader (offset deltas checked)."""
    if not count:
        assert records == b""
        return []
    head = b"".join(encode_record(d, 0, None, b"") for d in range(first_delta))
    batch = assemble_batch(head + records, attributes=0,
                           last_offset_delta=first_delta + count - 1, base_timestamp=0,
                           max_timestamp=0, producer_id=-1, producer_epoch=-1,
                           base_sequence=-1, record_count=first_delta + count)
    got = list(RecordBatch(memoryview(batch)))[first_delta:]
    assert [r.offset for r in got] == list(range(first_delta, first_delta + count))
    assert all(r.timestamp == 0 and not r.headers for r in got)
    return [(None if r.key is None else bytes(r.key), bytes(r.value or b"")) for r in got]


def _lines(kind: str, n: int, rng: random.Random) -> list[bytes]:
    if kind == "seq":
        return [b"%d" % i for i in range(1, n + 1)]
    if kind == "yes":
        return [b"y"] * n
    if kind == "empty":
        return [b""] * n
    if kind == "log":
        return [b"10.%d.%d.%d - - [27/Nov/2026] \"GET /%s HTTP/1.1\" 200 %d"
                % (rng.randrange(256), rng.randrange(256), rng.randrange(256),
                   b"p" * rng.randrange(300), rng.randrange(99999)) for _ in range(n)]
    if kind == "json":
        return [b'{"id":%d,"user":"u%d","props":{"a":"%s"}}'
                % (i, rng.randrange(10**6), b"x" * rng.randrange(200)) for i in range(n)]
    if kind == "binary":
        return [bytes(rng.randrange(256) for _ in range(rng.randrange(40))).replace(b"\n", b"")
                for _ in range(n)]
    if kind == "huge":
        return [b"h" * rng.choice([63, 64, 8191, 8192, 16351, 16352, 70_000, 2_100_000])
                for _ in range(n)]
    raise ValueError(kind)


KINDS = ["seq", "yes", "empty", "log", "json", "binary", "huge"]


# ---- the reference, in other words ------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ksep", [None, b" ", b"::"])
@pytest.mark.parametrize("terminated", [True, False])
def test_the_reference_reads_back_as_split_lines(kind: str, ksep: bytes | None,
                                                 terminated: bool) -> None:
    rng = random.Random(kind)
    data = b"\n".join(_lines(kind, 4 if kind == "huge" else 300, rng))
    data += b"\n" if terminated else b""
    out, after, count, _ = _encode(data, b"\n", ksep, 0, _enough(data), offset=61)
    assert after == len(data)
    assert _decode(out, count, 0) == _split(data, b"\n", ksep)


@pytest.mark.parametrize("kind", ["seq", "yes", "log", "json"])
def test_the_reference_makes_the_column_encoders_bytes(kind: str) -> None:
    """Where the table encoders apply (short lines, deltas in the tables), the same bytes."""
    lines = _lines(kind, 500, random.Random(kind))
    data = b"".join(line + b"\n" for line in lines)
    for first_delta in (0, 1, 63, 64, 8191, 8192):
        parts, i, used = columns.encode_values_py(lines, 0, first_delta, 1 << 30)
        assert i == len(lines)
        assert _encode(data, b"\n", None, first_delta, _enough(data)) == (
            b"".join(parts), len(data), len(lines), used)
        keyed = [line.partition(b" ") for line in lines]
        keys = [k if sep else None for k, sep, _ in keyed]
        values = [v if sep else line for (_, sep, v), line in zip(keyed, lines, strict=True)]
        parts, i, _ = columns.encode_key_values_py(keys, values, 0, first_delta, 1 << 30)
        assert _encode(data, b"\n", b" ", first_delta, _enough(data))[0] == b"".join(parts)


def test_the_reference_fills_room_to_the_record_that_does_not_fit() -> None:
    data = b"aaaa\nbb\ncccccc\n"
    sizes = [len(encode_record(d, 0, None, v)) for d, v in enumerate([b"aaaa", b"bb"])]
    # a first line that does not fit: nothing written, and the size it needs
    assert _encode(data, b"\n", None, 0, 0)[1:] == (0, 0, sizes[0])
    assert _encode(data, b"\n", None, 0, sizes[0] - 1, offset=3)[1:] == (0, 0, sizes[0])
    assert _encode(data, b"\n", None, 0, sizes[0])[1:] == (5, 1, sizes[0])
    room = sizes[0] + sizes[1]
    assert _encode(data, b"\n", None, 0, room - 1)[1:] == (5, 1, sizes[0])
    assert _encode(data, b"\n", None, 0, room)[1:] == (8, 2, room)
    assert _encode(data, b"\n", None, 0, room + 1, offset=61)[1:] == (8, 2, room)
    assert _encode(b"", b"\n", None, 0, 0) == (b"", 0, 0, 0)


def test_the_reference_writes_only_into_a_writable_buffer() -> None:
    with pytest.raises(BufferError, match="not writable"):
        encode_lines_into_py(b"a\n", 0, 2, b"\n", None, 0,
                             bytes(100), 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="offset 101 must satisfy"):
        encode_lines_into_py(b"a\n", 0, 2, b"\n", None, 0, bytearray(100), 101)


# ---- the twin against the reference -----------------------------------------------------

def _same(case: Case) -> None:
    data, pos, end, delim, ksep, first_delta, size, offset = case
    assert kernels is not None
    want_out = bytearray([FILL]) * size
    try:
        want = encode_lines_into_py(data, pos, end, delim, ksep, first_delta, want_out, offset)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            kernels.encode_lines_into(data, pos, end, delim, ksep, first_delta,
                                      bytearray(size), offset)
        assert str(got.value) == str(e)
        return
    out = bytearray([FILL]) * size
    assert kernels.encode_lines_into(data, pos, end, delim, ksep, first_delta, out,
                                     offset) == want
    assert out == want_out
    # any buffer: bytearray and memoryview slices give the same
    whole = bytearray([FILL]) * (size + 8)
    view = memoryview(whole)[4:-4]
    assert kernels.encode_lines_into(bytearray(data), pos, end, delim, ksep, first_delta,
                                     view, offset) == want
    assert view == want_out and whole[:4] == whole[-4:] == bytearray([FILL]) * 4
    assert kernels.encode_lines_into(memoryview(data), pos, end, memoryview(delim),
                                     None if ksep is None else bytearray(ksep), first_delta,
                                     bytearray(size), offset) == want


def _room_case(data: bytes, delim: bytes, ksep: bytes | None, first_delta: int, room: int,
               offset: int = 0) -> Case:
    return data, 0, len(data), delim, ksep, first_delta, offset + room, offset


DELIMS = [b"\n", b"\x00", b"\r\n", b"ab", b"aa", b","]
SEPS = [None, b" ", b",", b"\t", b"::", b"a", b"\n"]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    delim = draw(st.sampled_from(DELIMS))
    ksep = draw(st.sampled_from(SEPS))
    lines = draw(st.lists(
        st.binary(max_size=20) | st.sampled_from([b"", b"a", b"aa", b"a b", b"k,v", b"::",
                                                  b"\r", b"x" * 63, b"x" * 64, b"y" * 200]),
        max_size=30))
    data = delim.join(lines) + draw(st.sampled_from([b"", delim, delim * 2]))
    pos = draw(st.integers(0, len(data)))
    end = draw(st.integers(pos, len(data)))
    first_delta = draw(st.sampled_from([0, 1, 2, 63, 64, 65, 8191, 8192, 16383, 16384,
                                        1 << 20]))
    offset = draw(st.sampled_from([0, 1, 61]))
    room = draw(st.integers(0, 400) | st.just(_enough(data)))
    return data, pos, end, delim, ksep, first_delta, offset + room, offset


@compiled
@settings(max_examples=examples(600))
@given(cases())
def test_twins_agree(case: Case) -> None:
    _same(case)


@compiled
@settings(max_examples=examples(300))
@given(st.binary(max_size=200), st.integers(-3, 210), st.integers(-3, 210),
       st.binary(max_size=3), st.none() | st.binary(max_size=3), st.integers(-2, 70),
       st.integers(0, 300), st.integers(-3, 310))
def test_twins_agree_on_any_arguments(data: bytes, pos: int, end: int, delim: bytes,
                                      ksep: bytes | None, first_delta: int, size: int,
                                      offset: int) -> None:
    """Out-of-range positions and offsets, empty separators, negative deltas: the same
    error."""
    _same((data, pos, end, delim, ksep, first_delta, size, offset))


HEADER_SETS: list[list[tuple[str, bytes | None]]] = [
    [], [("a", b"b")], [("source", None)], [("", b"")], [("k", b"v" * 63)],
    [("k", b"v" * 64)], [("é", b"\x00\xff"), ("n", None), ("z", b"y" * 200)]]


@compiled
@settings(max_examples=examples(300))
@given(cases(), st.sampled_from(HEADER_SETS))
def test_twins_agree_with_a_header_section(case: Case,
                                           headers: list[tuple[str, bytes | None]]) -> None:
    """Every record with the same headers (`produce -H`): the same bytes as the reference
    (whose records are `encode_record`'s with the section), headers read back."""
    data, pos, end, delim, ksep, first_delta, size, offset = case
    assert kernels is not None
    section = encode_headers(headers)
    want_out = bytearray([FILL]) * size
    try:
        want = encode_lines_into_py(data, pos, end, delim, ksep, first_delta, want_out,
                                    offset, section)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            kernels.encode_lines_into(data, pos, end, delim, ksep, first_delta,
                                      bytearray(size), offset, section)
        assert str(got.value) == str(e)
        return
    out = bytearray([FILL]) * size
    assert kernels.encode_lines_into(data, pos, end, delim, ksep, first_delta, out, offset,
                                     bytearray(section)) == want
    assert out == want_out
    if want[1]:  # the first record read back carries the headers
        rec = RecordBatch(memoryview(assemble_batch(
            bytes(want_out[offset:offset + want[2]]), attributes=0,
            last_offset_delta=first_delta + want[1] - 1, base_timestamp=0, max_timestamp=0,
            producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=want[1])))
        assert [(h, None if v is None else bytes(v)) for h, v in next(iter(rec)).headers] \
            == headers


@compiled
def test_the_twin_writes_only_into_a_writable_buffer() -> None:
    assert kernels is not None
    with pytest.raises(BufferError, match="not writable"):
        kernels.encode_lines_into(b"a\n", 0, 2, b"\n", None, 0, bytes(100), 0)


@compiled
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ksep", [None, b" ", b"\""])
@pytest.mark.parametrize("first_delta", [0, 63, 8191, 16383])
def test_twins_agree_on_piped_lines_at_every_room_edge(kind: str, ksep: bytes | None,
                                                       first_delta: int) -> None:
    """Room one below, at and one above the exact size of the first k records, for k at
    both ends and in the middle."""
    rng = random.Random(kind)
    lines = _lines(kind, 5 if kind == "huge" else 400, rng)
    data = b"\n".join(lines) + b"\n"
    for k in sorted({1, 2, len(lines) // 2, len(lines) - 1, len(lines)}):
        size = _size_of_first(data, ksep, first_delta, k)
        for room in (size - 1, size, size + 1):
            _same(_room_case(data, b"\n", ksep, first_delta, room, offset=61))
            _, _, count, used = _encode(data, b"\n", ksep, first_delta, room)
            assert count == (k - 1 if room < size else k)
            if count == 0:  # the first line did not fit: what it needs
                assert used == size


def _size_of_first(data: bytes, ksep: bytes | None, first_delta: int, k: int) -> int:
    """Bytes of the first k records (the reference, line by line)."""
    size = 0
    for i, (key, value) in enumerate(_split(data, b"\n", ksep)[:k]):
        size += len(encode_record(first_delta + i, 0, key, value))
    return size


@compiled
def test_twins_agree_on_a_huge_first_line_and_long_runs() -> None:
    huge = b"z" * 3_000_000
    for data in (huge, huge + b"\n", b"a\n" + huge + b"\nb\n", b"\n" * 200_000,
                 b"y\n" * 300_000, b"".join(b"%d\n" % i for i in range(200_000))):
        for ksep in (None, b"z", b"\n"):
            for first_delta, room in ((0, 0), (0, 1 << 20), (1, 1 << 20),
                                      (0, _enough(data)), (16383, 1 << 20),
                                      (100_000, 1 << 21)):
                _same(_room_case(data, b"\n", ksep, first_delta, room, offset=61))
