"""The consumer's output kernel (`render` in kafkactl/record/_kernels.pyx, through
client.record_format.KernelFormat) against its definition, the per-record renderers of
`kafkactl consume` (cli.consume.compile_format for -f, -K and --print-offsets; json_renderer
for -J; topic_reader.plain_renderer for plain output) over record.batch's iterator.

On the same batch the kernel gives the same bytes as the per-record render joined, the same
number of records, and the end of each record in those bytes (what the RecordWriter counts a
cut write by); where the reference raises (a malformed batch), the kernel declines (None) and
the caller's per-record path raises the reference's error itself. Inputs: valid batches of
every shape (null, empty, binary, non-UTF-8 and escaped keys and values, headers, both
timestamp types, compressed), the inputs users pipe (seq, yes, log lines, binary, empty and
huge lines), the edges of the varint and int64 limits (one below, at, one above), and
malformed sections (flipped, cut, inserted bytes, lying lengths, over-long varints).

Under KAFKACTL_NO_EXTENSIONS=1 KernelFormat is never made (checked here); the rest skip."""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable
from itertools import accumulate
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.cli._client_options import unescape
from kafkactl.cli.consume import TOKEN, compile_format, json_renderer
from kafkactl.client.fetcher import ConsumerRecord
from kafkactl.client.record_format import KernelFormat
from kafkactl.client.topic_reader import plain_renderer
from kafkactl.record import _accel
from kafkactl.record.batch import RecordBatch, RecordBatchBuilder
from kafkactl.record.codecs import Compression
from kafkactl.record.varint import encode_varint, encode_varlong
from tests.hypothesis_profiles import examples
from tests.record.test_kernels import PIPED, _lines

kernels = _accel.kernels
compiled = pytest.mark.skipif(kernels is None, reason=f"pure Python: {_accel.REASON}")

TOPIC, PARTITION, BROKER = "lines", 3, 2
TS = 1_700_000_000_000

FORMATS = ["%s\\n", "%k\\t%s\\n", "%o %p %t %K %S %k=%s\\n", "x%%%s|%k\\n", "%t\\n",
           "%k%s\\n", "[%o]\\n", "%S:%K\\n", "%p%%%t %s\\n", "%T %s\\n", "%h|%s\\n",
           "%R%s", "%s", "", "%k %T %h %o\\n", "%s\\x00", "%K%R%k%S%s"]
Renderer = Callable[[ConsumerRecord], bytes]


def _format(fmt: str) -> tuple[Renderer, KernelFormat]:
    raw = unescape(fmt)
    form = KernelFormat.compile(TOKEN.split(raw), [t[1:2] for t in TOKEN.findall(raw)])
    assert form is not None
    return compile_format(fmt), form


def _json() -> tuple[Renderer, KernelFormat]:
    form = KernelFormat.json(lambda t, p: BROKER)
    assert form is not None
    return json_renderer(lambda t, p: BROKER), form


def _pair(name: str) -> tuple[Renderer, KernelFormat]:
    return _json() if name == "-J" else _format(name)


def _plain(sep: bytes | None) -> tuple[Renderer, KernelFormat]:
    form = KernelFormat.compile([b"", sep, b"\n"] if sep is not None else [b"", b"\n"],
                                [b"k", b"s"] if sep is not None else [b"s"])
    assert form is not None
    return plain_renderer(sep), form


def _reference(render: Renderer, b: RecordBatch, start: int) -> list[bytes] | None:
    """The per-record render of every record from `start`, or None where it raises."""
    tstype = int(b.timestamp_type)
    try:
        return [render(ConsumerRecord(TOPIC, PARTITION, r.offset, r.timestamp, tstype, r.key,
                                      r.value, r.headers)) for r in b if r.offset >= start]
    except Exception:
        return None


def check(render: Renderer, form: KernelFormat, b: RecordBatch, start: int,
          must_render: bool = True) -> Any:
    want = _reference(render, b, start)
    got = form.render(b, start, TOPIC, PARTITION)
    if want is None:
        assert got is None  # the per-record path raises the reference's error itself
        return None
    if got is None:
        assert not must_render, "the kernel declined a batch the reference renders"
        return None
    data, n, ends = got
    assert data == b"".join(want)
    assert n == len(want)
    assert list(ends) == list(accumulate(map(len, want)))
    return got


