"""The producer's bulk encoders with a timestamp delta (`ts_delta`: the clock reading of the
producer's call against the batch timestamp, as Kafka's KafkaProducer.doSend stamps each
record with its send time): record/columns.py's `encode_values_py`, `encode_key_values_py`
and `encode_lines_into_py` (the definition) write every record of the call with it, byte
for byte what `encode_record` writes for that record; their compiled twins in
record/_kernels.pyx give the same bytes, count and size, or the same error class and message.

The deltas are taken where the zigzag varlong grows a byte (63/64 and -64/-65 ms: 1 to 2
bytes; 8191/8192 and -8192/-8193: 2 to 3; 2**20: 3 to 4) and at the int64 limits; the
offset deltas where their varint grows and at the tables' end (MAX_DELTA); the room of
the batch one below, at and one above the exact size of the first k records, which a
longer timestamp delta makes longer. Under KAFKACTL_NO_EXTENSIONS=1 (scripts/test.sh's
pure step) the reference checks run and the twin comparisons skip."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.record import _accel, columns
from kafkactl.record.batch import encode_record
from kafkactl.record.columns import (
    MAX_DELTA,
    MAX_FIELDS,
    encode_key_values_py,
    encode_lines_into_py,
    encode_values_py,
)
from kafkactl.record.varint import INT64_MAX, INT64_MIN
from tests.hypothesis_profiles import examples

kernels = _accel.kernels
compiled = pytest.mark.skipif(kernels is None, reason=f"pure Python: {_accel.REASON}")

# Where the timestamp delta's zigzag varlong grows a byte, both signs, and its limits.
TS_EDGES = [0, 1, 63, 64, 65, -1, -64, -65, 8191, 8192, 8193, -8192, -8193,
            (1 << 20) - 1, 1 << 20, 70_000, 1_700_000_000_000, -(1 << 40),
            INT64_MAX, INT64_MIN]
DELTA_EDGES = [0, 1, 63, 64, 8191, 8192, MAX_DELTA - 2, MAX_DELTA - 1]
Keys = list[bytes | None]
Values = list[bytes | None]


def general(keys: Keys | None, values: Values, first_delta: int, ts_delta: int) -> list[bytes]:
    """The general encoder's records (`encode_record`)."""
    ks: Keys = keys if keys is not None else [None] * len(values)
    return [encode_record(first_delta + i, ts_delta, k, v, ())
            for i, (k, v) in enumerate(zip(ks, values, strict=True))]


def columnar(keys: Keys | None, values: Values, start: int, first_delta: int, room: int,
             ts_delta: int, twin: bool = False) -> tuple[bytes, int, int]:
    """encode_values / encode_key_values (the reference, or with `twin` the compiled one):
    the records joined, the index after them and their size."""
    if twin:
        assert kernels is not None
        ev: Callable[..., tuple[list[bytes], int, int]] = kernels.encode_values
        ekv: Callable[..., tuple[list[bytes], int, int]] = kernels.encode_key_values
    else:
        ev, ekv = encode_values_py, encode_key_values_py
    if keys is None:
        parts, end, used = ev(values, start, first_delta, room, ts_delta)
    else:
        parts, end, used = ekv(keys, values, start, first_delta, room, ts_delta)
    return b"".join(parts), end, used


def lines(values: list[bytes], ksep: bytes | None, first_delta: int, room: int,
          ts_delta: int, twin: bool = False, offset: int = 3) -> tuple[bytes, int, int, int]:
    """encode_lines_into of the values as `\\n`-ended lines into `room` bytes at `offset`:
    the whole output buffer, the position after the records, count and size."""
    fn = encode_lines_into_py
    if twin:
        assert kernels is not None
        fn = kernels.encode_lines_into
    data = b"".join(v + b"\n" for v in values)
    out = bytearray([0xA5]) * (offset + room)
    after, count, used = fn(data, 0, len(data), b"\n", ksep, first_delta, out, offset,
                            b"\x00", ts_delta)
    return bytes(out), after, count, used


