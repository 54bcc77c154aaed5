"""Move consumer offsets from ZooKeeper into the broker's offset manager (seed 002: "migrating
offsets from ZooKeeper to Kafka").

For each group: read /consumers/[group]/offsets, check every partition against the broker
(topic and partition exist, offset within the log), compare with what the broker already
holds, commit the ones to move with OffsetCommit, read them back with OffsetFetch, and only
then (with delete_source) remove the verified znodes. Idempotent: a run interrupted at any
point and run again ends with every partition migrated once with the ZooKeeper value.

Every znode under /consumers/[group]/offsets/[topic] is reported: a partition name or an
offset that is not what Kafka wrote (consumer_registry.parse_offset, as the ZooKeeper
consumer reads them: Long.parseLong's plain ASCII decimal, the name as Kafka spells the
partition number) is "invalid", never skipped or read leniently. A group whose broker group
has members is left alone (Kafka's tools change only an inactive group's offsets).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkactl.cluster import consumer_registry as registry
from kafkactl.cluster import zk_paths
from kafkactl.protocol.errors import ErrorCode, error_name

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.group.group_admin import GroupAdmin

log = logging.getLogger("kafkactl.offsets")

TopicPartition = tuple[str, int]

# Row statuses. MIGRATED/EQUAL/OVERWRITTEN are done; the others were left as they were.
MIGRATED = "migrated"
EQUAL = "already equal"
OVERWRITTEN = "overwritten"
WOULD_MIGRATE = "would migrate"
WOULD_OVERWRITE = "would overwrite"
CONFLICT = "conflict"
INVALID = "invalid"
BEYOND_END = "beyond log end"
BELOW_START = "below log start"
UNKNOWN = "unknown partition"
SKIPPED = "skipped (topic deleted)"
FAILED = "failed"
DONE = {MIGRATED, EQUAL, OVERWRITTEN, SKIPPED}

INACTIVE = ("Empty", "Dead")
# OffsetCommit answers for a simple (generation -1) commit into a group with members
_MEMBER_ERRORS = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                  ErrorCode.REBALANCE_IN_PROGRESS}


@dataclass
class Row:
    group: str
    topic: str
    partition: int | None  # None: the znode's name is no partition number (`name`)
    zookeeper: str  # the znode's text
    broker_before: int  # -1: none
    status: str
    note: str = ""
    broker_after: int = -1
    deleted: bool = False
    name: str = ""  # the znode's name under /consumers/GROUP/offsets/TOPIC

    @property
    def path(self) -> str:
        return f"{zk_paths.offsets(self.group, self.topic)}/{self.name}"

    @property
    def ok(self) -> bool:
        return self.status in DONE or self.status in (WOULD_MIGRATE, WOULD_OVERWRITE)


@dataclass
class GroupResult:
    group: str
    rows: list[Row]
    error: str | None = None
    note: str | None = None  # said of a group with nothing to migrate

    def count(self, *statuses: str) -> int:
        return sum(1 for r in self.rows if r.status in statuses)


def migrate(zk: KazooClient, admin: GroupAdmin, consumer: SimpleConsumer,
            groups: Iterable[str], *, dry_run: bool = False, overwrite: bool = False,
            delete_source: bool = False, skip_deleted_topics: bool = False
            ) -> list[GroupResult]:
    known = set(registry.groups(zk))
    results = []
    for group in dict.fromkeys(groups):  # each group once, however often it was named
        if group not in known:
            results.append(GroupResult(group, [], f"no group {group!r} in ZooKeeper "
                                                  "(/consumers)"))
            continue
        results.append(_migrate_group(zk, admin, consumer, group, dry_run=dry_run,
                                      overwrite=overwrite, delete_source=delete_source,
                                      skip_deleted_topics=skip_deleted_topics))
    return results


def read_znodes(zk: KazooClient, group: str) -> list[tuple[Row, int | None]]:
    """A row per znode under /consumers/GROUP/offsets/TOPIC with its offset parsed, or
    (None) status INVALID and what is wrong with the znode in `note`."""
    rows: list[tuple[Row, int | None]] = []
    for stored in registry.offset_znodes(zk, group):
        row = Row(group, stored.topic, stored.partition, stored.raw, -1, "", name=stored.name)
        if stored.error is not None:
            row.status, row.note = INVALID, stored.error
        rows.append((row, stored.offset))
    return rows


# C901: one decision per partition (equal/beyond end/conflict), then commit+verify
def _migrate_group(  # noqa: C901
        zk: KazooClient, admin: GroupAdmin, consumer: SimpleConsumer, group: str,
        *, dry_run: bool, overwrite: bool, delete_source: bool,
        skip_deleted_topics: bool = False) -> GroupResult:
    from kafkactl.client.fetcher import EARLIEST, LATEST

    found = read_znodes(zk, group)
    if not found:
        return GroupResult(group, [], note=f"no offsets under {zk_paths.offsets(group)}")
    rows: dict[TopicPartition, Row] = {}
    valid: dict[TopicPartition, int] = {}
    for row, offset in found:
        if offset is not None and row.partition is not None:
            tp = (row.topic, row.partition)
            rows[tp] = row
            valid[tp] = offset

    existing = _existing_partitions(consumer, {t for t, _ in valid})
    topics_here = {t for t, _ in existing}
    # (a broker that has none of the group's topics is more likely the wrong cluster than
    # one where they were all deleted: their offsets are not skipped then)
    skip = skip_deleted_topics and bool(topics_here)
    for tp in list(valid):
        if tp in existing:
            continue
        row = rows[tp]
        if tp[0] in topics_here:
            row.status = UNKNOWN
            row.note = (f"{tp[0]}-{tp[1]} does not exist on the broker (the topic has "
                        f"{sum(1 for t, _ in existing if t == tp[0])} partitions)")
        elif skip:
            row.status = SKIPPED
            row.note = f"topic {tp[0]} does not exist on the broker: not migrated"
        else:
            row.status = UNKNOWN
            row.note = (f"topic {tp[0]} does not exist on the broker (deleted since? "
                        "--skip-deleted-topics leaves its offsets out"
                        + (", and --delete-source deletes them with the group's)"
                           if topics_here else
                           "; not when no topic of the group is there: the right -b?)"))
        del valid[tp]
    ends = {tp: v[0] for tp, v in consumer.list_offsets(
        dict.fromkeys(valid, LATEST)).items()} if valid else {}
    starts = {tp: v[0] for tp, v in consumer.list_offsets(
        dict.fromkeys(valid, EARLIEST)).items()} if valid else {}
    before = admin.fetch_offsets(group, list(valid)) if valid else {}

    to_commit: dict[TopicPartition, int] = {}
    for tp, off in valid.items():
        row = rows[tp]
        row.broker_before = before.get(tp, -1)
        end = ends.get(tp, -1)
        start = starts.get(tp, -1)
        if row.broker_before == off:
            row.status = EQUAL
        elif off > end >= 0 and not overwrite:
            row.status = BEYOND_END
            row.note = f"log end offset is {end}; --overwrite commits it anyway"
        elif off < start and not overwrite:
            row.status = BELOW_START
            row.note = (f"log start offset is {start} (the records before it are gone); "
                        "--overwrite commits it anyway")
        elif row.broker_before > off and not overwrite:
            row.status = CONFLICT
            row.note = (f"the broker holds a newer offset {row.broker_before}; --overwrite "
                        "replaces it")
        else:
            row.status = (WOULD_OVERWRITE if row.broker_before >= 0 else WOULD_MIGRATE)
            to_commit[tp] = off

    error = None
    if to_commit:
        state = admin.describe_group(group).state
        if state not in INACTIVE:
            error = (f"group {group!r} has active members on the broker ({state}): stop "
                     "its consumers first (as Kafka's tools, offsets are changed only for "
                     "an inactive group)")
            if not dry_run:
                for tp in to_commit:
                    rows[tp].status = FAILED
                    rows[tp].note = "not committed: the group has active members"
                to_commit = {}
    if to_commit and not dry_run:
        codes = admin.commit_offsets(group, to_commit)
        after = admin.fetch_offsets(group, list(to_commit))
        for tp, off in to_commit.items():
            row = rows[tp]
            row.broker_after = after.get(tp, -1)
            code = codes.get(tp, 0)
            if code:
                row.status = FAILED
                row.note = f"OffsetCommit: {error_name(code)}"
                if code in _MEMBER_ERRORS:
                    row.note += " (the group has active members: stop them first)"
            elif row.broker_after != off:
                row.status = FAILED
                row.note = f"verify: the broker reads back {row.broker_after}"
            else:
                row.status = OVERWRITTEN if row.status == WOULD_OVERWRITE else MIGRATED
    for row in rows.values():
        if row.status == EQUAL:
            row.broker_after = row.broker_before

    result = GroupResult(group, [row for row, _ in found], error)
    if delete_source and not dry_run:
        if all(r.status in DONE for r in result.rows):
            registry.delete_offsets(zk, group, rows)
            for r in result.rows:
                r.deleted = True
        else:
            invalid = [r.path for r in result.rows if r.status == INVALID]
            kept = ("kept the ZooKeeper offsets: not every partition verified "
                    "(--delete-source deletes only after a complete migration)")
            if invalid:
                kept += (f"; {len(invalid)} invalid znode(s) to fix or delete by hand: "
                         + ", ".join(invalid[:5]) + (", ..." if len(invalid) > 5 else ""))
            result.error = kept if result.error is None else f"{result.error}; {kept}"
    return result


def _existing_partitions(consumer: SimpleConsumer, topics: set[str]) -> set[TopicPartition]:
    """Partitions the broker has, without creating any topic."""
    if not topics:
        return set()
    cluster = consumer.client.refresh_metadata(sorted(topics), allow_auto_create=False)
    out: set[TopicPartition] = set()
    for name, topic_metadata in cluster.topics.items():
        if name in topics:
            out.update((name, p) for p in topic_metadata.partitions)
    return out