def build(records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
          base: int = 0, codec: Compression = Compression.NONE, log_append: bool = False
          ) -> RecordBatch:
    b = RecordBatchBuilder(compression=codec, base_offset=base, timestamp_type=int(log_append))
    for ts, k, v, h in records:
        b.append(TS + ts, k, v, h)
    return RecordBatch(memoryview(b.build()))


def with_section(b: RecordBatch, section: bytes, count: int | None = None,
                 base_ts: int | None = None) -> RecordBatch:
    """`b` with its records section replaced (lengths fixed up, CRC not: render does not
    check it; the reader does, before)."""
    head = bytearray(bytes(b._buf[b.position:b.position + 61]))
    struct.pack_into(">i", head, 8, 49 + len(section))
    if count is not None:
        struct.pack_into(">i", head, 57, count)
    if base_ts is not None:
        struct.pack_into(">q", head, 27, base_ts)
    return RecordBatch(memoryview(bytes(head) + section))


def record(ts_delta: int, off_delta: int, key: bytes | None, value: bytes | None,
           headers: bytes = b"\x00", raw_len: bytes | None = None) -> bytes:
    """One record's bytes, written by hand (for deltas and lengths the builder refuses)."""
    def field(x: bytes | None) -> bytes:
        return encode_varint(-1) if x is None else encode_varint(len(x)) + x
    body = b"\x00" + encode_varlong(ts_delta) + encode_varint(off_delta) + field(key) + \
        field(value) + headers
    return (raw_len if raw_len is not None else encode_varint(len(body))) + body


# ---- strategies ---------------------------------------------------------------------------------

text = st.one_of(st.binary(max_size=40),
                 st.text(max_size=20).map(lambda s: s.encode("utf-8", "surrogatepass")),
                 st.sampled_from([b"", b"\n", b"%s", b'"\\', b"\x00\x1f\x7f", b"\xe2\x80\xa8",
                                  b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80",
                                  b"\xf0\x90\x80\x80", b"\xe0\x9f\xbf", b"\xc3", b"\xc3\xa9",
                                  b"\xef\xbf\xbf"]),
                 st.sampled_from([63, 64, 65, 8191, 8192, 8193]).map(lambda n: b"z" * n))
field = st.none() | text
header = st.tuples(st.sampled_from(["", "a", "bc", "é", '"\n', "k=v"]), field)
records = st.lists(st.tuples(st.integers(-(1 << 40), 1 << 40) | st.integers(0, 63), field,
                             field, st.lists(header, max_size=3) | st.just([])),
                   min_size=1, max_size=25)
renderers = st.one_of(st.sampled_from([*FORMATS, "-J"]).map(_pair),
                      st.sampled_from([None, b"\t", b"", b" => "]).map(_plain))


@compiled
@settings(max_examples=examples(300))
@given(renderers, records, st.integers(0, 30), st.integers(0, 1 << 40),
       st.sampled_from([Compression.NONE, Compression.GZIP]), st.booleans())
def test_render_is_the_per_record_render(pair: tuple[Renderer, KernelFormat],
                                         recs: list[Any], skip: int, base: int,
                                         codec: Compression, log_append: bool) -> None:
    render, form = pair
    b = build(recs, base, codec, log_append)
    check(render, form, b, base + skip)


