"""Partitioners: which partition a record goes to.

Names follow librdkafka's `partitioner` property where they overlap:

* ``murmur2`` (default for keyed records): ``toPositive(murmur2(key)) % n``, exactly the Java
  client's DefaultPartitioner, so a key lands on the same partition as with the Java client.
  (librdkafka's ``murmur2_random`` is the same, its name here too; librdkafka's own
  ``murmur2`` differs in null keys only, which it sends to murmur2("")'s partition.)
* ``crc32`` (also ``consistent``): librdkafka's "consistent" partitioner,
  ``crc32(key) % n`` for every record: an empty and a null key hash as the empty string
  (partition 0).
* ``consistent_random``: librdkafka's default (kcat's): ``crc32(key) % n``, and an empty or
  null key a random (sticky) partition.
* ``fnv1a``: librdkafka's (Sarama's hash), ``fnv1a(key) % n`` for every record (a null key
  hashes as the empty string); ``fnv1a_random``: the same, a null key a random (sticky)
  partition.
* ``random`` and ``roundrobin``: ignore the key.
* null keys under murmur2, consistent_random and fnv1a_random (an empty key too under
  consistent_random) are "sticky": one partition is used until the batch being filled for
  it is sent, then another is chosen at random (KIP-480; librdkafka's
  sticky.partitioning.linger.ms moves on after a time instead), which keeps batches
  large.
* null keys, ``random`` and ``roundrobin`` choose among the partitions that have a leader
  when the producer says only some do (``available``), as Kafka's partitioners use the
  available partitions; a non-null key under murmur2/crc32 always maps over all of them
  (its partition does not change while that partition's leader is down).
* ``module:function``: a user partitioner called as ``fn(topic, key, num_partitions) -> int``
  (the seed's ``partitioner.class``).

``murmur2`` is the compiled kernel (record/_kernels.pyx) unless KAFKACTL_NO_EXTENSIONS=1 or
it is not built; ``murmur2_py`` stays the definition (tests/record/test_kernels.py proves
them equal).
"""

from __future__ import annotations

