"""Move consumer offsets from ZooKeeper into the broker's offset manager (seed 002: "migrating
offsets from ZooKeeper to Kafka").

For each group: read /consumers/[group]/offsets, check every partition against the broker
(topic and partition exist, offset within the log), compare with what the broker already
holds, commit the ones to move with OffsetCommit, read them back with OffsetFetch, and only
then (with delete_source) remove the verified znodes. A broker offset newer than
ZooKeeper's means the partition was migrated already (the group committed to the broker
since, as Kafka's dual-commit migration leaves it): the broker's is kept and counts as
verified, as Kafka's consumer resumes from the larger of the two
(ZookeeperConsumerConnector.fetchOffsets: zkOffset.max(kafkaOffset)); only `overwrite`
rewinds it to ZooKeeper's. An older broker offset is replaced by ZooKeeper's. Idempotent: a
run interrupted at any point and run again ends with every partition migrated once.

Every znode under /consumers/[group]/offsets/[topic] is reported: a partition name or an
offset that is not what Kafka wrote (consumer_registry.parse_offset, as the ZooKeeper
consumer reads them: what Long.parseLong reads, the name as Kafka spells the partition
number) is "invalid", never skipped or read leniently; a negative offset is "no offset"
(Kafka's consumer reset it with auto.offset.reset): nothing to migrate, and done (deleted
with the others by delete_source). A group whose broker group
has members is left alone (Kafka's tools change only an inactive group's offsets); one whose
ZooKeeper consumers are still registered (/consumers/[group]/ids) is refused for
delete_source and warned about otherwise (its ZooKeeper offsets are still moving).

What cannot be done is reported where it happened, and the run goes on: a partition whose
log range cannot be read (no leader) is a failed row, a group the broker cannot serve a
result with its error. Each group is handed to `on_result` when done. ZooKeeper requests
are retried across a stall for a bounded time (zookeeper_patience); past it, or with no
broker reachable at all, MigrationStopped says how far the run got.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkactl.client.errors import AuthenticationFailedError, ClientError, NoBrokersAvailable
from kafkactl.cluster import consumer_registry as registry
from kafkactl.cluster import zk_paths
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_name

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from kafkactl.client.consumer import SimpleConsumer
    from kafkactl.client.group.group_admin import GroupAdmin
    from kafkactl.client.zookeeper_patience import PatientZooKeeper, ZooKeeperStalled

log = logging.getLogger("kafkactl.offsets")

TopicPartition = tuple[str, int]

# Row statuses. Those in DONE are done; the others were left as they were.
MIGRATED = "migrated"
EQUAL = "already equal"
AHEAD = "already migrated"  # the broker holds a newer offset: kept (Kafka takes the larger)
OVERWRITTEN = "overwritten"
NO_OFFSET = "no offset"  # a negative offset in ZooKeeper: no position, nothing to migrate
WOULD_MIGRATE = "would migrate"
WOULD_OVERWRITE = "would overwrite"
INVALID = "invalid"
BEYOND_END = "beyond log end"
BELOW_START = "below log start"
UNKNOWN = "unknown partition"
SKIPPED = "skipped (topic deleted)"
FAILED = "failed"
DONE = {MIGRATED, EQUAL, AHEAD, OVERWRITTEN, NO_OFFSET, SKIPPED}

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
    warning: str | None = None  # done, but what the user should know (live consumers)
    stopped: ZooKeeperStalled | None = None  # the run stops after this group (why)

    def count(self, *statuses: str) -> int:
        return sum(1 for r in self.rows if r.status in statuses)


class MigrationStopped(Exception):  # noqa: N818 - a stop, as StopIteration
    """The run stopped before its last group (ZooKeeper did not answer, or no broker
    could be reached): `done` holds the groups finished (and reported) before, in order;
    the message says why and where it stopped."""

    def __init__(self, message: str, done: list[GroupResult], *,
                 zookeeper: bool = False) -> None:
        super().__init__(message)
        self.done = done
        self.zookeeper = zookeeper  # ZooKeeper stopped answering (else: the brokers)


# How long ZooKeeper may not answer one request (retried across lost connections and
# expired sessions) before the run stops: longer than a session timeout, so a server that
# stalls for one (a long GC pause) is ridden out.
ZOOKEEPER_TIMEOUT_S = 30.0


@dataclass
class _Run:
    zk: PatientZooKeeper
    admin: GroupAdmin
    consumer: SimpleConsumer
    dry_run: bool
    overwrite: bool
    delete_source: bool
    skip_deleted_topics: bool
    partition_wait_s: float
    # partitions whose log range could not be read within partition_wait_s (no leader...),
    # with why: asked once, not waited for again, by the later groups of the run
    unavailable: dict[TopicPartition, str] = field(default_factory=dict)


def migrate(zk: KazooClient, admin: GroupAdmin, consumer: SimpleConsumer,
            groups: Iterable[str] | None, *, dry_run: bool = False, overwrite: bool = False,
            delete_source: bool = False, skip_deleted_topics: bool = False,
            on_result: Callable[[GroupResult], None] | None = None,
            zookeeper_timeout_s: float = ZOOKEEPER_TIMEOUT_S,
            zookeeper_name: str = "ZooKeeper",
            partition_wait_s: float | None = None) -> list[GroupResult]:
    """Migrate each group (None: every group under /consumers), each once, in order.

    A partition that cannot be migrated is a row (failed, with why), and a group the broker
    cannot serve is a result with its error: the run goes on with the others. Each result
    is passed to `on_result` as soon as its group is done. ZooKeeper not answering for
    `zookeeper_timeout_s` (one request, retried), or no broker answering at all, stops the
    run with MigrationStopped, holding the groups done before. A partition without a leader
    is waited for `partition_wait_s` (default: the client's request timeout) the first
    time the run meets it, and asked once, without waiting, by later groups."""
    from kafkactl.client.zookeeper_patience import PatientZooKeeper, ZooKeeperStalled

    pzk = PatientZooKeeper(zk, zookeeper_timeout_s, zookeeper_name)
    run = _Run(pzk, admin, consumer, dry_run, overwrite, delete_source, skip_deleted_topics,
               consumer.client.request_timeout if partition_wait_s is None
               else partition_wait_s)
    results: list[GroupResult] = []
    names: list[str] = []
    try:
        known = set(pzk.get_children(zk_paths.CONSUMERS) or [])
        names = list(dict.fromkeys(sorted(known) if groups is None else groups))
        for group in names:  # each group once, however often it was named
            if group not in known:
                result = GroupResult(group, [], f"no group {group!r} in ZooKeeper "
                                                 "(/consumers)")
            else:
                result = _migrate_group(run, group)
            results.append(result)
            if on_result is not None:
                on_result(result)
            if result.stopped is not None:
                raise result.stopped
    except ZooKeeperStalled as e:
        raise MigrationStopped(_stopped(str(e), results, names), results,
                               zookeeper=True) from None
    except (NoBrokersAvailable, AuthenticationFailedError) as e:
        raise MigrationStopped(_stopped(str(e), results, names), results) from None
    return results


def _stopped(why: str, results: list[GroupResult], names: list[str]) -> str:
    """`why`, then how far the run got: what a user needs to know to run it again."""
    n, total = len(results), len(names)
    if not total:
        where = "nothing migrated"
    elif results and results[-1].stopped is not None:
        where = f"stopped at group {names[n - 1]}, {n} of {total} group(s) reported above"
    elif n < total:
        where = f"stopped at group {names[n]}, " + (
            f"after {n} of {total} group(s), reported above" if n else
            f"the first of {total} group(s)")
    else:
        where = f"stopped after {n} of {total} group(s), reported above"
    return f"{why}; {where}; run it again to finish (a migration run again converges)"


def read_znodes(zk: KazooClient | PatientZooKeeper, group: str
                ) -> list[tuple[Row, int | None]]:
    """A row per znode under /consumers/GROUP/offsets/TOPIC with its offset parsed, or
    (None) status NO_OFFSET (a negative offset) or INVALID, and why in `note`."""
    from kafkactl.client.zookeeper_patience import PatientZooKeeper

    pzk = zk if isinstance(zk, PatientZooKeeper) else PatientZooKeeper(zk, ZOOKEEPER_TIMEOUT_S)
    rows: list[tuple[Row, int | None]] = []
    for stored in _offset_znodes(pzk, group):
        row = Row(group, stored.topic, stored.partition, stored.raw, -1, "", name=stored.name)
        if stored.no_offset:
            row.status = NO_OFFSET
            row.note = (f"{stored.error}: no position to migrate (Kafka's consumer resets "
                        "it: auto.offset.reset)")
        elif stored.error is not None:
            row.status, row.note = INVALID, stored.error
        rows.append((row, stored.offset))
    return rows


def _offset_znodes(pzk: PatientZooKeeper, group: str) -> list[registry.StoredOffset]:
    """consumer_registry.offset_znodes, each request retried across a ZooKeeper stall."""
    topics = pzk.get_children(zk_paths.offsets(group)) or []
    paths: dict[tuple[str, str], str] = {}
    for topic in topics:
        for name in pzk.get_children(zk_paths.offsets(group, topic)) or []:
            paths[(topic, name)] = f"{zk_paths.offsets(group, topic)}/{name}"
    found = pzk.get_many(paths, f"reading {zk_paths.offsets(group)}")
    out = [registry.parse_offset(group, topic, name, data)
           for (topic, name), data in found.items()]  # (a znode deleted meanwhile: left out)
    out.sort(key=lambda s: (s.topic, s.partition is None, s.partition or 0, s.name))
    return out


def live_members(zk: PatientZooKeeper, group: str) -> list[str]:
    """The consumer ids registered under /consumers/GROUP/ids (ephemeral znodes: live
    ZooKeeper-coordinated consumers of the group), an operator's rebalance trigger left
    out."""
    ids = zk.get_children(zk_paths.consumer_ids(group)) or []
    return sorted(i for i in ids if not i.startswith(registry.TRIGGER_PREFIX))


def _live_members_note(group: str, ids: list[str]) -> str:
    shown = ", ".join(ids[:5]) + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")
    return (f"group {group!r} has live ZooKeeper consumers ({zk_paths.consumer_ids(group)}: "
            f"{shown}): they still commit to ZooKeeper, so its offsets there keep moving")


# C901: the group's rows, its live members, then delete_source's verdict
def _migrate_group(run: _Run, group: str) -> GroupResult:  # noqa: C901
    from kafkactl.client.zookeeper_patience import ZooKeeperStalled

    found = read_znodes(run.zk, group)
    if not found:
        return GroupResult(group, [], note=f"no offsets under {zk_paths.offsets(group)}")
    members = live_members(run.zk, group)
    rows: dict[TopicPartition, Row] = {}
    valid: dict[TopicPartition, int] = {}
    for row, offset in found:
        if offset is not None and row.partition is not None:
            tp = (row.topic, row.partition)
            rows[tp] = row
            valid[tp] = offset
    result = GroupResult(group, [row for row, _ in found])
    refuse_delete = None
    if members:
        live = _live_members_note(group, members)
        if run.delete_source:
            refuse_delete = (f"{live}: --delete-source refused (nothing committed, nothing "
                             "deleted): stop them first (or run them with --offsets-storage "
                             "kafka --dual-commit while the group moves over), then "
                             "migrate with --delete-source")
        else:
            result.warning = (f"{live}: what the broker gets is a snapshot; stop the "
                              "consumers (or run them with --offsets-storage kafka "
                              "--dual-commit) and migrate again")
    sent: list[bool] = []  # [True] once the OffsetCommit went out
    try:
        _check_and_commit(run, group, rows, valid, result, refuse_delete, sent)
    except (NoBrokersAvailable, AuthenticationFailedError):
        raise
    except (ClientError, KafkaError) as e:
        # this group's broker side failed (its coordinator, a topic gone meanwhile...):
        # its unfinished partitions are failed rows; the other groups go on
        why = str(e) or type(e).__name__
        for row in rows.values():
            if row.status in ("", WOULD_MIGRATE, WOULD_OVERWRITE):
                committed = bool(sent) and row.status != ""
                row.status = FAILED
                row.note = (f"committed, not verified: {why}" if committed
                            else f"not migrated: {why}")
        result.error = _join(result.error, why)
    for row in rows.values():
        if row.status in (EQUAL, AHEAD):
            row.broker_after = row.broker_before

    if run.delete_source and not run.dry_run:
        if refuse_delete is not None:
            result.error = _join(result.error, refuse_delete)
        elif all(r.status in DONE for r in result.rows):
            # (every row is a partition's then: a valid offset, or a negative one)
            try:
                for row in result.rows:
                    run.zk.delete(row.path)
                    row.deleted = True
            except ZooKeeperStalled as e:
                result.error = _join(result.error, (
                    "ZooKeeper stopped answering while its verified offsets were being "
                    f"deleted: {sum(r.deleted for r in result.rows)} of {len(result.rows)} "
                    "deleted (the rest are kept; run it again)"))
                result.stopped = e
        else:
            invalid = [r.path for r in result.rows if r.status == INVALID]
            kept = ("kept the ZooKeeper offsets: not every partition verified "
                    "(--delete-source deletes only after a complete migration)")
            if invalid:
                kept += (f"; {len(invalid)} invalid znode(s) to fix or delete by hand: "
                         + ", ".join(invalid[:5]) + (", ..." if len(invalid) > 5 else ""))
            result.error = _join(result.error, kept)
    return result


def _join(first: str | None, then: str) -> str:
    return then if first is None else f"{first}; {then}"


# C901: one decision per partition (equal/ahead/beyond end...), then commit+verify
def _check_and_commit(  # noqa: C901
        run: _Run, group: str, rows: dict[TopicPartition, Row],
        valid: dict[TopicPartition, int], result: GroupResult,
        refuse: str | None, sent: list[bool]) -> None:
    """Check each valid partition against the broker and commit those to move (unless a
    dry run, or `refuse` says why not); `sent` gets True once the OffsetCommit is sent."""
    from kafkactl.client.fetcher import EARLIEST, LATEST

    valid = dict(valid)
    existing = _existing_partitions(run.consumer, {t for t, _ in valid})
    topics_here = {t for t, _ in existing}
    # (a broker that has none of the group's topics is more likely the wrong cluster than
    # one where they were all deleted: their offsets are not skipped then)
    skip = run.skip_deleted_topics and bool(topics_here)
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
    before = run.admin.fetch_offsets(group, list(valid)) if valid else {}
    for tp in valid:
        rows[tp].broker_before = before.get(tp, -1)
    ends, why = _log_offsets(run, valid, LATEST)
    starts, why_start = _log_offsets(run, ends, EARLIEST)
    why.update(why_start)
    for tp, reason in why.items():
        row = rows[tp]
        row.status = FAILED
        row.note = (f"not migrated: its log range cannot be read ({reason}); migrate "
                    "again once it is available")
        del valid[tp]

    to_commit: dict[TopicPartition, int] = {}
    for tp, off in valid.items():
        row = rows[tp]
        end = ends.get(tp, -1)
        start = starts.get(tp, -1)
        if row.broker_before == off:
            row.status = EQUAL
        elif row.broker_before > off and not run.overwrite:
            # committed to the broker since (Kafka's dual commit, then broker only): where
            # Kafka's consumer resumes (the larger of the two), so kept, never rewound
            row.status = AHEAD
            row.note = (f"the broker holds a newer offset {row.broker_before}: kept (Kafka "
                        "resumes from the larger); --overwrite would rewind it to "
                        "ZooKeeper's")
        elif off > end >= 0 and not run.overwrite:
            row.status = BEYOND_END
            row.note = f"log end offset is {end}; --overwrite commits it anyway"
        elif off < start and not run.overwrite:
            row.status = BELOW_START
            row.note = (f"log start offset is {start} (the records before it are gone); "
                        "--overwrite commits it anyway")
        else:
            row.status = (WOULD_OVERWRITE if row.broker_before >= 0 else WOULD_MIGRATE)
            if row.broker_before > off:  # (--overwrite: ZooKeeper's wins, as asked)
                row.note = (f"rewinds the broker's newer offset {row.broker_before} "
                            f"(--overwrite): {row.broker_before - off} record(s) to "
                            "consume again")
            to_commit[tp] = off

    if to_commit and refuse is not None and not run.dry_run:
        for tp in to_commit:
            rows[tp].status = FAILED
            rows[tp].note = "not committed: the group has live ZooKeeper consumers"
        return
    if to_commit:
        state = run.admin.describe_group(group).state
        if state not in INACTIVE:
            result.error = _join(result.error, (
                f"group {group!r} has active members on the broker ({state}): stop its "
                "consumers first (as Kafka's tools, offsets are changed only for an "
                "inactive group)"))
            if not run.dry_run:
                for tp in to_commit:
                    rows[tp].status = FAILED
                    rows[tp].note = "not committed: the group has active members"
                return
    if not to_commit or run.dry_run:
        return
    sent.append(True)
    codes = run.admin.commit_offsets(group, to_commit)
    after = run.admin.fetch_offsets(group, list(to_commit))
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


def _log_offsets(run: _Run, tps: Iterable[TopicPartition], when: int
                 ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    """The partitions' offsets at `when` (LATEST/EARLIEST) and why each other one has none:
    a partition new to the run is waited for (a leader being elected), one the run already
    found unavailable is asked once."""
    new = [tp for tp in tps if tp not in run.unavailable]
    known = [tp for tp in tps if tp in run.unavailable]
    found: dict[TopicPartition, int] = {}
    why: dict[TopicPartition, str] = {}
    for part, wait in ((new, run.partition_wait_s), (known, 0.0)):
        if not part:
            continue
        answered, missing = run.consumer.try_list_offsets(dict.fromkeys(part, when), wait)
        found.update((tp, v[0]) for tp, v in answered.items())
        for tp in answered:
            run.unavailable.pop(tp, None)
        for tp, reason in missing.items():
            if tp not in run.unavailable:
                run.unavailable[tp] = f"{reason}; waited {wait:g} s"
            why[tp] = run.unavailable[tp]
    return found, why


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

