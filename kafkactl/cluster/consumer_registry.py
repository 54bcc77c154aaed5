"""The seed's ZooKeeper consumer groups (seed 002: "Consumers and Consumer Groups"):
member registration, the seed's rebalancing algorithm, partition ownership and offsets.

    /consumers/[group]/ids/[consumer_id]            {"version":1,"subscription":{topic: n},
                                                     "pattern":"static","timestamp":"..."}
    /consumers/[group]/owners/[topic]/[partition]   consumer thread id "<consumer_id>-<i>"
    /consumers/[group]/offsets/[topic]/[partition]  the next offset to consume, as text

Pure ZooKeeper: the consumer that fetches records is kafkactl.client.zookeeper_consumer.
It and `kafkactl offsets migrate` share what is strict here: an offsets znode is read as
Kafka read it (parse_offset: what Long.parseLong reads, or flagged), and
connect_existing refuses a mistyped chroot (missing, or without /consumers or /brokers).
"""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import zk_paths
from kafkactl.cluster.zookeeper import decode_json, encode_json, get_all

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.cluster")

TopicPartition = tuple[str, int]
TRIGGER_PREFIX = "rebalance-trigger-"  # touch_ids' short-lived child, not a member


# What a chroot that holds a Kafka cluster's consumer groups has, and what its absence says
_ROOT_OF = {zk_paths.CONSUMERS: "no ZooKeeper consumer group ever registered there",
            zk_paths.BROKERS: "no Kafka broker ever registered there"}


class ChrootError(ValueError):
    """The connect string's chroot is not where a Kafka cluster keeps its znodes: it does
    not exist, or lacks /consumers or /brokers (a mistyped chroot)."""


def connect_existing(connect_string: str, *, require: str | None = None,
                     timeout_s: float = 10.0, session_timeout_s: float = 10.0,
                     what: str = "--zookeeper") -> KazooClient:
    """A started client rooted at the connect string's chroot, which must exist (nothing is
    created, and kazoo's warning about a missing one is not shown) and have `require`
    (zk_paths.CONSUMERS or BROKERS) under it; else ChrootError, after closing the client."""
    import warnings

    from kafkactl.cluster.zookeeper import close, connect, split_connect

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No chroot path exists",
                                category=UserWarning)
        zk = connect(connect_string, timeout_s=timeout_s, session_timeout_s=session_timeout_s,
                     create_chroot=False, what=what)
    try:
        if zk.exists("/") is None:
            hosts, chroot = split_connect(connect_string)
            raise ChrootError(f"ZooKeeper at {hosts} has no chroot {chroot} ({what} "
                              f"{connect_string}): is the path mistyped?")
        if require is not None and zk.exists(require) is None:
            why = _ROOT_OF.get(require, "it is missing")
            raise ChrootError(f"ZooKeeper at {connect_string} has no {require}: {why} (is "
                              "the chroot right?)")
    except BaseException:
        close(zk)
        raise
    return zk


def new_consumer_id(group: str) -> str:
    """hostname-uuid, as the seed names consumers (`hostname:uuid`; ':' is legal in a znode
    name, but Kafka's own consumers wrote `group_hostname-timestamp-uuid`; the seed's form
    is kept)."""
    return f"{socket.gethostname()}:{uuid.uuid4()}"


@dataclass
class Member:
    consumer_id: str
    subscription: dict[str, int] = field(default_factory=dict)
    pattern: str = "static"  # static | white_list | black_list

    def matches(self, topic: str) -> bool:
        """For pattern members the subscription key is the regex (one entry)."""
        if self.pattern == "static":
            return topic in self.subscription
        for regex in self.subscription:
            try:
                hit = re.fullmatch(regex, topic) is not None
            except re.error:
                return False
            return hit if self.pattern == "white_list" else not hit
        return False

    def streams_for(self, topic: str) -> int:
        if self.pattern == "static":
            return self.subscription.get(topic, 0)
        return next(iter(self.subscription.values()), 0) if self.matches(topic) else 0


def member_value(member: Member) -> bytes:
    return encode_json({"version": 1, "subscription": member.subscription,
                        "pattern": member.pattern,
                        "timestamp": str(int(time.time() * 1000))})


def register(zk: KazooClient, group: str, member: Member) -> None:
    zk.create(zk_paths.consumer_id(group, member.consumer_id), member_value(member),
              ephemeral=True, makepath=True)