def split(values: list[bytes], ksep: bytes | None) -> tuple[Keys | None, Values]:
    if ksep is None:
        return None, list(values)
    keys: Keys = []
    vals: Values = []
    for line in values:
        k, sep, v = line.partition(ksep)
        keys.append(k if sep else None)
        vals.append(v if sep else line)
    return keys, vals


def piped(n: int, rng: random.Random) -> list[bytes]:
    """Lines as users pipe them: seq numbers, `key value` pairs, empty and long ones."""
    out = []
    for i in range(n):
        kind = i % 5
        out.append(b"%d" % i if kind == 0 else b"k%d v%d" % (i % 7, i) if kind == 1
                   else b"" if kind == 2 else b" " + b"x" * rng.randrange(100) if kind == 3
                   else b"y" * rng.choice([63, 64, 65, 200]))
    return out


# ---- the reference: encode_record's bytes with the call's timestamp delta ----------------------

@pytest.mark.parametrize("ts_delta", TS_EDGES)
@pytest.mark.parametrize("first_delta", DELTA_EDGES)
@pytest.mark.parametrize("keyed", [False, True])
def test_the_reference_writes_the_calls_timestamp_delta(ts_delta: int, first_delta: int,
                                                        keyed: bool) -> None:
    values = piped(40, random.Random(first_delta))
    vals: Values = [None if i % 9 == 4 else v for i, v in enumerate(values)]
    keys: Keys | None = ([None if i % 4 == 0 else b"k%d" % i for i in range(len(vals))]
                         if keyed else None)
    records, end, used = columnar(keys, vals, 0, first_delta, 1 << 20, ts_delta)
    want = general(keys, vals, first_delta, ts_delta)
    n = min(len(vals), MAX_DELTA - first_delta)  # the tables end at MAX_DELTA
    assert (records, end, used) == (b"".join(want[:n]), n, sum(map(len, want[:n])))


@pytest.mark.parametrize("ts_delta", TS_EDGES)
@pytest.mark.parametrize("first_delta", [0, 63, 64, 8191, 8192, MAX_DELTA])
@pytest.mark.parametrize("ksep", [None, b" "])
def test_the_lines_reference_writes_the_calls_timestamp_delta(ts_delta: int, first_delta: int,
                                                              ksep: bytes | None) -> None:
    values = piped(40, random.Random(first_delta))
    out, after, count, used = lines(values, ksep, first_delta, 1 << 16, ts_delta)
    keys, vals = split(values, ksep)
    want = b"".join(general(keys, vals, first_delta, ts_delta))
    assert (after, count, used) == (sum(len(v) + 1 for v in values), len(values), len(want))
    assert out[3:3 + used] == want and out[:3] == b"\xa5" * 3
    assert out[3 + used:] == b"\xa5" * ((1 << 16) - used)


@pytest.mark.parametrize("ts_delta", [INT64_MIN, INT64_MAX])
@pytest.mark.parametrize("keyed", [False, True])
def test_the_longest_fields_with_the_longest_timestamp_delta(ts_delta: int, keyed: bool
                                                             ) -> None:
    """The tables' longest fields at the last offset delta they cover, with a ten-byte
    timestamp delta: the record's length still in the tables' varints."""
    longest = MAX_FIELDS // 2 if keyed else MAX_FIELDS
    vals: Values = [b"v" * longest, b"w" * (longest + 1)]
    keys: Keys | None = [b"k" * longest, b"k"] if keyed else None
    records, end, used = columnar(keys, vals, 0, MAX_DELTA - 1, 1 << 20, ts_delta)
    want = general(None if keys is None else keys[:1], vals[:1], MAX_DELTA - 1, ts_delta)
    assert (records, end, used) == (want[0], 1, len(want[0]))
    if kernels is not None:
        assert columnar(keys, vals, 0, MAX_DELTA - 1, 1 << 20, ts_delta, twin=True) == \
            (records, end, used)


