"""The compiled kernels (kafkactl/record/_kernels.pyx) against their pure-Python references,
on the same inputs: valid sections of every shape, the inputs users pipe (seq, yes, log
lines, binary, empty and huge lines), the edges of every limit (one below, at, one above),
and malformed bytes (flipped, cut, inserted, lying lengths, over-long varints). A twin must
give the same result, or raise the same error class with the same message.

Under KAFKACTL_NO_EXTENSIONS=1 (scripts/test.sh's pure step) the comparisons skip and only
the switch is checked; otherwise the kernels must have loaded (a build that silently fell
back to pure Python fails here, not in a benchmark)."""

from __future__ import annotations

import array
import importlib.util
import os
import random
import subprocess
import sys
from collections.abc import Callable
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.client import line_producer, partitioner
from kafkactl.record import _accel, columns, framing
from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.errors import InvalidRecordError
from tests.conftest import BrokerProcess
from tests.hypothesis_profiles import examples
from tests.polling import wait_until

kernels = _accel.kernels
compiled = pytest.mark.skipif(kernels is None, reason=f"pure Python: {_accel.REASON}")

TS = 1_700_000_000_000


# ---- the switch ---------------------------------------------------------------------------------

def test_the_switch_picks_the_kernels_unless_told_not_to() -> None:
    if os.environ.get("KAFKACTL_NO_EXTENSIONS", "") not in ("", "0"):
        assert kernels is None and not _accel.ACCELERATED
        assert _accel.STATUS == "compiled kernels: no (KAFKACTL_NO_EXTENSIONS is set)"
        assert framing._walk is framing._walk_py and framing._runs is framing._column_runs
        assert partitioner.murmur2 is partitioner.murmur2_py
        assert columns.encode_values is columns.encode_values_py
        assert line_producer.split_keys is line_producer.split_keys_py
        assert line_producer.null_values is line_producer.null_values_py
        return
    # The test environment is built by scripts/test.sh, which installs a C compiler: a
    # missing extension there is a broken build, not a machine without one.
    assert kernels is not None, _accel.STATUS
    assert _accel.STATUS == "compiled kernels: yes"
    assert framing._walk is framing._walk_compiled
    assert partitioner.murmur2 is kernels.murmur2
    assert columns.encode_key_values is kernels.encode_key_values
    assert line_producer.split_keys is kernels.split_keys
    assert line_producer.null_values is kernels.null_values


# ---- inputs -------------------------------------------------------------------------------------

def _section(records: list[tuple[int, bytes | None, bytes | None,
                                 list[tuple[str, bytes | None]]]]) -> bytes:
    b = RecordBatchBuilder()
    for ts, k, v, h in records:
        b.append(TS + ts, k, v, h)
    return b.build()[61:]


def _lines(kind: str, n: int, rng: random.Random) -> list[bytes]:
    """What users pipe into `kafkactl produce`, one value per line."""
    if kind == "seq":
        return [b"%d" % i for i in range(1, n + 1)]
    if kind == "yes":
        return [b"y"] * n
    if kind == "log":
        return [b"10.%d.%d.%d - - [27/Nov/2026] \"GET /%s HTTP/1.1\" 200 %d"
                % (rng.randrange(256), rng.randrange(256), rng.randrange(256),
                   b"p" * rng.randrange(300), rng.randrange(99999)) for _ in range(n)]
    if kind == "binary":
        return [rng.randbytes(rng.randrange(200)) for _ in range(n)]
    if kind == "empty":
        return [b""] * n
    # huge lines around the one-, two- and three-byte length varints
    sizes = [63, 64, 65, 8191, 8192, 8193, 100_000]
    return [b"h" * sizes[i % len(sizes)] for i in range(n)]


PIPED = ["seq", "yes", "log", "binary", "empty", "huge"]

ts_delta = st.one_of(st.integers(0, 63), st.sampled_from([64, 8191, 8192, -1, -65, 1 << 55]),
                     st.integers(-(1 << 40), 1 << 40))
field = st.one_of(st.none(), st.binary(max_size=120),
                  st.sampled_from([63, 64, 65, 8191, 8192, 8193]).map(lambda n: b"z" * n))
header = st.tuples(st.sampled_from(["", "a", "bc"]), st.none() | st.binary(max_size=5))
record = st.tuples(ts_delta, field, field, st.lists(header, max_size=2) | st.just([]))


