"""record.columns (the columnar encoder) against encode_record (the general one): the same
bytes for values and keys of any lengths, from any offset delta, at every table edge, and
batches filled to exactly the record that does not fit. Null keys and values (None: length
-1, a tombstone's value) too, by the compiled encoders and by their pure-Python twins."""

from __future__ import annotations

import random
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.record import columns
from kafkactl.record._accel import kernels
from kafkactl.record.batch import encode_record
from kafkactl.record.columns import (
    MAX_DELTA,
    MAX_FIELDS,
    RUN,
    EncodeKeyValues,
    EncodeValues,
    encode_key_values,
    encode_values,
)
from tests.hypothesis_profiles import examples

# Lengths where a varint grows a byte, and the tables' own limits.
EDGE_LENGTHS = [0, 1, 62, 63, 64, 65, 127, 128, 8191, 8192, MAX_FIELDS // 2,
                MAX_FIELDS // 2 + 1, MAX_FIELDS, MAX_FIELDS + 1]
EDGE_DELTAS = [0, 1, 62, 63, 64, 65, 8190, 8191, 8192, 8193, MAX_DELTA - 1, MAX_DELTA]


def general(keys: list[bytes | None] | None, values: list[bytes] | list[bytes | None],
            first_delta: int) -> list[bytes]:
    ks = keys if keys is not None else [None] * len(values)
    return [encode_record(first_delta + i, 0, k, v, ()) for i, (k, v) in
            enumerate(zip(ks, values, strict=True))]


def check(keys: list[bytes | None] | None, values: list[bytes] | list[bytes | None],
          first_delta: int, room: int, encoders: tuple[EncodeValues, EncodeKeyValues] = (
              encode_values, encode_key_values)) -> int:
    """Encode from index 0 (by `encoders`: the module's, compiled when the kernels are in
    use) and compare with the general encoder; returns the count."""
    if keys is None:
        parts, end, used = encoders[0](values, 0, first_delta, room)
    else:
        parts, end, used = encoders[1](keys, values, 0, first_delta, room)
    records = general(None if keys is None else keys[:end], values[:end], first_delta)
    assert b"".join(parts) == b"".join(records)
    assert used == sum(map(len, records))
    assert used <= room or (end == 1 and first_delta == 0)  # a batch takes its first record
    if end < len(values):
        key = None if keys is None else keys[end]
        nxt = encode_record(first_delta + end, 0, key, values[end], ())
        longest = MAX_FIELDS if keys is None else MAX_FIELDS // 2
        # it stopped for room, at the tables' end, or at a field too long for them
        assert (used + len(nxt) > room or first_delta + end >= MAX_DELTA
                or len(values[end] or b"") > longest or len(key or b"") > longest)
    return end


field = st.one_of(st.binary(max_size=300), st.sampled_from(EDGE_LENGTHS).map(lambda n: b"v" * n))
maybe_key = st.one_of(st.none(), st.binary(max_size=40),
                      st.sampled_from([0, 63, 64, MAX_FIELDS // 2, MAX_FIELDS // 2 + 1])
                      .map(lambda n: b"k" * n))


@settings(max_examples=examples(150))
@given(st.lists(field, max_size=60), st.sampled_from(EDGE_DELTAS),
       st.one_of(st.integers(min_value=0, max_value=5000), st.just(1 << 40)))
def test_values_like_the_general_encoder(values: list[bytes], first_delta: int,
                                         room: int) -> None:
    check(None, values, first_delta, room)


@settings(max_examples=examples(150))
@given(st.lists(st.tuples(maybe_key, field), max_size=60), st.sampled_from(EDGE_DELTAS),
       st.one_of(st.integers(min_value=0, max_value=5000), st.just(1 << 40)))
def test_key_values_like_the_general_encoder(pairs: list[tuple[bytes | None, bytes]],
                                             first_delta: int, room: int) -> None:
    check([k for k, _ in pairs], [v for _, v in pairs], first_delta, room)


@pytest.mark.parametrize("count", [63, 64, 65, 8191, 8192, 8193, RUN - 1, RUN, RUN + 1,
                                   MAX_DELTA, MAX_DELTA + 1])
def test_offset_delta_classes_and_runs(count: int) -> None:
    """Runs across the one-, two- and three-byte offset deltas and RUN-record steps, up to
    the tables' end (MAX_DELTA records: the caller encodes the rest)."""
    values = [b"%d" % i * (i % 7) for i in range(count)]
    assert check(None, values, 0, 1 << 40) == min(count, MAX_DELTA)
    keys: list[bytes | None] = [None if i % 5 == 0 else b"k%d" % i for i in range(count)]
    assert check(keys, values, 0, 1 << 40) == min(count, MAX_DELTA)


@pytest.mark.parametrize("slack", [-1, 0, 1])
@pytest.mark.parametrize("keyed", [False, True])
def test_room_one_below_at_and_one_above_a_whole_record(slack: int, keyed: bool) -> None:
    values = [b"x" * (50 + i * 37 % 400) for i in range(100)]
    keys: list[bytes | None] | None = [b"10.0.0.%d" % i for i in range(100)] if keyed else None
    room = sum(map(len, general(None if keys is None else keys[:40], values[:40], 0))) + slack
    assert check(keys, values, 0, room) == (40 if slack >= 0 else 39)


def test_first_record_of_a_batch_always_fits() -> None:
    assert check(None, [b"x" * 1000, b"y"], 0, 10) == 1
    assert check([b"k"], [b"x" * 1000], 0, 10) == 1
    assert check(None, [b"x" * 1000], 5, 10) == 0  # not the first record: it does not fit


def test_empty_keys_values_and_null_keys_differ() -> None:
    keys: list[bytes | None] = [None, b"", b"k", None]
    values = [b"", b"", b"", b"v"]
    assert check(keys, values, 0, 1 << 40) == 4


def test_real_inputs() -> None:
    """`seq`, `yes | head`, log lines of many lengths, binary."""
    seq = subprocess.run(["seq", "1", "20000"], capture_output=True, check=True).stdout
    yes = subprocess.run("yes | head -n 5000", shell=True, capture_output=True,
                         check=True).stdout
    rng = random.Random(20)
    logs = b"\n".join(b"10.1.%d.%d - - \"GET /%s HTTP/1.1\" 200" % (
        rng.randrange(256), rng.randrange(256), b"a" * rng.randrange(20, 480))
        for _ in range(3000))
    binary = bytes(rng.randrange(256) for _ in range(200_000))
    for data in (seq, yes, logs, binary, b"one line, no trailing newline", b"a\r\nb\r\n"):
        values = data.split(b"\n")
        expected = min(len(values), MAX_DELTA)  # the caller encodes records past the tables
        assert check(None, values, 0, 1 << 40) == expected
        split = [v.partition(b" ") for v in values]
        keys = [k if sep else None for k, sep, _ in split]
        assert check(keys, [v if sep else k for k, sep, v in split], 0, 1 << 40) == expected


# -- null keys and values (None): by both twins --------------------------------------------

TWINS = {"pure": (columns.encode_values_py, columns.encode_key_values_py)}
if kernels is not None:
    TWINS["compiled"] = (kernels.encode_values, kernels.encode_key_values)


@pytest.fixture(params=["pure", "compiled"])
def twin(request: pytest.FixtureRequest) -> tuple[EncodeValues, EncodeKeyValues]:
    if request.param not in TWINS:
        pytest.skip("the compiled kernels are not in use")
    return TWINS[request.param]


def check_both(keys: list[bytes | None] | None, values: list[bytes | None], first_delta: int,
               room: int) -> int:
    """check() by each twin: the same count."""
    counts = {name: check(keys, values, first_delta, room, encoders)
              for name, encoders in TWINS.items()}
    assert len(set(counts.values())) == 1, counts
    return counts["pure"]


maybe_value = st.one_of(st.none(), field)


@settings(max_examples=examples(200))
@given(st.lists(maybe_value, max_size=60), st.sampled_from(EDGE_DELTAS),
       st.one_of(st.integers(min_value=0, max_value=5000), st.just(1 << 40)))
def test_null_values_like_the_general_encoder(values: list[bytes | None], first_delta: int,
                                              room: int) -> None:
    check_both(None, values, first_delta, room)


@settings(max_examples=examples(200))
@given(st.lists(st.tuples(maybe_key, maybe_value), max_size=60), st.sampled_from(EDGE_DELTAS),
       st.one_of(st.integers(min_value=0, max_value=5000), st.just(1 << 40)))
def test_null_keys_and_values_like_the_general_encoder(
        pairs: list[tuple[bytes | None, bytes | None]], first_delta: int, room: int) -> None:
    check_both([k for k, _ in pairs], [v for _, v in pairs], first_delta, room)


@pytest.mark.parametrize("count", [63, 64, 65, RUN - 1, RUN, RUN + 1, 8191, 8192, 8193,
                                   MAX_DELTA - 1, MAX_DELTA, MAX_DELTA + 1])
@pytest.mark.parametrize("where", ["all", "every-other", "every-third", "edges"])
def test_nulls_across_the_offset_delta_classes_and_runs(count: int, where: str) -> None:
    """Null values (and keys) at every record, every other or third, or at the records
    where an offset delta grows a byte, a RUN-record step ends and the tables end."""
    edges = {0, 62, 63, 64, RUN - 1, RUN, 8190, 8191, 8192, MAX_DELTA - 1, MAX_DELTA,
             count - 1}
    at = {"all": range(count), "every-other": range(0, count, 2),
          "every-third": range(2, count, 3), "edges": [i for i in edges if i < count]}[where]
    values: list[bytes | None] = [b"%d" % i * (i % 7) for i in range(count)]
    keys: list[bytes | None] = [b"k%d" % i for i in range(count)]
    for i in at:
        values[i] = None
        keys[i] = None if i % 2 else keys[i]
    want = min(count, MAX_DELTA)
    assert check_both(None, values, 0, 1 << 40) == want
    assert check_both(keys, values, 0, 1 << 40) == want
    assert check_both([None] * count, values, 0, 1 << 40) == want
    for first_delta in (63, 8191, MAX_DELTA - 3):
        check_both(keys[:200], values[:200], first_delta, 1 << 40)


@pytest.mark.parametrize("slack", [-1, 0, 1])
@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("null_at", ["last-in", "first-out", "both"])
def test_room_one_below_at_and_one_above_a_null_record(slack: int, keyed: bool,
                                                       null_at: str) -> None:
    """The room ends at the end of record 40 (give or take a byte): a null as the last
    record that fits and as the first that does not, each counted at its true size."""
    values: list[bytes | None] = [b"x" * (50 + i * 37 % 400) for i in range(100)]
    keys: list[bytes | None] | None = ([b"10.0.0.%d" % i for i in range(100)] if keyed
                                       else None)
    for i in {"last-in": [39], "first-out": [40], "both": [39, 40]}[null_at]:
        values[i] = None
        if keys is not None:
            keys[i] = None
    room = sum(map(len, general(None if keys is None else keys[:40], values[:40], 0))) + slack
    assert check_both(keys, values, 0, room) == (40 if slack >= 0 else 39)


def test_a_null_beside_a_field_past_the_tables() -> None:
    """The run stops at the value (or key) too long for the tables, nulls before and
    after it: the caller encodes the long one."""
    long = b"v" * (MAX_FIELDS + 1)
    assert check_both(None, [None, b"a", None, long, None], 0, 1 << 40) == 3
    assert check_both(None, [long, None], 0, 1 << 40) == 0
    half = b"k" * (MAX_FIELDS // 2 + 1)
    assert check_both([None, b"k", half, None], [None, None, b"v", None], 0, 1 << 40) == 2
    assert check_both([None, None], [None, half], 0, 1 << 40) == 1


def test_a_null_is_not_an_empty_field() -> None:
    """A null and an empty field take the same bytes but differ in one: 01 against 00."""
    keys: list[bytes | None] = [None, b"", None, b""]
    values: list[bytes | None] = [None, None, b"", b""]
    assert check_both(keys, values, 0, 1 << 40) == 4
    for name, (ev, ekv) in TWINS.items():
        null_value = b"".join(ev([None], 0, 0, 1 << 20)[0])
        empty_value = b"".join(ev([b""], 0, 0, 1 << 20)[0])
        assert (null_value, empty_value) == (b"\x0c\x00\x00\x00\x01\x01\x00",
                                             b"\x0c\x00\x00\x00\x01\x00\x00"), name
        both = b"".join(ekv([None], [None], 0, 0, 1 << 20)[0])
        assert both == null_value, name


def test_the_twins_refuse_what_is_neither_bytes_nor_none(
        twin: tuple[EncodeValues, EncodeKeyValues]) -> None:
    encode_v, encode_kv = twin
    for values in ([7], [None, 7], [b"a", None, 3.5]):
        with pytest.raises(TypeError):
            encode_v(values, 0, 0, 1 << 20)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            encode_kv([None] * len(values), values, 0, 0, 1 << 20)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_kv([None, 7], [b"a", None], 0, 0, 1 << 20)  # type: ignore[list-item]


def test_real_inputs_with_nulls() -> None:
    """`seq` with every third line a tombstone, `yes ''` (all null), log lines of many
    lengths and binary with their empty records null (-Z), keyed by their first word."""
    seq = subprocess.run(["seq", "1", "20000"], capture_output=True, check=True).stdout
    rng = random.Random(21)
    logs = b"\n".join(b"10.1.%d.%d - - \"GET /%s HTTP/1.1\" 200" % (
        rng.randrange(256), rng.randrange(256), b"a" * rng.randrange(0, 480))
        if rng.random() < 0.8 else b"" for _ in range(3000))
    binary = bytes(rng.randrange(256) for _ in range(200_000))
    for data in (seq, b"\n" * 20_000, logs, binary):
        lines = data.split(b"\n")
        values: list[bytes | None] = [None if (i % 3 == 2 and data is seq) or not line
                                      else line for i, line in enumerate(lines)]
        expected = min(len(values), MAX_DELTA)
        assert check_both(None, values, 0, 1 << 40) == expected
        split = [line.partition(b" ") for line in lines]
        keys = [(k or None) if sep else None for k, sep, _ in split]
        kvs = [None if (sep and not v) or not line else (v if sep else k)
               for line, (k, sep, v) in zip(lines, split, strict=True)]
        assert check_both(keys, kvs, 0, 1 << 40) == expected
        for room in (0, 100, 16_384):
            check_both(keys, kvs, 0, room)
            check_both(None, values, 5, room)