import importlib
import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from kafkactl.record._accel import kernels

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2_py(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2): returns the signed 32-bit Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for i in range(0, n4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[n4 + 2] << 16
    if rest >= 2:
        h ^= data[n4 + 1] << 8
    if rest >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


murmur2: Callable[[bytes], int] = murmur2_py if kernels is None else kernels.murmur2


def to_positive(n: int) -> int:
    """Java's Utils.toPositive: clear the sign bit."""
    return n & 0x7FFFFFFF


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


def crc32_partition(key: bytes | None, num_partitions: int) -> int:
    return zlib.crc32(key or b"") % num_partitions


def fnv1a(data: bytes) -> int:
    """librdkafka's rd_fnv1a (Sarama's NewHashPartitioner): 32-bit FNV-1a, its absolute
    value as an int32 (INT32_MIN stays as it is), unsigned."""
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & _MASK
    if h & 0x80000000:
        h = -(h - 0x100000000) & _MASK
    return h


def fnv1a_partition(key: bytes | None, num_partitions: int) -> int:
    return fnv1a(key or b"") % num_partitions


# librdkafka's names for partitioners kafkactl has under another name
ALIASES = {"consistent": "crc32", "murmur2_random": "murmur2"}
# null keys (and an empty one under consistent_random) go to the sticky partition
STICKY = ("murmur2", "consistent_random", "fnv1a_random")
# key -> partition by a hash, null keys too for crc32 and fnv1a
HASHED = {"crc32": crc32_partition, "consistent_random": crc32_partition,
          "fnv1a": fnv1a_partition, "fnv1a_random": fnv1a_partition}


# Records grouped by partition: partition -> (keys, values, entries or None), input order.
Groups = dict[int, tuple[list[bytes | None], list[bytes], list[Any] | None]]


def group_records(keys: Sequence[bytes | None], values: Sequence[bytes],
                  entries: Sequence[Any] | None, partition_of: Callable[[bytes | None], int],
                  *, deterministic: bool = True) -> Groups:
    """Record i (keys[i], values[i], and entries[i] when given) grouped under
    `partition_of(keys[i])`, in input order within each group, the groups in order of their
    first record. A `deterministic` partition_of is asked once per distinct non-null key."""
    groups: Groups = {}
    chosen: dict[bytes, int] = {}  # keys repeat: hash each distinct key once
    for i, k in enumerate(keys):
        found = chosen.get(k) if k is not None else None
        if found is None:
            found = partition_of(k)
            if k is not None and deterministic:
                chosen[k] = found
        g = groups.get(found)
        if g is None:
            g = groups[found] = ([], [], None if entries is None else [])
        g[0].append(k)
        g[1].append(values[i])
        if entries is not None:
            g[2].append(entries[i])  # type: ignore[union-attr]
    return groups


def murmur2_groups_py(keys: Sequence[bytes | None], values: Sequence[bytes],
                      entries: Sequence[Any] | None, num_partitions: int,
                      null_partition: int) -> Groups:
    """group_records by the murmur2 partitioner (a null key: `null_partition`). The
    definition of `murmur2_groups`, whose compiled twin takes the plain shape
    (record/_kernels.pyx)."""
    return group_records(keys, values, entries, lambda k: null_partition if k is None
                         else murmur2_partition(k, num_partitions))


def murmur2_groups(keys: Sequence[bytes | None], values: Sequence[bytes],
                   entries: Sequence[Any] | None, num_partitions: int,
                   null_partition: int) -> Groups:
    """murmur2_groups_py, by the compiled twin when it takes the input."""
    if kernels is not None:
        got = kernels.murmur2_groups(keys, values, entries, num_partitions,
                                     null_partition)
        if got is not None:
            return got
    return murmur2_groups_py(keys, values, entries, num_partitions, null_partition)


def murmur2_scatter_py(data: bytes, start: int, end: int, delimiter: bytes,
                       key_separator: bytes, num_partitions: int,
                       null_partition: int) -> list[bytes]:
    """The lines of data[start:end], each ended by `delimiter` (a Block's), copied into one
    bytes per partition, each line with its delimiter, in input order: the partition
    murmur2 gives the key before the first `key_separator`, `null_partition` for a line
    without one (split_keys' null key). The definition of `murmur2_scatter`, whose compiled
    twin takes one-byte delimiters (record/_kernels.pyx)."""
    lines = data[start:end].split(delimiter)
    lines.pop()  # after the last delimiter: nothing
    out: list[list[bytes]] = [[] for _ in range(num_partitions)]
    for line in lines:
        key, sep, _value = line.partition(key_separator)
        out[murmur2_partition(key, num_partitions) if sep else null_partition].append(line)
    return [delimiter.join(ls) + delimiter if ls else b"" for ls in out]


def murmur2_scatter(data: bytes, start: int, end: int, delimiter: bytes, key_separator: bytes,
                    num_partitions: int, null_partition: int) -> list[bytes]:
    """murmur2_scatter_py, by the compiled twin when it takes the input."""
    if kernels is not None:
        got = kernels.murmur2_scatter(data, start, end, delimiter, key_separator,
                                      num_partitions, null_partition)
        if got is not None:
            return got
    return murmur2_scatter_py(data, start, end, delimiter, key_separator, num_partitions,
                              null_partition)


UserPartitioner = Callable[[str, "bytes | None", int], int]
USER_PARTITIONER_SIGNATURE = "function(topic: str, key: bytes | None, num_partitions: int) -> int"


class PartitionerError(ValueError):
    """A user partitioner raised, or returned something that is not a partition."""


def load_user_partitioner(spec: str) -> UserPartitioner:
    """Import ``module:function``; raise ValueError with a clear message on failure, and
    for a function that cannot be called as a partitioner (when Python can tell its
    signature)."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"partitioner {spec!r} must be 'murmur2', 'crc32', "
                         "'consistent_random', 'fnv1a', 'fnv1a_random', 'random', "
                         "'roundrobin' or 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"cannot import partitioner module {module_name!r}: {e}") from e
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"{module_name!r} has no callable {attr!r} to use as partitioner")
    import inspect  # (here: only a user partitioner needs it)

    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # (some builtins do not tell: found out when called)
        return fn
    try:
        signature.bind("topic", b"key", 1)
    except TypeError as e:
        raise ValueError(f"partitioner {spec}: {attr}{signature} does not take a "
                         f"partitioner's arguments: it must be {USER_PARTITIONER_SIGNATURE}, "
                         f"returning the partition ({e})") from None
    return fn


class Partitioner:
    """Chooses a partition for (topic, key). Sticky for null keys unless random/roundrobin."""

    BUILTIN = ("murmur2", "crc32", "consistent_random", "fnv1a", "fnv1a_random", "random",
               "roundrobin")

    def __init__(self, name: str = "murmur2") -> None:
        name = ALIASES.get(name, name)
        self.name = name
        self._user: UserPartitioner | None = None
        if name not in self.BUILTIN:
            self._user = load_user_partitioner(name)
        self._sticky: dict[str, int] = {}
        self._rr: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: Sequence[int] | None = None) -> int:
        """The partition of a record; `available`: the partitions that have a leader when
        only some do (None or empty: all), which keyless choices keep to."""
        if num_partitions <= 0:
            raise ValueError(f"topic {topic!r} has no partitions")
        if self._user is not None:
            try:
                p = int(self._user(topic, key, num_partitions))
            except Exception as e:  # noqa: BLE001 - the user's code: named as such
                raise PartitionerError(f"partitioner {self.name} failed: "
                                       f"{type(e).__name__}: {e}") from e
            if not 0 <= p < num_partitions:
                raise PartitionerError(f"partitioner {self.name} returned {p} for topic "
                                       f"{topic!r} with {num_partitions} partitions")
            return p
        name = self.name
        if name == "roundrobin":
            p = self._rr.get(topic, -1) + 1
            self._rr[topic] = p
            return available[p % len(available)] if available else p % num_partitions
        if name == "random":
            return random.choice(available) if available else random.randrange(num_partitions)
        if key is None or (not key and name == "consistent_random"):
            return self.sticky_partition(topic, num_partitions, available)
        hashed = HASHED.get(name)
        if hashed is not None:
            return hashed(key, num_partitions)
        return to_positive(murmur2(key)) % num_partitions

    def spread(self, topic: str, values: Sequence[bytes], num_partitions: int,
               available: Sequence[int] | None = None) -> list[tuple[int, Sequence[bytes]]]:
        """roundrobin's or random's partition for each of `values` (null keys) in one go:
        (partition, its values in their order) for each partition that gets any. The same
        partitions as partition() record by record (roundrobin's counter moves on by
        len(values)), only grouped."""
        if num_partitions <= 0:
            raise ValueError(f"topic {topic!r} has no partitions")
        parts: Sequence[int] = available or range(num_partitions)
        n = len(parts)
        if self.name == "roundrobin":
            first = self._rr.get(topic, -1) + 1
            self._rr[topic] = first + len(values) - 1
            seq = values if isinstance(values, list | tuple) else list(values)
            return [(parts[(first + i) % n], seq[i::n]) for i in range(min(n, len(seq)))]
        if self.name != "random" or self._user is not None:
            raise ValueError(f"partitioner {self.name} does not spread null keys")
        # (group_records with the draws would do, but it carries a key list and a call a
        # record: 1 M lines to 4 partitions 0.64-0.83 s against 0.54-0.59 s this way)
        groups: dict[int, list[bytes]] = {}
        for v, p in zip(values, random.choices(parts, k=len(values)), strict=True):
            group = groups.get(p)
            if group is None:
                groups[p] = [v]
            else:
                group.append(v)
        return list(groups.items())

    def sticky_partition(self, topic: str, num_partitions: int,
                         available: Sequence[int] | None = None) -> int:
        """The partition null keys go to now; another one (of `available`, when given)
        once it has no leader. crc32 and fnv1a send them where the empty key goes."""
        if self.name in ("crc32", "fnv1a"):
            return HASHED[self.name](None, num_partitions)
        p = self._sticky.get(topic)
        if p is None or p >= num_partitions or (available and p not in available):
            p = random.choice(available) if available else random.randrange(num_partitions)
            self._sticky[topic] = p
        return p

    def on_new_batch(self, topic: str, previous: int, num_partitions: int,
                     available: Sequence[int] | None = None) -> None:
        """The batch of the sticky partition filled up: move null keys to another one
        (of `available`, when given)."""
        if self._sticky.get(topic) == previous and num_partitions > 1:
            pool: Sequence[int] = available or range(num_partitions)
            choices = [p for p in pool if p != previous]
            if choices:
                self._sticky[topic] = random.choice(choices)

    @property
    def is_sticky(self) -> bool:
        return self._user is None and self.name in STICKY

    @property
    def is_deterministic(self) -> bool:
        """A non-null key always maps to the same partition (for a given count; an empty
        one under consistent_random: the sticky partition of the moment)."""
        return self._user is None and (self.name == "murmur2" or self.name in HASHED)
