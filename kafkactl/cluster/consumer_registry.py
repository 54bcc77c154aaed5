"""The seed's ZooKeeper consumer groups (seed 002: "Consumers and Consumer Groups"):
member registration, the seed's rebalancing algorithm, partition ownership and offsets.

    /consumers/[group]/ids/[consumer_id]            {"version":1,"subscription":{topic: n},
                                                     "pattern":"static","timestamp":"..."}
    /consumers/[group]/owners/[topic]/[partition]   consumer thread id "<consumer_id>-<i>"
    /consumers/[group]/offsets/[topic]/[partition]  the next offset to consume, as text

Pure ZooKeeper: the consumer that fetches records is kafkactl.client.zookeeper_consumer.
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
from kafkactl.cluster.zookeeper import decode_json, encode_json

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.cluster")

TopicPartition = tuple[str, int]
TRIGGER_PREFIX = "rebalance-trigger-"  # touch_ids' short-lived child, not a member


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

@dataclass
class StoredOffset:
    """An offsets znode as found: `offset` when it parses as a non-negative integer, else
    `error` says what is wrong with `raw`."""
    tp: TopicPartition
    raw: str
    offset: int | None = None
    error: str | None = None


def parse_offset(tp: TopicPartition, data: bytes) -> StoredOffset:
    raw = data.decode("utf-8", "replace").strip()
    try:
        value = int(raw)
    except ValueError:
        return StoredOffset(tp, raw, error=f"not a number: {raw[:40]!r}")
    if value < 0:
        return StoredOffset(tp, raw, error=f"negative offset {value}")
    return StoredOffset(tp, raw, offset=value)


def read_offsets(zk: KazooClient, group: str, tps: Iterable[TopicPartition] | None = None
                 ) -> dict[TopicPartition, StoredOffset]:
    """Every offsets znode of the group (or of `tps`), parsed or flagged."""
    from kazoo.exceptions import NoNodeError

    wanted: list[TopicPartition] = []
    if tps is None:
        try:
            topics = zk.get_children(zk_paths.offsets(group))
        except NoNodeError:
            return {}
        for t in topics:
            with contextlib.suppress(NoNodeError):
                wanted += [(t, int(p)) for p in zk.get_children(zk_paths.offsets(group, t))
                           if p.isdigit()]
    else:
        wanted = list(tps)
    out: dict[TopicPartition, StoredOffset] = {}
    for tp in wanted:
        try:
            data, _ = zk.get(zk_paths.offset(group, *tp))
        except NoNodeError:
            continue
        out[tp] = parse_offset(tp, data)
    return out


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