@st.composite
def sections(draw: st.DrawFn, max_records: int = 40) -> tuple[bytes, int]:
    """A valid section (or one with up to three bytes flipped, cut or inserted), and a
    count of records that is right or one off."""
    recs = draw(st.lists(record, min_size=1, max_size=max_records))
    section = bytearray(_section(recs))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "lie"]))
        at = draw(st.integers(0, max(len(section) - 1, 0)))
        if kind == "flip" and section:
            section[at] = draw(st.integers(0, 255))
        elif kind == "cut" and section:
            del section[at:at + draw(st.integers(1, 40))]
        elif kind == "lie" and section:  # an over-long or lying varint
            section[at:at + 1] = draw(st.sampled_from(
                [b"\xff" * 5 + b"\x01", b"\x80\x80\x80\x80\x00", b"\xfe\xff\xff\xff\x0f",
                 b"\x01", b"\x03", b"\x00", b"\x7f", b"\x80\x01", b"\xff\x7f"]))
        else:
            section[at:at] = draw(st.binary(min_size=1, max_size=3))
    return bytes(section), len(recs) + draw(st.integers(-1, 1))


def _outcome(fn: Callable[[], object]) -> object:
    """What a call gives: its result, or its error's class and message."""
    try:
        return fn()
    except Exception as e:
        return type(e), str(e)


# ---- framing: the walk --------------------------------------------------------------------------

def _walks(data: bytes, pos: int, first: int, count: int, want_keyless: bool) -> None:
    """framing._walk_py and its compiled twin agree, keyless list included."""
    py_keyless: list[int] = []
    c_keyless: list[int] = []
    py = _outcome(lambda: framing._walk_py(data, pos, len(data), first, count, want_keyless,
                                           py_keyless))
    c = _outcome(lambda: framing._walk_compiled(data, pos, len(data), first, count,
                                                want_keyless, c_keyless))
    assert c == py, (data[:80], pos, first, count)
    if not isinstance(py, tuple):
        assert c_keyless == py_keyless


@compiled
@settings(max_examples=examples(400))
@given(sections(), st.booleans())
def test_walk_twins_agree(case: tuple[bytes, int], want_keyless: bool) -> None:
    section, count = case
    _walks(section, 0, 0, count, want_keyless)


@compiled
@settings(max_examples=examples(300))
@given(st.binary(max_size=300), st.integers(0, 8), st.integers(0, 3), st.integers(-1, 12),
       st.booleans())
def test_walk_twins_agree_on_any_bytes(data: bytes, pos: int, first: int, count: int,
                                       want_keyless: bool) -> None:
    _walks(data, min(pos, len(data)), first, count, want_keyless)


@compiled
@pytest.mark.parametrize("index", [framing.MAX_HEADS - 1, framing.MAX_HEADS,
                                   framing.MAX_HEADS + 1])
@pytest.mark.parametrize("tail", [b"\x00", b"\x02", b"\x04", b"\x82\x00", b"\x0c\x00"])
def test_walk_twins_agree_at_the_reference_shortcut_limit(index: int, tail: bytes) -> None:
    """The reference proves records below MAX_HEADS by a shortcut whose read of a short
    record's timestamp byte fails differently from the field-by-field parse: the twin
    reproduces which message a record at, below and above that index gets."""
    for data in (tail, b"\x0c" + tail, tail + b"\x00" * 3):
        _walks(data, 0, index, index + 1, True)


def _record(length: bytes = b"", ts: bytes = b"\x00", od: bytes = b"\x00",
            key: bytes = b"\x01", value: bytes = b"\x02v", headers: bytes = b"\x00") -> bytes:
    body = b"\x00" + ts + od + key + value + headers
    return (length or bytes([len(body) * 2])) + body


EDGES = {
    "valid": _record(),
    "varint of 5 bytes": _record(key=b"\x81\x80\x80\x80\x00"),
    "varint of 6 bytes": _record(key=b"\x81\x80\x80\x80\x80\x00"),
    "timestamp of 10 bytes": _record(ts=b"\x80" * 9 + b"\x01"),
    "timestamp of 11 bytes": _record(ts=b"\x80" * 10 + b"\x01"),
    "length 5": b"\x0a" + b"\x00" * 5,
    "length 6": b"\x0c" + b"\x00\x00\x00\x01\x01\x00",
    "length 7": b"\x0e" + b"\x00\x00\x00\x01\x01\x00\x00",
    "key length -2": _record(key=b"\x03"),
    "value length -2": _record(value=b"\x03"),
    "value length -1": _record(value=b"\x01"),
    "negative header count": _record(headers=b"\x01"),
    "header count over the record": _record(headers=b"\x7e"),
    "header key -1": _record(headers=b"\x02\x01\x01"),
    "header value -2": _record(headers=b"\x02\x00\x03"),
    "header value -1": _record(headers=b"\x02\x02a\x01"),
    "header past its record": _record(headers=b"\x02\x02a\x7e"),
    "offset delta 1": _record(od=b"\x02"),
    "offset delta -1": _record(od=b"\x01"),
    "two-byte length": _record(value=b"\x80\x01" + b"v" * 64),
    "length 0": b"\x00",
    "negative length": b"\x01\x00\x00",
    "length past the end": b"\x7e\x00",
    "three-byte length": b"\x80\x80\x01",
}