@compiled
@st.composite
def damaged(draw: st.DrawFn) -> tuple[bytes, int]:
    """A valid section with up to three bytes flipped, cut, inserted or lying, and a count
    that is right or one off."""
    recs = draw(records)
    section = bytearray(build(recs).records_section())
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "lie"]))
        at = draw(st.integers(0, max(len(section) - 1, 0)))
        if kind == "flip" and section:
            section[at] = draw(st.integers(0, 255))
        elif kind == "cut" and section:
            del section[at:at + draw(st.integers(1, 40))]
        elif kind == "lie" and section:
            section[at:at + 1] = draw(st.sampled_from(
                [b"\xff" * 5 + b"\x01", b"\x80\x80\x80\x80\x00", b"\xfe\xff\xff\xff\x0f",
                 b"\xff" * 9 + b"\x01", b"\xff" * 9 + b"\x02", b"\xff" * 10 + b"\x00",
                 b"\x01", b"\x03", b"\x00", b"\x7f", b"\x80\x01", b"\xff\x7f"]))
        else:
            section[at:at] = draw(st.binary(min_size=1, max_size=3))
    return bytes(section), len(recs) + draw(st.integers(-1, 1))


@compiled
@settings(max_examples=examples(400))
@given(renderers, damaged(), st.integers(0, 3))
def test_render_declines_where_the_reference_raises(pair: tuple[Renderer, KernelFormat],
                                                    case: tuple[bytes, int], start: int
                                                    ) -> None:
    render, form = pair
    section, count = case
    b = with_section(build([(0, None, b"x", [])]), section, count)
    check(render, form, b, start, must_render=False)


@compiled
@settings(max_examples=examples(300))
@given(st.binary(max_size=200), st.integers(-2, 40), st.integers(-5, 5))
def test_render_survives_any_bytes(data: bytes, count: int, start: int) -> None:
    for pair in (_json(), _format("%k %T %h %o %R%s\\n")):
        check(*pair, with_section(build([(0, None, b"x", [])]), data, count), start,
              must_render=False)


@compiled
def test_render_never_reads_past_its_buffer() -> None:
    """Random bytes and every truncation of a valid section: the same answer from the bytes
    and from a view of them followed by other bytes (a read past the end would differ)."""
    assert kernels is not None
    rng = random.Random(33)
    valid = bytes(build([(i, b"k\n" if i % 2 else None, b"v\xff" * (i * 37 % 90),
                          [("h", b"x")] if i % 3 else []) for i in range(30)]
                        ).records_section())
    cases = [rng.randbytes(rng.randrange(64)) for _ in range(2000)]
    cases += [valid[:k] for k in range(len(valid) + 1)]
    programs = [([b"", b"\n"], b"s"), ([b"", b" ", b" ", b" ", b"|", b"\n"], b"kSRhT"),
                ([b"{", b",", b"", b",", b",", b"", b"}"], b"oTHjvE")]
    for data in cases:
        padded = bytearray(data + b"\x02" * 64)
        view = memoryview(padded)[:len(data)]
        for count in (1, 2, 30):
            for literals, tokens in programs:
                args = (count, 0, TS, False, 0, 0, literals, tokens)
                assert kernels.render(view, *args) == kernels.render(data, *args)


@compiled
@pytest.mark.parametrize("kind", PIPED)
@pytest.mark.parametrize("how", ["plain", "keyed", "-f", "-J"])
def test_render_agrees_on_piped_lines(kind: str, how: str) -> None:
    lines = _lines(kind, 300 if kind != "huge" else 14, random.Random(7))
    keyed = how != "plain"
    recs: list[Any] = [(i, lines[i - 1] if keyed and i % 3 else None, v, [])
            for i, v in enumerate(lines)]
    pair = {"plain": _plain(None), "keyed": _plain(b"\t"), "-f": _format("%o:%k\\t%s\\n"),
            "-J": _json()}[how]
    got = check(*pair, build(recs, base=1000), 1000)
    assert got is not None and got[1] == len(lines)


# ---- the edges of the limits ---------------------------------------------------------------------

INT64_MAX = (1 << 63) - 1


@compiled
@pytest.mark.parametrize("fmt", ["%o %T\\n", "-J"])
@pytest.mark.parametrize(("base", "off_delta"), [
    (INT64_MAX - 1, 0), (INT64_MAX - 1, 1), (INT64_MAX - 1, 2),  # offset: below, at, above
    (-(1 << 63) + 1, -1), (-(1 << 63) + 1, -2), (0, (1 << 31) - 1), (0, -(1 << 31))])
