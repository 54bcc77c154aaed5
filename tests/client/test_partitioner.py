"""Partitioners: murmur2 must put a key where the Java client's formula puts it."""

from __future__ import annotations

import ctypes
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.client.partitioner import (
    Partitioner,
    crc32_partition,
    load_user_partitioner,
    murmur2,
    murmur2_partition,
    to_positive,
)
from tests.hypothesis_profiles import examples

# Published vectors: Apache Kafka's UtilsTest.testMurmur2 (clients/src/test/.../UtilsTest.java).
PUBLISHED = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def java_murmur2(data: bytes) -> int:
    """An independent transcription of Utils.murmur2 using Java int32 wrap-around (ctypes)."""
    i32 = lambda v: ctypes.c_int32(v).value  # noqa: E731
    u = lambda v: v & 0xFFFFFFFF  # noqa: E731 - Java's >>> works on the unsigned bits
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = i32(0x9747B28C ^ length)
    for i in range(length // 4):
        b = data[i * 4:i * 4 + 4]
        k = i32(b[0] + (b[1] << 8) + (b[2] << 16) + (b[3] << 24))
        k = i32(k * m)
        k = i32(k ^ (u(k) >> r))
        k = i32(k * m)
        h = i32(h * m)
        h = i32(h ^ k)
    tail = length % 4
    base = length & ~3
    if tail >= 3:
        h = i32(h ^ (data[base + 2] << 16))
    if tail >= 2:
        h = i32(h ^ (data[base + 1] << 8))
    if tail >= 1:
        h = i32(h ^ data[base])
        h = i32(h * m)
    h = i32(h ^ (u(h) >> 13))
    h = i32(h * m)
    h = i32(h ^ (u(h) >> 15))
    return h


@pytest.mark.parametrize("key,expected", PUBLISHED)
def test_murmur2_published_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert java_murmur2(key) == expected


@settings(max_examples=examples(300))
@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_murmur2_matches_java_formula(key: bytes, n: int) -> None:
    assert murmur2(key) == java_murmur2(key)
    assert murmur2_partition(key, n) == (java_murmur2(key) & 0x7FFFFFFF) % n


def test_known_partitions() -> None:
    # toPositive(-790332482) = 1357151166; % 3 = 0 ... computed from the published hash.
    assert to_positive(-790332482) == 1357151166
    assert murmur2_partition(b"foobar", 3) == 1357151166 % 3
    assert murmur2_partition(b"abc", 7) == 479470107 % 7


def test_crc32_is_librdkafka_consistent() -> None:
    assert crc32_partition(b"key", 10) == zlib.crc32(b"key") % 10
    assert crc32_partition(None, 10) == 0


def test_sticky_null_keys_switch_after_batch() -> None:
    p = Partitioner("murmur2")
    first = p.partition("t", None, 4)
    assert all(p.partition("t", None, 4) == first for _ in range(50))
    p.on_new_batch("t", first, 4)
    assert p.partition("t", None, 4) != first
    assert p.partition("t", b"foobar", 3) == murmur2_partition(b"foobar", 3)


def test_roundrobin_and_random() -> None:
    rr = Partitioner("roundrobin")
    assert [rr.partition("t", b"k", 3) for _ in range(6)] == [0, 1, 2, 0, 1, 2]
    rnd = Partitioner("random")
    assert {rnd.partition("t", b"k", 3) for _ in range(300)} == {0, 1, 2}


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("sizes", [[0], [1], [5, 0, 9], [63, 64, 65], [1000, 1, 2]])
def test_roundrobin_spread_is_partition_record_by_record(n: int, sizes: list[int]) -> None:
    """The grouped path gives each value the partition partition() would, call after call
    (the counter carries over, also into partition() afterwards), in order per partition."""
    grouped, one_by_one = Partitioner("roundrobin"), Partitioner("roundrobin")
    k = 0
    for size in sizes:
        values = [b"v%d" % (k + i) for i in range(size)]
        k += size
        want: dict[int, list[bytes]] = {}
        for v in values:
            want.setdefault(one_by_one.partition("t", None, n), []).append(v)
        got = grouped.spread("t", values, n)
        assert len({p for p, _ in got}) == len(got) == len(want)
        assert {p: list(vs) for p, vs in got} == want
        assert all(vs for _, vs in got)
    assert grouped.partition("t", None, n) == one_by_one.partition("t", None, n)
    assert grouped.spread("other", [b"a"], n) == [(0, [b"a"])]  # a counter per topic


def test_random_spread_keeps_every_value_once_in_order() -> None:
    values = [b"%d" % i for i in range(3000)]
    got = Partitioner("random").spread("t", tuple(values), 5)
    assert {p for p, _ in got} == set(range(5))
    assert sorted(v for _, vs in got for v in vs) == sorted(values)
    for _, vs in got:
        assert [int(v) for v in vs] == sorted(int(v) for v in vs)
    with pytest.raises(ValueError, match="does not spread"):
        Partitioner("murmur2").spread("t", values, 5)
    with pytest.raises(ValueError, match="no partitions"):
        Partitioner("random").spread("t", values, 0)


def last_partition(topic: str, key: bytes | None, n: int) -> int:
    return n - 1


def test_user_partitioner() -> None:
    p = Partitioner(f"{__name__}:last_partition")
    assert p.partition("t", b"x", 5) == 4
    with pytest.raises(ValueError, match="module:function"):
        load_user_partitioner("nonsense")
    with pytest.raises(ValueError, match="cannot import"):
        load_user_partitioner("no_such_module_xyz:f")
    with pytest.raises(ValueError, match="no callable"):
        load_user_partitioner(f"{__name__}:NOPE")