@compiled
@pytest.mark.parametrize("name", sorted(EDGES))
@pytest.mark.parametrize("count", [1, 2])
def test_walk_twins_agree_on_edges(name: str, count: int) -> None:
    data = EDGES[name]
    for section in (data, data + EDGES["valid"], data[:-1], data + b"\x00"):
        _walks(section, 0, 0, count, True)
        _walks(b"\x00" + section, 1, 0, count, False)


# ---- framing: check_records, compiled (proof in place) against pure (columns + walk) -----

def _checks(section: bytes, count: int, want_keyless: bool, monkeypatch: pytest.MonkeyPatch
            ) -> None:
    """check_records gives the same on the compiled and the pure path, for bytes, a
    bytearray read in place between junk, and a memoryview."""
    junk = b"\x02\x00\x00\x00\x01\x00\x00" * 3
    backing = bytearray(junk + section + junk)
    start, end = len(junk), len(junk) + len(section)
    calls: list[Callable[[], object]] = [
        lambda: framing.check_records(section, count, want_keyless=want_keyless),
        lambda: framing.check_records(backing, count, want_keyless=want_keyless,
                                      start=start, end=end),
        lambda: framing.check_records(memoryview(backing)[start:end], count,
                                      want_keyless=want_keyless),
    ]
    compiled_outcomes = [_outcome(call) for call in calls]
    with monkeypatch.context() as m:
        m.setattr(framing, "kernels", None)
        m.setattr(framing, "_runs", framing._column_runs)
        m.setattr(framing, "_walk", framing._walk_py)
        pure_outcomes = [_outcome(call) for call in calls]
    assert compiled_outcomes == pure_outcomes
    assert len(set(map(repr, pure_outcomes))) == 1  # where the bytes sit does not matter


@compiled
@settings(max_examples=examples(250))
@given(sections(max_records=120), st.booleans())
def test_check_records_compiled_and_pure_agree(case: tuple[bytes, int], want_keyless: bool
                                               ) -> None:
    section, count = case
    with pytest.MonkeyPatch.context() as monkeypatch:
        _checks(section, count, want_keyless, monkeypatch)