def members(zk: KazooClient, group: str) -> list[Member]:
    """The group's live members, sorted by consumer id (malformed entries skipped)."""
    from kazoo.exceptions import NoNodeError

    try:
        ids = zk.get_children(zk_paths.consumer_ids(group))
    except NoNodeError:
        return []
    out = []
    for cid in sorted(ids):
        if cid.startswith(TRIGGER_PREFIX):
            continue
        path = zk_paths.consumer_id(group, cid)
        try:
            data, _ = zk.get(path)
        except NoNodeError:
            continue
        value = decode_json(data, path)
        sub = value.get("subscription") if isinstance(value, dict) else None
        if not isinstance(sub, dict):
            log.warning("ignoring consumer registration %s: no subscription", path)
            continue
        subscription = {str(t): int(n) for t, n in sub.items() if isinstance(n, int) and n > 0}
        out.append(Member(cid, subscription, str(value.get("pattern") or "static")))
    return out


def range_assignment(partitions: Mapping[str, Iterable[int]], group_members: list[Member]
                     ) -> dict[str, dict[TopicPartition, str]]:
    """The seed's rebalancing algorithm, for every consumer of the group at once:
    for each topic T, sort its partitions PT and the consumer threads CG subscribing to T;
    thread i gets partitions [i*N, (i+1)*N) with N = |PT| / |CG|, the first |PT| mod |CG|
    threads one more. Returns consumer id -> {partition: owning thread id}."""
    out: dict[str, dict[TopicPartition, str]] = {m.consumer_id: {} for m in group_members}
    for topic in sorted(partitions):
        parts = sorted(partitions[topic])
        threads = sorted((f"{m.consumer_id}-{i}", m.consumer_id) for m in group_members
                         for i in range(m.streams_for(topic)))
        if not threads or not parts:
            continue
        per, extra = divmod(len(parts), len(threads))
        for i, (thread, cid) in enumerate(threads):
            start = per * i + min(i, extra)
            for p in parts[start:start + per + (1 if i < extra else 0)]:
                out[cid][(topic, p)] = thread
    return out


# ---- ownership -------------------------------------------------------------------------------

def owner_of(zk: KazooClient, group: str, tp: TopicPartition) -> str | None:
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = zk.get(zk_paths.owner(group, *tp))
    except NoNodeError:
        return None
    return data.decode("utf-8", "replace")


def owners(zk: KazooClient, group: str) -> dict[TopicPartition, str]:
    from kazoo.exceptions import NoNodeError

    out: dict[TopicPartition, str] = {}
    try:
        topics = zk.get_children(zk_paths.owners(group))
    except NoNodeError:
        return out
    for t in topics:
        with contextlib.suppress(NoNodeError):
            for p in zk.get_children(zk_paths.owners(group, t)):
                if p.isdigit():
                    owner = owner_of(zk, group, (t, int(p)))
                    if owner is not None:
                        out[(t, int(p))] = owner
    return out


def claim(zk: KazooClient, group: str, tp: TopicPartition, thread_id: str) -> bool:
    """Write our thread id into the partition's owner node; False while another owns it."""
    from kazoo.exceptions import NodeExistsError

    try:
        zk.create(zk_paths.owner(group, *tp), thread_id.encode(), ephemeral=True,
                  makepath=True)
        return True
    except NodeExistsError:
        return owner_of(zk, group, tp) == thread_id


def release(zk: KazooClient, group: str, tp: TopicPartition, thread_id: str) -> None:
    """Delete the owner node if it is ours."""
    from kazoo.exceptions import NoNodeError

    if owner_of(zk, group, tp) == thread_id:
        with contextlib.suppress(NoNodeError):
            zk.delete(zk_paths.owner(group, *tp))


# ---- offsets ---------------------------------------------------------------------------------
# An offsets znode holds what Kafka's consumers wrote: Long.toString of the next offset. It is
# read as Kafka read it (`offsetString.toLong`), with Long.parseLong: an optional ASCII sign
# ('-' or '+') and decimal digits (Character.digit's: any script's, as Python's \d), nothing
# else (no '_', no spaces, no newline), within 64 bits; a negative value is a number but no
# position (Kafka's consumer reset it: auto.offset.reset). Its name is the partition number as
# Kafka spells it (ASCII, no sign, no leading zero).

_DECIMAL = re.compile(r"[-+]?\d+")
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def parse_decimal(text: str) -> int | None:
    """`text` as Long.parseLong reads it, range aside (None: Long.parseLong refuses it; it
    reads UTF-16 units one by one, so a digit past U+FFFF is none to it)."""
    if not _DECIMAL.fullmatch(text) or max(text) > "\uffff":
        return None
    return int(text)


def parse_partition(name: str) -> int | None:
    """The partition number an offsets znode's name spells, or None."""
    value = parse_decimal(name)
    if value is None or str(value) != name or not 0 <= value <= _INT32_MAX:
        return None
    return value