@pytest.mark.parametrize("ts_delta", [0, 63, 64, -65, 8192, 1_700_000_000_000, INT64_MIN])
@pytest.mark.parametrize("n", [1, 2, 64, 100])
@pytest.mark.parametrize("slack", [-1, 0, 1])
@pytest.mark.parametrize("path", ["values", "key_values", "lines", "key_lines"])
def test_a_batch_is_filled_to_the_record_that_does_not_fit(ts_delta: int, n: int, slack: int,
                                                           path: str) -> None:
    """Room for exactly n records with this timestamp delta, one byte less, one more: n,
    n - 1 and n records (the first record of a batch, offset delta 0, always fits the
    column encoders; the lines encoder says what the first line needs); the twins the
    same."""
    values = [b"v%03d" % i for i in range(n + 5)]
    ksep = b":" if path.startswith("key") else None
    if ksep is not None:
        values = [b"k%d:" % (i % 3) + v for i, v in enumerate(values)]
    keys, vals = split(values, ksep)
    want = general(keys, vals, 0, ts_delta)
    room = sum(map(len, want[:n])) + slack
    k = n if slack >= 0 else max(n - 1, 1)
    if path.endswith("lines"):
        got: tuple[object, ...] = lines(values, ksep, 0, room, ts_delta)
        k = n if slack >= 0 else n - 1
        body = b"".join(want[:k])
        if k:
            assert got[1:] == (sum(len(v) + 1 for v in values[:k]), k, len(body))
        else:  # not even the first: what it needs
            assert got[1:] == (0, 0, len(want[0]))
        assert got[0][3:3 + len(body)] == body  # type: ignore[index]
    else:
        got = columnar(keys, vals, 0, 0, room, ts_delta)
        assert got == (b"".join(want[:k]), k, sum(map(len, want[:k])))
    if kernels is not None:
        twin = (lines(values, ksep, 0, room, ts_delta, twin=True) if path.endswith("lines")
                else columnar(keys, vals, 0, 0, room, ts_delta, twin=True))
        assert twin == got


@pytest.mark.parametrize("ts_delta", [INT64_MAX + 1, INT64_MIN - 1, 1 << 70])
def test_a_timestamp_delta_out_of_int64_range_is_refused(ts_delta: int) -> None:
    """The reference's error (encode_varlong's), by the twins too, even with no record to
    encode."""
    message = f"varlong out of int64 range: {ts_delta}"
    calls: list[Callable[[], object]] = [
        lambda: encode_values_py([b"a"], 0, 0, 100, ts_delta),
        lambda: encode_key_values_py([b"k"], [b"a"], 0, 0, 100, ts_delta),
        lambda: encode_lines_into_py(b"a\n", 0, 2, b"\n", None, 0, bytearray(9), 0,
                                     b"\x00", ts_delta),
        lambda: encode_lines_into_py(b"", 0, 0, b"\n", None, 0, bytearray(9), 0,
                                     b"\x00", ts_delta),
    ]
    if kernels is not None:
        k = kernels
        calls += [
            lambda: k.encode_values([b"a"], 0, 0, 100, ts_delta),
            lambda: k.encode_key_values([b"k"], [b"a"], 0, 0, 100, ts_delta),
            lambda: k.encode_lines_into(b"a\n", 0, 2, b"\n", None, 0, bytearray(9), 0,
                                        b"\x00", ts_delta),
            lambda: k.encode_lines_into(b"", 0, 0, b"\n", None, 0, bytearray(9), 0,
                                        b"\x00", ts_delta),
        ]
    for call in calls:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == message