@compiled
@pytest.mark.parametrize("kind", PIPED)
@pytest.mark.parametrize("n", [1, 4, 5, 63, 64, 65, 8191, 8192, 8193])
def test_check_records_agree_on_piped_lines(kind: str, n: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(n)
    lines = _lines(kind, n, rng)[:n if kind != "huge" else 40]
    keyed = [(i % 3, line[:3] if i % 2 else None, line, []) for i, line in enumerate(lines)]
    for recs in ([(0, None, line, []) for line in lines], keyed):
        section = _section(recs)  # type: ignore[arg-type]
        _checks(section, len(recs), True, monkeypatch)
        damaged = bytearray(section)
        damaged[rng.randrange(len(damaged))] ^= 0xFF
        _checks(bytes(damaged), len(recs), True, monkeypatch)
        _checks(section[:-1], len(recs), True, monkeypatch)


@compiled
def test_prove_stops_at_the_first_fault_and_keeps_only_proven_keyless() -> None:
    assert kernels is not None
    good = _record()
    bad = _record(value=b"\x03")  # value length -2
    section = good + _record(od=b"\x02") + good
    keyless: list[int] = []
    assert kernels.prove(section, 0, len(section), 3, True, keyless) == (2, 2 * len(good))
    assert keyless == [0, 1]
    keyless = []
    section = good + bad
    assert kernels.prove(section, 0, len(section), 2, True, keyless) == (1, len(good))
    assert keyless == [0]
    # reads stop at `stop`: the record after it is not looked at
    assert kernels.prove(good + good, 0, len(good) + 3, 2, False, []) == (1, len(good))


# ---- fuzz: the kernels never read past a buffer ------------------------------------------------

@compiled
def test_kernels_survive_random_and_truncated_input() -> None:
    """Random bytes and every truncation of valid sections: the kernels answer (a result,
    None or InvalidRecordError), never crash or read outside the buffer (a read past it
    would show up as a different answer from a copy padded with other bytes)."""
    assert kernels is not None
    rng = random.Random(33)
    valid = _section([(i, b"k" if i % 2 else None, b"v" * (i * 37 % 200), [])
                      for i in range(30)])
    cases = [rng.randbytes(rng.randrange(64)) for _ in range(3000)]
    cases += [valid[:k] for k in range(len(valid) + 1)]
    for data in cases:
        for count in (1, 2, 30):
            padded = bytearray(data + b"\x02" * 64)
            view = memoryview(padded)[:len(data)]
            walked = _outcome(partial(kernels.walk, data, 0, len(data), 0, count, True, []))
            assert _outcome(partial(kernels.walk, view, 0, len(data), 0, count, True,
                                    [])) == walked
            assert walked is True or walked is False or walked[0] is InvalidRecordError
            proven = kernels.prove(padded, 0, len(data), count, True, [])
            assert 0 <= proven[0] <= count and proven[1] <= len(data)


# ---- where it is said: kafkactl --version, the broker's log -------------------------------------

@pytest.mark.parametrize("switch", ["", "1"])
def test_version_says_whether_the_kernels_are_in_use(switch: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KAFKACTL_NO_EXTENSIONS"}
    if switch:
        env["KAFKACTL_NO_EXTENSIONS"] = switch
    out = subprocess.run([sys.executable, "-m", "kafkactl", "--version"], env=env,
                         capture_output=True, text=True, check=True, timeout=60).stdout
    lines = out.splitlines()
    assert lines[0].startswith("kafkactl ") and len(lines) == 2, out
    if switch:
        assert lines[1] == "compiled kernels: no (KAFKACTL_NO_EXTENSIONS is set)"
    elif importlib.util.find_spec("kafkactl.record._kernels") is not None:  # built
        assert lines[1] == "compiled kernels: yes"
    else:
        assert lines[1].startswith("compiled kernels: no (the extension is not built: ")


def test_the_broker_logs_it_once_at_start(broker: BrokerProcess) -> None:
    assert broker.log_path is not None
    log_path = broker.log_path

    def said() -> list[str]:
        return [line for line in log_path.read_text(errors="replace").splitlines()
                if "compiled kernels:" in line]

    lines = wait_until(said, timeout=60, what="the broker's compiled-kernels log line")
    assert len(lines) == 1 and lines[0].endswith(_accel.STATUS), lines


# ---- murmur2 (client/partitioner.py) ------------------------------------------------------------

@compiled
@settings(max_examples=examples(500))
@given(st.binary(max_size=70) | st.sampled_from([b"", b"a", b"ab", b"abc", b"abcd", b"abcde",
                                                  b"\xff" * 3, b"\xff" * 4, b"\x80" * 7]))
def test_murmur2_twins_agree(key: bytes) -> None:
    """Every length mod 4 (the tail), high bytes (sign extension in Java), and the buffer
    types a key comes in."""
    assert kernels is not None
    want = partitioner.murmur2_py(key)
    assert kernels.murmur2(key) == want
    assert kernels.murmur2(bytearray(key)) == want
    assert kernels.murmur2(memoryview(b"pad" + key)[3:]) == want


@compiled
@pytest.mark.parametrize("kind", PIPED)
def test_murmur2_twins_agree_on_piped_keys(kind: str) -> None:
    """Keys as `kafkactl produce -K' '` cuts them from piped lines (the text before the
    first space: an address, a number, a whole line when there is no space)."""
    assert kernels is not None
    for line in _lines(kind, 300, random.Random(5)):
        key = line.partition(b" ")[0]
        assert kernels.murmur2(key) == partitioner.murmur2_py(key)
    assert partitioner.murmur2 is kernels.murmur2


# ---- keyed records by partition (client/partitioner.murmur2_groups_py) -------------------------

MAX_GROUP_PARTITIONS = 1 << 20  # the twin's list of partitions (_kernels.pyx); more: declined


def _groups_agree(keys: object, values: object, entries: object, n: object, null: object
                  ) -> None:
    """The compiled twin gives the reference's groups, in the same order, or declines (None)
    and the reference decides; murmur2_groups (the two together) acts as the reference."""
    assert kernels is not None
    py = _outcome(lambda: list(partitioner.murmur2_groups_py(
        keys, values, entries, n, null).items()))  # type: ignore[arg-type]
    twin = kernels.murmur2_groups(keys, values, entries, n, null)  # type: ignore[arg-type]
    if twin is not None:
        assert list(twin.items()) == py
    assert _outcome(lambda: list(partitioner.murmur2_groups(
        keys, values, entries, n, null).items())) == py  # type: ignore[arg-type]


@compiled
@settings(max_examples=examples(300))
@given(st.lists(st.none() | st.binary(max_size=9) | st.sampled_from([b"", b"k1", b"k2"]),
                max_size=40),
       st.sampled_from([1, 2, 3, 7, 64, MAX_GROUP_PARTITIONS - 1, MAX_GROUP_PARTITIONS,
                        MAX_GROUP_PARTITIONS + 1]),
       st.sampled_from([-1, 0, 1, 6, 63, 1 << 40]), st.booleans())
def test_murmur2_groups_twins_agree(keys: list[bytes | None], n: int, null: int,
                                    with_entries: bool) -> None:
    """Partition counts at the twin's edge, null keys (sticky) inside and outside the
    partitions, repeated keys, with and without the records' entries."""
    values = [b"v%d" % i for i in range(len(keys))]
    entries = [("e", i) for i in range(len(keys))] if with_entries else None
    _groups_agree(keys, values, entries, n, null)
    if n <= MAX_GROUP_PARTITIONS:  # the plain shape: the twin takes it
        assert kernels is not None
        assert kernels.murmur2_groups(keys, values, entries, n, null) is not None


@compiled
@pytest.mark.parametrize("kind", PIPED)
@pytest.mark.parametrize("n", [1, 4, 12])
def test_murmur2_groups_twins_agree_on_piped_lines(kind: str, n: int) -> None:
    """Keys and values as `kafkactl produce -K' '` cuts piped lines (split_keys)."""
    keys, values = line_producer.split_keys_py(_lines(kind, 500, random.Random(6)), b" ")
    _groups_agree(keys, values, None, n, 0)


@compiled
@pytest.mark.parametrize(("keys", "values", "entries", "n"), [
    ([b"a", b"b"], [b"1"], None, 3),  # fewer values: IndexError
    ([b"a"], [b"1", b"2"], None, 3),  # more values: the reference takes the first
    ([b"a", b"b"], [b"1", b"2"], [0], 3),  # fewer entries: IndexError
    ((b"a", b"b"), [b"1", b"2"], None, 3),  # a tuple of keys
    ([b"a"], (b"1",), None, 3),  # a tuple of values
    ([b"a"], [b"1"], (0,), 3),  # a tuple of entries
    ([bytearray(b"a")], [b"1"], None, 3),  # not bytes: unhashable in the reference
    ([memoryview(b"a")], [b"1"], None, 3),
    (["a"], [b"1"], None, 3),  # a str key: the reference's murmur2 fails on it
    ([b"a"], [b"1"], None, 0),  # no partition: ZeroDivisionError
    ([None], [b"1"], None, 0),  # a null key needs no count
    ([], [], None, 0),
    ([b"a", 7, b"b"], [b"1", b"2", b"3"], None, 3),  # declined part-way
])
def test_murmur2_groups_twins_agree_on_odd_inputs(keys: object, values: object,
                                                  entries: object, n: int) -> None:
    _groups_agree(keys, values, entries, n, 1)


MAX_SCATTER_PARTITIONS = 1 << 16  # murmur2_scatter's reach (_kernels.pyx); more: declined


def _scatter_agrees(data: object, start: object, end: object, delimiter: object,
                    separator: object, n: object, null: object) -> object:
    """murmur2_scatter's twin gives the reference's bytes per partition, or declines (None)
    and the reference decides; murmur2_scatter (the two together) acts as the reference.
    Returns the twin's answer."""
    assert kernels is not None
    py = _outcome(lambda: partitioner.murmur2_scatter_py(
        data, start, end, delimiter, separator, n, null))  # type: ignore[arg-type]
    twin = kernels.murmur2_scatter(data, start, end, delimiter, separator, n, null)  # type: ignore[arg-type]
    if twin is not None:
        assert twin == py
    assert _outcome(lambda: partitioner.murmur2_scatter(
        data, start, end, delimiter, separator, n, null)) == py  # type: ignore[arg-type]
    return twin


@compiled
@settings(max_examples=examples(300))
@given(st.lists(st.binary(max_size=12) | st.sampled_from([b"k v", b"k", b" v", b"k  v", b""]),
                max_size=30),
       st.sampled_from([b"\n", b"\x00", b" "]), st.sampled_from([b" ", b"::", b"\t", b"k"]),
       st.sampled_from([1, 2, 5, MAX_SCATTER_PARTITIONS]), st.integers(0, 3))
def test_murmur2_scatter_twins_agree(lines: list[bytes], delimiter: bytes, separator: bytes,
                                     n: int, pad: int) -> None:
    """Whole lines (a delimiter inside a drawn line only makes more lines), keys with and
    without the separator, a range that starts and ends inside a larger buffer."""
    body = b"".join(line + delimiter for line in lines)
    data = b"x" * pad + body + b"y" * pad
    null = n - 1
    assert _scatter_agrees(data, pad, pad + len(body), delimiter, separator, n, null) \
        is not None


@compiled
@pytest.mark.parametrize("kind", PIPED)
@pytest.mark.parametrize("n", [1, 4, 12])
def test_murmur2_scatter_twins_agree_on_piped_lines(kind: str, n: int) -> None:
    data = b"".join(line + b"\n" for line in _lines(kind, 500, random.Random(7)))
    assert _scatter_agrees(data, 0, len(data), b"\n", b" ", n, 0) is not None


@compiled
@pytest.mark.parametrize(("data", "start", "end", "delimiter", "separator", "n", "null"), [
    (b"a b\nc", 0, 5, b"\n", b" ", 3, 0),  # not whole lines: the reference drops the tail
    (b"a b\n", 0, 4, b"\r\n", b" ", 3, 0),  # a two-byte delimiter
    (b"a b\n", 0, 4, b"\n", b"", 3, 0),  # an empty separator: ValueError
    (b"a b\n", 0, 4, b"\n", " ", 3, 0),  # a str separator: TypeError
    (b"a b\n", 0, 4, b"\n", b" ", 0, 0),  # no partition
    (b"a b\nc\n", 0, 6, b"\n", b" ", 3, 3),  # a null partition outside: IndexError
    (b"a b\nc\n", 0, 6, b"\n", b" ", 3, -1),  # ... or a negative one (the last)
    (b"a b\n", 0, 4, b"\n", b" ", MAX_SCATTER_PARTITIONS + 1, 0),
    (b"a b\n", 2, 1, b"\n", b" ", 3, 0),  # start after end
    (b"a b\n", 0, 99, b"\n", b" ", 3, 0),  # end past the buffer
    (b"", 0, 0, b"\n", b" ", 3, 1),  # nothing
    (bytearray(b"a b\n"), 0, 4, b"\n", b" ", 3, 0),  # a bytearray buffer
    (memoryview(b"_a b\n")[1:], 0, 4, b"\n", b" ", 3, 0),
])
def test_murmur2_scatter_twins_agree_on_odd_inputs(data: object, start: object, end: object,
                                                   delimiter: object, separator: object,
                                                   n: object, null: object) -> None:
    _scatter_agrees(data, start, end, delimiter, separator, n, null)


# ---- the producer's record encoding (record/columns.py) -----------------------------------------

def _encodes(keys: list[bytes | None] | None, values: list[bytes] | list[bytes | None],
             start: int, first_delta: int, room: int, ts_delta: int = 0) -> None:
    """The twins take the same records (the same bytes, index after them and size)."""
    assert kernels is not None
    if keys is None:
        py = columns.encode_values_py(values, start, first_delta, room, ts_delta)
        c = kernels.encode_values(values, start, first_delta, room, ts_delta)
    else:
        py = columns.encode_key_values_py(keys, values, start, first_delta, room, ts_delta)
        c = kernels.encode_key_values(keys, values, start, first_delta, room, ts_delta)
    assert (b"".join(c[0]), c[1], c[2]) == (b"".join(py[0]), py[1], py[2]), \
        (start, first_delta, room, ts_delta)


ENCODE_DELTAS = [0, 1, 62, 63, 64, 65, 8190, 8191, 8192, 8193, columns.MAX_DELTA - 2,
                 columns.MAX_DELTA - 1, columns.MAX_DELTA]
ENCODE_LENGTHS = [0, 1, 62, 63, 64, 65, 8191, 8192, columns.MAX_FIELDS // 2 - 1,
                  columns.MAX_FIELDS // 2, columns.MAX_FIELDS // 2 + 1, columns.MAX_FIELDS - 1,
                  columns.MAX_FIELDS, columns.MAX_FIELDS + 1]
encode_field = st.binary(max_size=200) | st.sampled_from(ENCODE_LENGTHS).map(lambda n: b"v" * n)
encode_key = st.none() | st.binary(max_size=30) | st.sampled_from(
    [0, 63, 64, columns.MAX_FIELDS // 2, columns.MAX_FIELDS // 2 + 1]).map(lambda n: b"k" * n)
room = st.integers(0, 4000) | st.sampled_from([1 << 20, 1 << 40])
# the call's timestamp delta (tests/record/test_ts_delta_encoders.py: its edges in detail)
encode_ts = st.sampled_from([0, 1, 63, 64, -1, -64, -65, 8191, 8192, -8193, 1 << 20,
                             -(1 << 63), (1 << 63) - 1]) | st.integers(-(1 << 40), 1 << 40)


@compiled
@pytest.mark.parametrize("kind", PIPED)
@pytest.mark.parametrize("first_delta", [0, 63, 8191, columns.MAX_DELTA - 5])
def test_encode_twins_agree_on_piped_lines(kind: str, first_delta: int) -> None:
    lines = _lines(kind, 20_000 if kind != "huge" else 60, random.Random(9))
    keys: list[bytes | None] = [line.partition(b" ")[0] or None for line in lines]
    for room in (0, 100, 16_384, 1 << 20, 1 << 40):
        _encodes(None, lines, 0, first_delta, room)
        _encodes(keys, lines, 0, first_delta, room)
        _encodes(keys, lines, 7, first_delta, room)
    # the buffer types a value may come in
    _encodes(None, [bytearray(x) for x in lines[:50]], 0, first_delta, 1 << 20)  # type: ignore[arg-type]


@compiled
@settings(max_examples=examples(300))
@given(st.lists(st.tuples(encode_key, st.none() | encode_field), max_size=40),
       st.integers(0, 3), st.sampled_from(ENCODE_DELTAS), room, st.booleans(), encode_ts)
def test_encode_twins_agree(pairs: list[tuple[bytes | None, bytes | None]], start: int,
                            first_delta: int, room: int, keyed: bool, ts_delta: int) -> None:
    """Any keys and values, None ones (null: length -1) anywhere: first, last, all; any
    timestamp delta of the call."""
    values = [v for _, v in pairs]
    _encodes([k for k, _ in pairs] if keyed else None, values, min(start, len(values)),
             first_delta, room, ts_delta)


@compiled
@pytest.mark.parametrize("kind", PIPED)
@pytest.mark.parametrize("first_delta", [0, 63, 8191, columns.MAX_DELTA - 5])
@pytest.mark.parametrize("every", [1, 2, 3, 1000])
def test_encode_twins_agree_on_piped_lines_with_nulls(kind: str, first_delta: int,
                                                      every: int) -> None:
    """Piped lines with every `every`-th value null (1: all), the keys of the others'
    first word null when empty."""
    lines = _lines(kind, 20_000 if kind != "huge" else 60, random.Random(10))
    values: list[bytes | None] = [None if i % every == every - 1 else line
                                  for i, line in enumerate(lines)]
    keys: list[bytes | None] = [line.partition(b" ")[0] or None for line in lines]
    for room in (0, 100, 16_384, 1 << 20, 1 << 40):
        _encodes(None, values, 0, first_delta, room)
        _encodes(keys, values, 0, first_delta, room)
        _encodes(keys, values, 7, first_delta, room)


@compiled
@pytest.mark.parametrize(("keys", "values"), [
    (None, [7]),  # neither bytes nor None: TypeError in both
    (None, [None, 7]),
    ([None, 7], [b"a", None]),
    ([None, None, b"k"], [None]),  # more keys: the values' count
    (None, (None, b"a", None)),  # a tuple
    ([None, None], [bytearray(b"ab"), None]),
])
def test_encode_twins_agree_on_odd_null_inputs(keys: list[bytes | None] | None,
                                               values: list[bytes | None]) -> None:
    assert kernels is not None
    for start in (0, 1):
        if keys is None:
            py = _outcome(partial(columns.encode_values_py, values, start, 0, 1 << 20))
            c = _outcome(partial(kernels.encode_values, values, start, 0, 1 << 20))
        else:
            py = _outcome(partial(columns.encode_key_values_py, keys, values, start, 0, 1 << 20))
            c = _outcome(partial(kernels.encode_key_values, keys, values, start, 0, 1 << 20))
        if isinstance(py, tuple) and isinstance(py[0], list):
            assert isinstance(c, tuple) and (b"".join(c[0]), c[1:]) == (b"".join(py[0]), py[1:])
        else:  # the same error class (the messages are the interpreter's own)
            assert isinstance(c, tuple) and c[0] is py[0], (py, c)  # type: ignore[index]


@compiled
def test_encode_refuses_a_buffer_whose_len_is_not_its_bytes() -> None:
    """A value whose len() counts wider items than bytes: the compiled encoder, which sizes
    its output by len(), refuses it rather than write past what it allocated."""
    assert kernels is not None
    wide = memoryview(array.array("H", [1, 2, 3]))
    with pytest.raises(ValueError, match="has len"):
        kernels.encode_values([wide], 0, 0, 1 << 20)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="has len"):
        kernels.encode_key_values([wide], [b"v"], 0, 0, 1 << 20)  # type: ignore[list-item]


# ---- the producer's key split (client/line_producer.split_keys_py) -----------------------------

def _splits(records: list[object], separator: object) -> None:
    assert kernels is not None
    py = _outcome(lambda: line_producer.split_keys_py(records, separator))  # type: ignore[arg-type]
    assert _outcome(lambda: kernels.split_keys(records, separator)) == py  # type: ignore[arg-type]


@compiled
@settings(max_examples=examples(400))
@given(st.lists(st.binary(max_size=12) | st.sampled_from([b"", b":", b"::", b"a:b:c", b"<>",
                                                          b"<<>>", b"\x00"]), max_size=20),
       st.sampled_from([b":", b"<>", b"\x00", b" ", b"\t", b"::", b"abc", b""]))
def test_split_keys_twins_agree(records: list[bytes], separator: bytes) -> None:
    _splits(records, separator)  # type: ignore[arg-type]


@compiled
@pytest.mark.parametrize("kind", PIPED)
@pytest.mark.parametrize("separator", [b" ", b"\t", b" - ", b"y"])
def test_split_keys_twins_agree_on_piped_lines(kind: str, separator: bytes) -> None:
    _splits(_lines(kind, 500, random.Random(4)), separator)  # type: ignore[arg-type]


@compiled
@pytest.mark.parametrize(("records", "separator"), [
    ([b"a"], b""),  # ValueError: empty separator
    ([], b""),  # no record: no error
    ([b"a:b"], ":"),  # a str separator
    ([bytearray(b"a:b"), b"c"], b":"),  # not bytes: its own partition()
    ([memoryview(b"a:b")], b":"),  # no partition(): AttributeError
    (["a:b"], b":"),  # str.partition of bytes: TypeError
    ([b"a:b"], bytearray(b":")),
    ([b"a:b"], memoryview(b"::")[:1]),
    ([b"x" * 100_000 + b":" + b"y" * 10], b":"),
    ([b":" * 5], b"::"),
])
def test_split_keys_twins_agree_on_odd_inputs(records: list[object], separator: object
                                              ) -> None:
    _splits(records, separator)


# ---- null fields (client/line_producer.split_keys_py with nulls, null_values_py) ----------------

NULLS = [frozenset(), frozenset({b""}), frozenset({b"NULL"}), frozenset({b"", b"NULL"}),
         frozenset({b":"}), frozenset({b"a:b"})]


def _nulls_agree(records: list[object], separator: object, nulls: object) -> None:
    assert kernels is not None
    py = _outcome(lambda: line_producer.split_keys_py(records, separator, nulls))  # type: ignore[arg-type]
    assert _outcome(lambda: kernels.split_keys(records, separator, nulls)) == py
    py = _outcome(lambda: line_producer.null_values_py(records, nulls))  # type: ignore[arg-type]
    assert _outcome(lambda: kernels.null_values(records, nulls)) == py


@compiled
@settings(max_examples=examples(400))
@given(st.lists(st.binary(max_size=8) | st.sampled_from(
    [b"", b":", b"::", b"a:b", b"NULL", b"NULL:", b":NULL", b"NULL:NULL", b"NUL", b"NULLL",
     b"k:", b":v", b"\x00"]), max_size=20),
       st.sampled_from([b":", b"::", b"\x00", b"L"]), st.sampled_from(NULLS))
def test_null_field_twins_agree(records: list[bytes], separator: bytes,
                                nulls: frozenset[bytes]) -> None:
    _nulls_agree(records, separator, nulls)  # type: ignore[arg-type]


@compiled
@pytest.mark.parametrize("kind", PIPED)
@pytest.mark.parametrize("nulls", NULLS[1:4])
def test_null_field_twins_agree_on_piped_lines(kind: str, nulls: frozenset[bytes]) -> None:
    lines = _lines(kind, 2000, random.Random(11))
    lines[::3] = [b"", b"k ", b" v", b"NULL", b"k NULL", b"NULL v", b"NULL NULL", b" "
                  ] * (len(lines[::3]) // 8) + [b""] * (len(lines[::3]) % 8)
    _nulls_agree(lines, b" ", nulls)  # type: ignore[arg-type]


@compiled
def test_null_values_returns_its_list_when_none_is_null() -> None:
    """No copy of a chunk without a null field, in both twins; a new list otherwise (the
    chunk itself is never changed)."""
    assert kernels is not None
    values = [b"a", b"b"]
    for twin in (kernels.null_values, line_producer.null_values_py):
        assert twin(values, frozenset({b""})) is values
        assert twin(values, frozenset()) is values
        out = twin(values, frozenset({b"b"}))
        assert out == [b"a", None] and values == [b"a", b"b"]
    assert kernels.split_keys([b"a:b"], b":", frozenset()) == ([b"a"], [b"b"])
    assert kernels.split_keys([b"a:b"], b":", None) == ([b"a"], [b"b"])


@compiled
@pytest.mark.parametrize(("records", "separator", "nulls"), [
    ([b"a:", b""], b":", [b""]),  # a list of spellings
    ([b"a:", b""], b":", (b"",)),
    ([b"a:", b"x"], b":", [bytearray(b""), b"x"]),  # not bytes: compared with ==
    ([b"a:", b"x"], b":", ["", "x"]),  # str: never equal to bytes
    ((b"a:", b""), b":", frozenset({b""})),  # a tuple of records
    ([bytearray(b"a:"), b"", memoryview(b"NULL")], b":", frozenset({b"", b"NULL"})),
    ([b"a:"], b"", frozenset({b""})),  # empty separator: ValueError
    ([b"a:", 7], b":", frozenset({b""})),  # not bytes: AttributeError in partition
    ([None, b""], b":", frozenset({b""})),
    ([], b":", frozenset({b""})),
    ([b"a:b"], b":", 5),  # not a collection: TypeError
])
def test_null_field_twins_agree_on_odd_inputs(records: list[object], separator: object,
                                              nulls: object) -> None:
    _nulls_agree(records, separator, nulls)
