"""Move consumer offsets from ZooKeeper into the broker's offset manager (seed 002: "migrating
offsets from ZooKeeper to Kafka").

For each group: read /consumers/[group]/offsets, check every partition against the broker
(topic and partition exist, offset within the log), compare with what the broker already
holds, commit the ones to move with OffsetCommit, read them back with OffsetFetch, and only
then (with delete_source) remove the verified znodes. Idempotent: a run interrupted at any
point and run again ends with every partition migrated once with the ZooKeeper value.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkactl.cluster import consumer_registry as registry
from kafkactl.protocol.errors import error_name

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
UNKNOWN = "unknown partition"
FAILED = "failed"
DONE = {MIGRATED, EQUAL, OVERWRITTEN}


@dataclass
class Row:
    group: str
    topic: str
    partition: int
    zookeeper: str  # the znode's text
    broker_before: int  # -1: none
    status: str
    note: str = ""
    broker_after: int = -1
    deleted: bool = False

    @property
    def ok(self) -> bool:
        return self.status in DONE or self.status in (WOULD_MIGRATE, WOULD_OVERWRITE)


@dataclass
class GroupResult:
    group: str
    rows: list[Row]
    error: str | None = None

    def count(self, *statuses: str) -> int:
        return sum(1 for r in self.rows if r.status in statuses)


def migrate(zk: KazooClient, admin: GroupAdmin, consumer: SimpleConsumer,
            groups: Iterable[str], *, dry_run: bool = False, overwrite: bool = False,
            delete_source: bool = False) -> list[GroupResult]:
    known = set(registry.groups(zk))
    results = []
    for group in groups:
        if group not in known:
            results.append(GroupResult(group, [], f"no group {group!r} in ZooKeeper "
                                                  "(/consumers)"))
            continue
        results.append(_migrate_group(zk, admin, consumer, group, dry_run=dry_run,
                                      overwrite=overwrite, delete_source=delete_source))
    return results


# C901: one decision per partition (equal/beyond end/conflict), then commit+verify
def _migrate_group(  # noqa: C901
        zk: KazooClient, admin: GroupAdmin, consumer: SimpleConsumer, group: str,
        *, dry_run: bool, overwrite: bool, delete_source: bool) -> GroupResult:
    stored = registry.read_offsets(zk, group)
    rows: dict[TopicPartition, Row] = {}
    valid: dict[TopicPartition, int] = {}
    for tp, s in sorted(stored.items()):
        row = Row(group, tp[0], tp[1], s.raw, -1, "")
        rows[tp] = row
        if s.offset is None:
            row.status, row.note = INVALID, s.error or "unparseable"
        else:
            valid[tp] = s.offset
    if not rows:
        return GroupResult(group, [], f"group {group!r} has no offsets in ZooKeeper")

    existing = _existing_partitions(consumer, {t for t, _ in valid})
    for tp in list(valid):
        if tp not in existing:
            rows[tp].status = UNKNOWN
            rows[tp].note = f"{tp[0]}-{tp[1]} does not exist on the broker (not created)"
            del valid[tp]
    ends = {tp: v[0] for tp, v in consumer.list_offsets(
        {tp: -1 for tp in valid}).items()} if valid else {}
    before = admin.fetch_offsets(group, list(valid)) if valid else {}

    to_commit: dict[TopicPartition, int] = {}
    for tp, off in valid.items():
        row = rows[tp]
        row.broker_before = before.get(tp, -1)
        end = ends.get(tp, -1)
        if row.broker_before == off:
            row.status = EQUAL
        elif off > end >= 0 and not overwrite:
            row.status = BEYOND_END
            row.note = f"log end offset is {end}; --overwrite commits it anyway"
        elif row.broker_before > off and not overwrite:
            row.status = CONFLICT
            row.note = (f"the broker holds a newer offset {row.broker_before}; --overwrite "
                        "replaces it")
        else:
            row.status = (WOULD_OVERWRITE if row.broker_before >= 0 else WOULD_MIGRATE)
            to_commit[tp] = off

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
            elif row.broker_after != off:
                row.status = FAILED
                row.note = f"verify: the broker reads back {row.broker_after}"
            else:
                row.status = OVERWRITTEN if row.status == WOULD_OVERWRITE else MIGRATED
    for row in rows.values():
        if row.status == EQUAL:
            row.broker_after = row.broker_before

    result = GroupResult(group, list(rows.values()))
    if delete_source and not dry_run:
        if all(r.status in DONE for r in result.rows):
            registry.delete_offsets(zk, group, rows)
            for r in result.rows:
                r.deleted = True
        else:
            result.error = ("kept the ZooKeeper offsets: not every partition verified "
                            "(--delete-source deletes only after a complete migration)")
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

