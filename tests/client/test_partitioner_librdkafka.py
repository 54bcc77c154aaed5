"""librdkafka's partitioners by their names, as librdkafka places records
(src/rdkafka_msg.c: rd_kafka_msg_partitioner_*, and its sticky partition for the names
that send null keys "randomly"): consistent (kafkactl's crc32) hashes every key, empty and
null alike (partition 0); consistent_random (librdkafka's default, kcat's) hashes a
non-empty key and spreads empty and null ones; fnv1a hashes every key (a null one as
empty), fnv1a_random spreads null keys; murmur2_random is the Java client's murmur2."""

from __future__ import annotations

import ctypes
import zlib

import pytest

from kafkactl.client.partitioner import Partitioner, fnv1a, murmur2_partition

# librdkafka's unittest_fnv1a (src/rdfnv1a.c): the hashes Go's hash/fnv gives, as int32
FNV1A = [(b"kafka", 0xd33c4e1), (b"giberish123456789", 0x77a58295), (b"1234", 0x23bdd03),
         (b"234", 0x2dea3cd2), (b"34", 0x740fa83e), (b"4", 0x310ca263),
         (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x65cbd69c),
         (b"reAmbleWillBeRemoved,ThePrePartThatIs", 0x6e49c79a),
         (b"eAmbleWillBeRemoved,ThePrePartThatIs", 0x69eed356),
         (b"AmbleWillBeRemoved,ThePrePartThatIs", 0x6abcc023), (b"", 0x7ee3623b)]


@pytest.mark.parametrize("key,want", FNV1A)
def test_fnv1a_is_librdkafkas(key: bytes, want: int) -> None:
    assert ctypes.c_int32(fnv1a(key)).value == want


def _spread(p: Partitioner, key: bytes | None, n: int = 8) -> set[int]:
    """The partitions `key` went to over many batches (the sticky one moves per batch)."""
    seen = set()
    for _ in range(200):
        got = p.partition("t", key, n)
        seen.add(got)
        p.on_new_batch("t", got, n)
    return seen


def test_consistent_hashes_every_key_empty_and_null_to_partition_0() -> None:
    for name in ("crc32", "consistent"):
        p = Partitioner(name)
        assert p.name == "crc32" and not p.is_sticky
        assert _spread(p, b"") == _spread(p, None) == {zlib.crc32(b"") % 8} == {0}
        assert p.partition("t", b"key", 7) == zlib.crc32(b"key") % 7
        assert p.sticky_partition("t", 8, [3, 5]) == 0  # (a hash: no leader needed)


def test_consistent_random_spreads_empty_and_null_keys() -> None:
    p = Partitioner("consistent_random")
    assert p.is_sticky
    assert len(_spread(p, b"")) > 1 and len(_spread(p, None)) > 1
    first = p.partition("t", b"", 8)
    assert p.partition("t", None, 8) == first  # one sticky partition until the batch ends
    assert p.partition("t", b"key", 7) == zlib.crc32(b"key") % 7


def test_fnv1a_and_fnv1a_random() -> None:
    p = Partitioner("fnv1a")
    assert not p.is_sticky
    assert _spread(p, None) == _spread(p, b"") == {fnv1a(b"") % 8}
    assert p.partition("t", b"kafka", 7) == 0xd33c4e1 % 7
    r = Partitioner("fnv1a_random")
    assert r.is_sticky
    assert len(_spread(r, None)) > 1
    assert _spread(r, b"") == {fnv1a(b"") % 8}  # (an empty key is a key: hashed)
    assert r.partition("t", b"kafka", 7) == 0xd33c4e1 % 7


def test_murmur2_random_is_the_java_clients_murmur2() -> None:
    p = Partitioner("murmur2_random")
    assert p.name == "murmur2" and p.is_sticky
    assert len(_spread(p, None)) > 1
    assert _spread(p, b"") == {murmur2_partition(b"", 8)}