@dataclass
class StoredOffset:
    """An offsets znode as found: `offset` when its name is a partition number and its text
    a non-negative offset, else `error` says what is wrong. `malformed`: the text is no
    number Long.parseLong reads (Kafka's consumer failed on it); a negative offset is a
    number, but no position (`no_offset`: Kafka's consumer reset it with
    auto.offset.reset)."""
    group: str
    topic: str
    name: str  # the znode's name under /consumers/GROUP/offsets/TOPIC
    raw: str  # the znode's text
    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    malformed: bool = False

    @property
    def path(self) -> str:
        return f"{zk_paths.offsets(self.group, self.topic)}/{self.name}"

    @property
    def no_offset(self) -> bool:
        """A partition's znode holding a negative offset: no position, as a missing znode
        (Kafka's consumer and kafkactl's ZooKeeper consumer apply auto.offset.reset)."""
        return self.partition is not None and self.error is not None and not self.malformed


def parse_offset(group: str, topic: str, name: str, data: bytes | None) -> StoredOffset:
    """The znode /consumers/GROUP/offsets/TOPIC/NAME holding `data`, parsed or flagged."""
    raw = (data or b"").decode("utf-8", "replace")
    stored = StoredOffset(group, topic, name, raw, partition=parse_partition(name))
    value = parse_decimal(raw)
    if stored.partition is None:
        stored.error = f"not a partition number: znode {name!r}"
    elif value is None:
        stored.error, stored.malformed = ("empty" if raw == "" else
                                          f"not a number: {raw[:40]!r}"), True
    elif not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        stored.error = f"out of range of a 64-bit offset: {raw[:40]!r}"
        stored.malformed = True
    elif value < 0:
        stored.error = f"negative offset {value}"
    else:
        stored.offset = value
    return stored


def offset_znodes(zk: KazooClient, group: str) -> list[StoredOffset]:
    """Every znode under /consumers/GROUP/offsets/TOPIC, whatever its name, parsed or
    flagged; by topic, then partition (names that are none last)."""
    from kazoo.exceptions import NoNodeError

    try:
        topics = zk.get_children(zk_paths.offsets(group))
    except NoNodeError:
        return []
    paths: dict[tuple[str, str], str] = {}
    for topic in topics:
        with contextlib.suppress(NoNodeError):
            for name in zk.get_children(zk_paths.offsets(group, topic)):
                paths[(topic, name)] = f"{zk_paths.offsets(group, topic)}/{name}"
    found = get_all(zk, paths)
    out = [parse_offset(group, topic, name, got[0])
           for (topic, name), got in found.items() if got is not None]  # None: deleted
    out.sort(key=lambda s: (s.topic, s.partition is None, s.partition or 0, s.name))
    return out


def read_offsets(zk: KazooClient, group: str, tps: Iterable[TopicPartition] | None = None
                 ) -> dict[TopicPartition, StoredOffset]:
    """The offsets znodes of the group's partitions (or of `tps`: those that exist), parsed
    or flagged; a znode whose name is no partition number is left out."""
    if tps is None:
        return {(s.topic, s.partition): s for s in offset_znodes(zk, group)
                if s.partition is not None}
    found = get_all(zk, {tp: zk_paths.offset(group, *tp) for tp in tps})
    return {tp: parse_offset(group, tp[0], str(tp[1]), got[0])
            for tp, got in found.items() if got is not None}


def write_offsets(zk: KazooClient, group: str, offsets: Mapping[TopicPartition, int]) -> None:
    from kazoo.exceptions import NodeExistsError

    for tp, off in offsets.items():
        path = zk_paths.offset(group, *tp)
        value = str(off).encode()
        if zk.exists(path) is None:
            try:
                zk.create(path, value, makepath=True)
                continue
            except NodeExistsError:
                pass
        zk.set(path, value)


def delete_offsets(zk: KazooClient, group: str, tps: Iterable[TopicPartition]) -> None:
    from kazoo.exceptions import NoNodeError

    for tp in tps:
        with contextlib.suppress(NoNodeError):
            zk.delete(zk_paths.offset(group, *tp))


def groups(zk: KazooClient) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return sorted(zk.get_children(zk_paths.CONSUMERS))
    except NoNodeError:
        return []


def touch_ids(zk: KazooClient, group: str) -> None:
    """Make every member of the group rebalance (their ids watch fires): a short-lived
    child under ids, as an operator's trigger."""
    path = zk.create(zk_paths.consumer_ids(group) + "/" + TRIGGER_PREFIX, b"",
                     ephemeral=True, sequence=True, makepath=True)
    zk.delete(path)


def describe(zk: KazooClient, group: str) -> dict[str, Any]:
    return {"members": members(zk, group), "owners": owners(zk, group),
            "offsets": read_offsets(zk, group)}