def test_offsets_at_the_int64_edge(fmt: str, base: int, off_delta: int) -> None:
    b = with_section(build([(0, None, b"x", [])], base=base),
                     record(0, off_delta, None, b"v"), 1)
    got = check(*_pair(fmt), b, -(1 << 63), must_render=False)
    fits = -(1 << 63) <= base + off_delta <= INT64_MAX
    assert (got is not None) == fits  # past int64 the per-record path prints it


@compiled
@pytest.mark.parametrize("fmt", ["%T\\n", "-J"])
@pytest.mark.parametrize("ts_delta", [INT64_MAX - TS - 1, INT64_MAX - TS, INT64_MAX - TS + 1,
                                      -(1 << 63), 1, -1, 63, 64, -64, -65])
@pytest.mark.parametrize("log_append", [False, True])
def test_timestamps_at_the_int64_edge(fmt: str, ts_delta: int, log_append: bool) -> None:
    b = with_section(build([(0, None, b"x", [])], log_append=log_append),
                     record(ts_delta, 0, None, b"v"), 1)
    got = check(*_pair(fmt), b, 0, must_render=False)
    fits = log_append or -(1 << 63) <= TS + ts_delta <= INT64_MAX
    assert (got is not None) == fits


@compiled
@pytest.mark.parametrize("size", [62, 63, 64, 65, 8190, 8191, 8192, 8193, 1 << 20])
def test_lengths_around_each_varint_width(size: int) -> None:
    b = build([(0, b"k" * size, b"v" * size, [("h", b"x" * size)])])
    for pair in (_format("%K %S %R%k %s %h\\n"), _json()):
        assert check(*pair, b, 0) is not None


@compiled
@pytest.mark.parametrize(("name", "section", "renders"), [
    ("a one-byte record", record(0, 0, None, b"")[:1], False),
    ("length below the least (5)", b"\x0a" + b"\x00" * 5, False),
    ("length one past the section", record(0, 0, None, b"ab", raw_len=encode_varint(9)),
     False),
    ("length one short", record(0, 0, None, b"ab", raw_len=encode_varint(7)), False),
    ("key length -2 (null to the reference)", record(0, 0, None, b"v").replace(
        b"\x01\x02v", b"\x03\x02v"), True),
    ("a 5-byte offset delta", b"\x0e\x00\x00\x80\x80\x80\x80\x00\x01\x02v\x00" , False),
    ("a 6-byte varint", b"\x10\x00\x00\xff\xff\xff\xff\xff\x01\x01\x02v\x00", False),
    ("a varint past 32 bits", b"\x0e\x00\x00\xfe\xff\xff\xff\x1f\x01\x02v\x00", False),
    ("a 10-byte timestamp delta", record(-(1 << 63), 0, None, b"v"), True),
    ("an 11-byte timestamp delta", b"\x18\x00" + b"\xff" * 10 + b"\x00\x00\x01\x02v\x00",
     False),
    ("header count -1", record(0, 0, None, b"v", headers=b"\x01"), False),
    ("header count past the record", record(0, 0, None, b"v", headers=b"\x04\x02a\x00"),
     False),
    ("a null header key", record(0, 0, None, b"v", headers=b"\x02\x01\x00"), False),
    ("a header key that is not UTF-8", record(0, 0, None, b"v", headers=b"\x02\x02\xff\x01"),
     True),
    ("a header value of -2 (null to the reference)",
     record(0, 0, None, b"v", headers=b"\x02\x02a\x03"), True),
    ("a header value past the record", record(0, 0, None, b"v", headers=b"\x02\x02a\x08b"),
     False),
    ("a byte after the last record", record(0, 0, None, b"v") + b"\x00", False),
])
def test_edges_of_the_record_layout(name: str, section: bytes, renders: bool) -> None:
    b = with_section(build([(0, None, b"x", [])]), section, 1)
    for pair in (_format("%k %s %h %T\\n"), _json(), _plain(None)):
        got = check(*pair, b, 0, must_render=False)
        assert (got is not None) == renders, name