def test_the_module_picks_encoders_that_take_a_timestamp_delta() -> None:
    """What the producer calls (record.columns' encode_values, encode_key_values,
    encode_lines_into: compiled, or under KAFKACTL_NO_EXTENSIONS=1 the references) takes
    the timestamp delta."""
    records, end, used = columnar(None, [b"a"], 0, 0, 100, 0)
    assert b"".join(columns.encode_values([b"a"], 0, 0, 100, 64)[0]) == \
        encode_record(0, 64, None, b"a", ())
    assert b"".join(columns.encode_key_values([b"k"], [b"a"], 0, 0, 100, -65)[0]) == \
        encode_record(0, -65, b"k", b"a", ())
    out = bytearray(20)
    assert columns.encode_lines_into(b"a\n", 0, 2, b"\n", None, 0, out, 0, b"\x00", 8192)[1:] \
        == (1, len(encode_record(0, 8192, None, b"a", ())))
    assert (records, end) == (encode_record(0, 0, None, b"a", ()), 1)


# ---- the twins agree ----------------------------------------------------------------------------

ts_delta = st.one_of(st.sampled_from(TS_EDGES), st.integers(-(1 << 45), 1 << 45),
                     st.integers(INT64_MIN, INT64_MAX))
field = st.one_of(st.none(), st.binary(max_size=120),
                  st.sampled_from([0, 63, 64, 8191, 8192, MAX_FIELDS // 2, MAX_FIELDS // 2 + 1,
                                   MAX_FIELDS, MAX_FIELDS + 1]).map(lambda n: b"v" * n))
room = st.integers(0, 3000) | st.sampled_from([1 << 20, 1 << 40])


@compiled
@settings(max_examples=examples(400))
@given(st.lists(st.tuples(field, field), max_size=40), st.integers(0, 3),
       st.sampled_from(DELTA_EDGES + [MAX_DELTA]), room, ts_delta, st.booleans())
def test_twins_agree_with_any_timestamp_delta(pairs: list[tuple[bytes | None, bytes | None]],
                                              start: int, first_delta: int, room: int,
                                              ts: int, keyed: bool) -> None:
    keys: Keys | None = [k for k, _ in pairs] if keyed else None
    values: Values = [v for _, v in pairs]
    start = min(start, len(values))
    assert columnar(keys, values, start, first_delta, room, ts, twin=True) == \
        columnar(keys, values, start, first_delta, room, ts)


@compiled
@settings(max_examples=examples(300))
@given(st.lists(st.binary(max_size=80).filter(lambda b: b"\n" not in b)
                | st.sampled_from([b"", b"k v", b"k", b" v", b"v" * 64, b"w" * 8192]),
                max_size=30),
       st.sampled_from([None, b" ", b"::"]), st.sampled_from([0, 63, 64, 8191, 8192, 1 << 20]),
       room, ts_delta, st.integers(0, 5))
def test_lines_twins_agree_with_any_timestamp_delta(values: list[bytes], ksep: bytes | None,
                                                    first_delta: int, room: int, ts: int,
                                                    offset: int) -> None:
    room = min(room, 1 << 20)
    assert lines(values, ksep, first_delta, room, ts, twin=True, offset=offset) == \
        lines(values, ksep, first_delta, room, ts, offset=offset)


@compiled
@pytest.mark.parametrize("ts_delta", TS_EDGES)
@pytest.mark.parametrize("first_delta", [0, 63, 8191, MAX_DELTA - 5])
def test_twins_agree_on_piped_lines_with_a_timestamp_delta(ts_delta: int, first_delta: int
                                                           ) -> None:
    values = piped(5_000, random.Random(ts_delta & 0xFFFF))
    keys, vals = split(values, b" ")
    for room in (0, 100, 16_384, 1 << 20):
        for ks in (None, keys):
            for start in (0, 7):
                assert columnar(ks, vals, start, first_delta, room, ts_delta, twin=True) == \
                    columnar(ks, vals, start, first_delta, room, ts_delta)
        for ksep in (None, b" "):
            assert lines(values, ksep, first_delta, room, ts_delta, twin=True) == \
                lines(values, ksep, first_delta, room, ts_delta)
