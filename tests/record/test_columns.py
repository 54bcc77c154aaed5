"""record.columns (the columnar encoder) against encode_record (the general one): the same
bytes for values and keys of any lengths, from any offset delta, at every table edge, and
batches filled to exactly the record that does not fit."""

from __future__ import annotations

import random
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.record.batch import encode_record
from kafkactl.record.columns import (
    MAX_DELTA,
    MAX_FIELDS,
    RUN,
    encode_key_values,
    encode_values,
)
from tests.hypothesis_profiles import examples

# Lengths where a varint grows a byte, and the tables' own limits.
EDGE_LENGTHS = [0, 1, 62, 63, 64, 65, 127, 128, 8191, 8192, MAX_FIELDS // 2,
                MAX_FIELDS // 2 + 1, MAX_FIELDS, MAX_FIELDS + 1]
EDGE_DELTAS = [0, 1, 62, 63, 64, 65, 8190, 8191, 8192, 8193, MAX_DELTA - 1, MAX_DELTA]


def general(keys: list[bytes | None] | None, values: list[bytes], first_delta: int
            ) -> list[bytes]:
    ks = keys if keys is not None else [None] * len(values)
    return [encode_record(first_delta + i, 0, k, v, ()) for i, (k, v) in
            enumerate(zip(ks, values, strict=True))]


def check(keys: list[bytes | None] | None, values: list[bytes], first_delta: int,
          room: int) -> int:
    """Encode from index 0 and compare with the general encoder; returns the count."""
    if keys is None:
        parts, end, used = encode_values(values, 0, first_delta, room)
    else:
        parts, end, used = encode_key_values(keys, values, 0, first_delta, room)
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
                or len(values[end]) > longest or len(key or b"") > longest)
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