def test_kernel_formats_are_made_only_with_the_kernels() -> None:
    made = [KernelFormat.compile([b"", b"\n"], [b"s"]), KernelFormat.json(lambda t, p: 1)]
    if kernels is None:
        assert made == [None, None]
    else:
        assert all(isinstance(f, KernelFormat) for f in made)


@compiled
def test_tokens_and_literals_are_checked() -> None:
    assert kernels is not None
    with pytest.raises(ValueError, match="unknown token 'x'"):
        kernels.render(b"", 0, 0, 0, False, 0, 0, [b"", b""], b"x")
    with pytest.raises(ValueError, match="needs 2 literals"):
        kernels.render(b"", 0, 0, 0, False, 0, 0, [b""], b"s")
    with pytest.raises(TypeError):
        kernels.render(b"", 0, 0, 0, False, 0, 0, ["", b""], b"s")
    assert KernelFormat.compile([b""] * 66, [b"s"] * 65) is None  # more than the kernel takes
    assert kernels.render(b"", 0, 0, 0, False, 0, 0, [b"a", b"b"], b"s") == (b"", 0, b"")


@compiled
def test_json_members_are_json_renderers() -> None:
    render, form = _json()
    b = build([(0, b"\xff\xfe", "é\n\"".encode(), [("k", None), ("é", b"\xff")])],
              log_append=True)
    got = check(render, form, b, 0)
    assert got is not None
    line = json.loads(got[0])
    assert line["key_encoding"] == "base64" and line["payload"] == "é\n\""
    assert line["headers"] == ["k", None, "é", "/w=="] and line["tstype"] == "logappend"


@compiled
def test_json_text_around_every_byte_of_an_eight_byte_word() -> None:
    """-J copies plain ASCII eight bytes at a time: a byte JSON escapes (or that is not
    ASCII) at every position of the first words, and the bytes just around each limit."""
    specials = [0x00, 0x08, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F, 0x80,
                0xC3, 0xFF]
    recs: list[Any] = []
    for size in (7, 8, 9, 16, 17, 24):
        for at in range(size):
            for c in specials:
                value = bytearray(b"a" * size)
                value[at] = c
                recs.append((0, bytes(value[:at + 1]), bytes(value), []))
    for k in range(18):  # UTF-8 (valid or not) starting at every place of the first words
        for tail in ("é€😀".encode(), b"\xed\xa0\x80", b"\xc3", b"\xf4\x90\x80\x80", b'\xc3\xa9"'):
            recs.append((0, b"a" * k + tail, b"b" * k + tail + b"c" * 9, []))
    got = check(*_json(), build(recs), 0)
    assert got is not None and got[1] == len(recs)


@compiled
@settings(max_examples=examples(200))
@given(st.sampled_from(FORMATS), st.lists(st.tuples(st.one_of(st.none(), text),
                                                    st.one_of(st.none(), text)),
                                          min_size=1, max_size=20),
       st.sampled_from([b"NULL", b"null", b"\x00", b"%k", b"", b"x" * 300]))
def test_a_null_text_is_the_per_record_render(fmt: str, records: list[Any], null: bytes
                                              ) -> None:
    """consume -Z / --null-literal: the kernel prints a null key or value as the
    per-record render does (nothing else changes: %K %S stay -1)."""
    raw = unescape(fmt)
    form = KernelFormat.compile(TOKEN.split(raw), [t[1:2] for t in TOKEN.findall(raw)], null)
    assert form is not None
    b = build([(i, k, v, []) for i, (k, v) in enumerate(records)])
    check(compile_format(fmt, null), form, b, 0)


@compiled
def test_the_kernels_null_text() -> None:
    form = KernelFormat.compile([b"", b"|", b"|", b"|", b"\n"], [b"k", b"s", b"K", b"S"],
                                b"NULL")
    assert form is not None
    b = build([(0, None, b"v", []), (1, b"k", None, []), (2, b"", b"", []),
               (3, None, None, [])])
    got = form.render(b, 0, TOPIC, PARTITION)
    assert got is not None
    assert got[:2] == (b"NULL|v|-1|1\nk|NULL|1|-1\n||0|0\nNULL|NULL|-1|-1\n", 4)
