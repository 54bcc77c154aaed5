"""GroupMetadataManager (seed 002's offset manager, storage half): group metadata and
committed offsets, cached in memory and persisted to the compacted internal topic
`__consumer_offsets` in Kafka's key/value schemas. What may be committed, fetched, deleted or
expired is decided in offset_manager.py; this module writes, reads and replays the records.

* Key v0/v1 = OffsetCommitKey(group, topic, partition) -> OffsetCommitValue (v1 when an
  explicit expire timestamp was given, else v3); key v2 = GroupMetadataKey(group) ->
  GroupMetadataValue v3. A null value (tombstone) deletes the key.
* A group lives in partition `abs(javaStringHashCode(group)) % offsets.topic.num.partitions`;
  this broker leads every partition, so it coordinates every group.
* After a restart each partition is replayed into the cache in a worker thread; until that
  is done the coordinator answers COORDINATOR_LOAD_IN_PROGRESS (the seed's
  OffsetsLoadInProgress) for the groups in it, and clients retry (as Kafka, Heartbeat
  answers NONE and SyncGroup REBALANCE_IN_PROGRESS meanwhile).
* TxnOffsetCommit (KIP-98, KIP-447) writes its offsets as a transactional batch with the
  producer's id and epoch; they stay pending (per group and producer) until the
  transaction's marker lands in the same partition: COMMIT materializes them (unless the
  partition was committed again later in the log), ABORT drops them. Replaying a partition
  follows the same rule, so an offset whose transaction has no marker yet is pending after
  a restart and an aborted one never appears.
* Magic 0/1 messages (what Kafka wrote before 0.11: plain, compressed wrappers, tombstones)
  are replayed as Kafka's loader does, in offset order with the record batches.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.broker.coordinator.group import GroupMetadata, GroupState, OffsetAndMetadata
from kafkactl.protocol.data import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    decode_data,
    encode_data,
)
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatchBuilder

if TYPE_CHECKING:
    from kafkactl.broker.config import BrokerConfig
    from kafkactl.broker.partition_store import PartitionStore
    from kafkactl.broker.replica_manager import ReplicaManager
    from kafkactl.broker.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600",
                         "compression.type": "producer"}


@functools.lru_cache(maxsize=1 << 16)  # per request of a group or transactional id
def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % partitions (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# ---- record encoding --------------------------------------------------------------------
def offset_key(group: str, topic: str, partition: int) -> bytes:
    return encode_data(OFFSET_COMMIT_KEY, 1, {"group": group, "topic": topic,
                                              "partition": partition})


def offset_value(o: OffsetAndMetadata) -> bytes:
    if o.expire_timestamp >= 0:
        return encode_data(OFFSET_COMMIT_VALUE, 1, {
            "offset": o.offset, "metadata": o.metadata, "commit_timestamp": o.commit_timestamp,
            "expire_timestamp": o.expire_timestamp})
    return encode_data(OFFSET_COMMIT_VALUE, 3, {
        "offset": o.offset, "leader_epoch": o.leader_epoch, "metadata": o.metadata,
        "commit_timestamp": o.commit_timestamp})


def group_key(group: str) -> bytes:
    return encode_data(GROUP_METADATA_KEY, 2, {"group": group})


def group_value(g: GroupMetadata) -> bytes:
    return encode_data(GROUP_METADATA_VALUE, 3, {
        "protocol_type": g.protocol_type or "", "generation": g.generation_id,
        "protocol": g.protocol_name, "leader": g.leader_id,
        "current_state_timestamp": g.state_timestamp_ms,
        "members": [{
            "member_id": m.member_id, "group_instance_id": m.group_instance_id,
            "client_id": m.client_id, "client_host": m.client_host,
            "rebalance_timeout": m.rebalance_timeout_ms,
            "session_timeout": m.session_timeout_ms,
            "subscription": m.metadata_for(g.protocol_name), "assignment": m.assignment,
        } for m in g.members.values()],
    })


@dataclass(slots=True)
class LoadedEntry:
    """One decoded record of __consumer_offsets (value None = tombstone)."""

    kind: str  # "offset" | "group" | "marker" (a transaction's COMMIT/ABORT)
    group: str
    topic: str = ""
    partition: int = -1
    value: dict[str, Any] | None = None
    value_version: int = 0
    producer_id: int = -1  # a transactional offset commit's (or a marker's) producer
    position: int = -1  # the base offset of the batch it was read from
    commit: bool = False  # a marker: COMMIT (True) or ABORT


def control_type(key: bytes | memoryview | None) -> int | None:
    """A control record's type (0 ABORT, 1 COMMIT) from its key (version, type), or None
    when the key is not one."""
    if key is None or len(key) < 4:
        return None
    return int.from_bytes(bytes(key[2:4]), "big", signed=True)


def _txn_append_error(code: ErrorCode) -> ErrorCode:
    """Kafka's GroupMetadataManager mapping of an append error for a TxnOffsetCommit."""
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return code


def decode_record(key: bytes | memoryview, value: bytes | memoryview | None) -> LoadedEntry:
    kver, k = decode_data(OFFSET_COMMIT_KEY if _version(key) <= 1 else GROUP_METADATA_KEY, key)
    if kver <= 1:
        entry = LoadedEntry("offset", k["group"], k["topic"], k["partition"])
        if value is not None:
            entry.value_version, entry.value = decode_data(OFFSET_COMMIT_VALUE, value)
        return entry
    if kver == 2:
        entry = LoadedEntry("group", k["group"])
        if value is not None:
            entry.value_version, entry.value = decode_data(GROUP_METADATA_VALUE, value)
        return entry
    raise ValueError(f"unknown __consumer_offsets key version {kver}")


def _bare(group: GroupMetadata) -> bool:
    """A group that only a replayed offset commit made and whose offsets are all gone:
    no metadata record (no generation, no protocol, no members), nothing committed or
    pending."""
    return (group.generation_id == 0 and group.protocol_type is None and not group.members
            and not group.has_offsets)


def _version(buf: bytes | memoryview) -> int:
    return int.from_bytes(bytes(buf[:2]), "big", signed=True) if len(buf) >= 2 else -1


def _decode_into(out: list[LoadedEntry], records: Iterable[Any], txn_producer: int,
                 position: int, partition_log: Any) -> None:
    """Append the decoded records of one batch (or legacy message set entry) to `out`;
    keyless or undecodable records are skipped (the latter logged)."""
    for rec in records:
        if rec.key is None:
            continue
        try:
            entry = decode_record(rec.key, rec.value)
            entry.producer_id = txn_producer
            entry.position = position
            out.append(entry)
        except Exception as e:  # one bad record must not stop the load
            log.warning("skipping unreadable record at offset %d of %s-%d: %s",
                        rec.offset, partition_log.topic, partition_log.partition, e)


class GroupMetadataManager:
    def __init__(self, config: BrokerConfig, topic_admin: TopicAdmin, partitions: PartitionStore,
                 replica_manager: ReplicaManager, *, num_partitions: int,
                 time_fn: Callable[[], float] = time.time) -> None:
        self.config = config
        self.topic_admin = topic_admin
        self.partitions = partitions
        self.replica_manager = replica_manager
        self.num_partitions = num_partitions
        self._time = time_fn
        self.groups: dict[str, GroupMetadata] = {}
        self.loading: set[int] = set()
        # The __consumer_offsets partitions this broker leads, whose groups it coordinates
        # (kafkactl.broker.replica_state tells the coordinator, in either mode).
        self.owned: set[int] = set()
        self.on_group_loaded: Callable[[GroupMetadata], None] | None = None

    def now_ms(self) -> int:
        return int(self._time() * 1000)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def owns(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned

    def is_loading(self, group_id: str) -> bool:
        return bool(self.loading) and self.partition_for(group_id) in self.loading

    # ---- the internal topic -------------------------------------------------------------
    def topic_exists(self) -> bool:
        return self.topic_admin.topic(OFFSETS_TOPIC) is not None

    def ensure_topic(self) -> None:
        """Create __consumer_offsets (compacted) on first use."""
        if self.topic_exists():
            return
        configs = dict(OFFSETS_TOPIC_CONFIGS)
        props = self.config.props
        if props.get("offsets.topic.segment.bytes"):  # Kafka's key for the topic's segments
            configs["segment.bytes"] = str(props["offsets.topic.segment.bytes"])
        self.topic_admin.auto_create(OFFSETS_TOPIC, self.num_partitions, configs)
        log.info("created the offsets topic %s with %d partitions", OFFSETS_TOPIC,
                 self.num_partitions)

    def append_records(self, group_id: str, records: Iterable[tuple[bytes, bytes | None]]
                       ) -> ErrorCode:
        """Append `records` (key, value or None for a tombstone) to the group's partition."""
        return self.append_batch(group_id, records)[0]

    def append_batch(self, group_id: str, records: Iterable[tuple[bytes, bytes | None]], *,
                     producer_id: int = -1, producer_epoch: int = -1,
                     transactional: bool = False) -> tuple[ErrorCode, int]:
        """Append `records` as one batch to the group's partition: (error, the batch's base
        offset). A transactional batch carries the producer's id and epoch (Kafka's
        storeOffsets for TxnOffsetCommit); its errors are Kafka's mapping of the append's
        (a fenced epoch or a bad transaction state is the client's to see)."""
        self.ensure_topic()
        partition = self.partition_for(group_id)
        builder = RecordBatchBuilder(
            producer_id=producer_id, producer_epoch=producer_epoch,
            base_sequence=self._next_sequence(partition, producer_id, producer_epoch)
            if producer_id >= 0 else -1, is_transactional=transactional)
        now = self.now_ms()
        for key, value in records:
            builder.append(now, key, value)
        if builder.record_count == 0:
            return ErrorCode.NONE, -1
        result = self.replica_manager.append(
            OFFSETS_TOPIC, partition, memoryview(bytearray(builder.build())),
            produce_version=9)
        if result.error == ErrorCode.NONE:
            return ErrorCode.NONE, result.base_offset
        log.warning("cannot write group %s to %s: %s", group_id, OFFSETS_TOPIC,
                    result.message or result.error.name)
        if not transactional:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        return _txn_append_error(result.error), -1

    def _next_sequence(self, partition: int, producer_id: int, epoch: int) -> int:
        """The sequence the producer's next batch in `partition` continues with (Kafka's
        coordinator appends skip the sequence check; the log here checks every producer
        batch, so the coordinator numbers its batches itself: 0 for a new epoch)."""
        from kafkactl.log.producer_state import next_sequence

        part = self.partitions.get_partition(OFFSETS_TOPIC, partition)
        entry = None if part is None else part.producer_state.producers.get(producer_id)
        if entry is None or entry.epoch != epoch or not entry.batches:
            return 0
        return next_sequence(entry.last_seq)

    # ---- writes ---------------------------------------------------------------------------
    def store_group(self, group: GroupMetadata) -> ErrorCode:
        return self.append_records(group.group_id,
                                   [(group_key(group.group_id), group_value(group))])

    def delete_group(self, group: GroupMetadata) -> ErrorCode:
        """Tombstones for the group and all its offsets; the group becomes Dead."""
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(group.group_id, t, p), None) for t, p in group.offsets]
        records.append((group_key(group.group_id), None))
        code = self.append_records(group.group_id, records)
        if code == ErrorCode.NONE:
            group.offsets.clear()
            group.offset_positions.clear()
            group.transition(GroupState.DEAD, self.now_ms())
            self.groups.pop(group.group_id, None)
        return code

    def cleanup_group_metadata(self, groups: Iterable[GroupMetadata],
                               selector: Callable[[GroupMetadata], list[TopicPartition]]
                               ) -> int:
        """Kafka's cleanupGroupMetadata: `selector` removes offsets from a group (returns
        their partitions); a tombstone is appended for each, and a group left Empty with
        no offsets becomes Dead and leaves the cache (with a tombstone for its metadata when
        it had a generation: a group that only stored offsets never wrote any). Returns
        how many offsets were removed."""
        removed_total = 0
        for group in list(groups):
            gid = group.group_id
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets and \
                    not group.pending_members:
                log.info("group %s transitioned to Dead in generation %d", gid,
                         group.generation_id)
                group.transition(GroupState.DEAD, self.now_ms())
            records: list[tuple[bytes, bytes | None]] = [
                (offset_key(gid, t, p), None) for t, p in removed]
            if group.is_(GroupState.DEAD) and self.groups.get(gid) is group:
                del self.groups[gid]
                if group.generation_id > 0:
                    records.append((group_key(gid), None))
            if records:
                code = self.append_records(gid, records)
                if code != ErrorCode.NONE:  # as Kafka: the cache stays cleaned
                    log.warning("group %s: the tombstones of %d removed offset(s) were not "
                                "written (%s); they come back if %s-%d is loaded again", gid,
                                len(removed), code.name, OFFSETS_TOPIC,
                                self.partition_for(gid))
            removed_total += len(removed)
        return removed_total

    # ---- loading ------------------------------------------------------------------------
    async def load_partition(self, p: int) -> None:
        """This broker now leads partition p: replay it, then serve its groups."""
        part = self.partitions.get_partition(OFFSETS_TOPIC, p)
        if part is None:
            return
        self.loading.add(p)
        try:
            count = await self._replay(part.log)
        finally:
            self.loading.discard(p)
        log.info("loaded %s-%d: %d record(s), %d group(s) coordinated here", OFFSETS_TOPIC, p,
                 count, sum(1 for g in self.groups if self.partition_for(g) == p))

    def unload_partition(self, p: int) -> list[GroupMetadata]:
        """Another broker leads partition p now: its groups leave this coordinator."""
        gone = [g for gid, g in self.groups.items() if self.partition_for(gid) == p]
        for g in gone:
            del self.groups[g.group_id]
        return gone

    async def _replay(self, partition_log: Any) -> int:
        """Replay a partition in a worker thread, then (on the event loop, so nothing is
        appended meanwhile) what was appended while it was read: a transaction marker
        written during the load completes the offsets the load found pending. Returns the
        number of records replayed."""
        entries, end = await asyncio.to_thread(self._read_batches, partition_log, None)
        self._apply(entries)
        count = len(entries)
        while partition_log.log_end_offset > end:
            tail, end = self._read_batches(partition_log, end)
            if not tail and partition_log.log_end_offset > end:
                break  # nothing readable there (logged): do not spin
            self._apply(tail)
            count += len(tail)
        return count

    @staticmethod
    def _read_partition(partition_log: Any) -> list[LoadedEntry]:
        """Every readable record of one partition. What cannot be read is logged with its
        partition and offsets and skipped (Kafka's loader does the same): a batch whose
        records do not parse, or a record whose key/value is not the offsets schema."""
        return GroupMetadataManager._read_batches(partition_log, None)[0]

    @staticmethod
    def _read_batches(partition_log: Any, start: int | None) -> tuple[list[LoadedEntry], int]:
        """The readable records from offset `start` (None: the log start), and the offset
        after the last batch read."""
        out: list[LoadedEntry] = []
        end = getattr(partition_log, "log_start_offset", 0) if start is None else start
        try:
            for batch in partition_log.iter_batches(start):
                if start is not None and (batch.last_offset if batch.magic < 2
                                          else batch.base_offset) < start:
                    continue
                end = max(end, batch.last_offset + 1)
                legacy = batch.magic < 2  # a magic 0/1 message (Kafka before 0.11 wrote them)
                try:
                    records = list(batch)
                except Exception as e:  # CRC-valid bytes that are not records
                    log.warning("skipping unreadable batch at offsets %s..%d of %s-%d: %s",
                                "?" if legacy else batch.base_offset, batch.last_offset,
                                partition_log.topic, partition_log.partition, e)
                    continue
                if legacy:  # never transactional, no control records
                    _decode_into(out, records, -1, records[0].offset if records else -1,
                                 partition_log)
                    continue
                if batch.is_control:
                    kind = control_type(records[0].key) if records else None
                    if kind in (0, 1):  # ABORT / COMMIT of a transaction
                        out.append(LoadedEntry("marker", "", partition=partition_log.partition,
                                               producer_id=batch.producer_id,
                                               position=batch.base_offset, commit=kind == 1))
                    continue
                _decode_into(out, records, batch.producer_id if batch.is_transactional else -1,
                             batch.base_offset, partition_log)
        except Exception as e:  # a batch header that cannot be framed: nothing after it
            log.error("stopped loading %s-%d after %d record(s): %s", partition_log.topic,
                      partition_log.partition, len(out), e)
            end = partition_log.log_end_offset  # what follows cannot be read either
        return out, end

    def _apply(self, entries: list[LoadedEntry]) -> None:
        from kafkactl.broker.coordinator.group import MemberMetadata

        touched: dict[str, GroupMetadata] = {}
        for e in entries:
            try:
                self._apply_one(e, touched, MemberMetadata)
            except Exception as exc:  # a decodable record with impossible contents
                log.warning("skipping %s record of group %r: %s", e.kind, e.group, exc)
        for group in touched.values():
            if self.on_group_loaded is not None:
                self.on_group_loaded(group)

    def complete_txn(self, producer_id: int, offsets_partition: int, commit: bool) -> int:
        """A transaction marker in `offsets_partition`: the pending offsets of `producer_id`
        in the groups of that partition are materialized (commit) or dropped; returns how
        many groups had some."""
        done = 0
        for gid, group in self.groups.items():
            if producer_id in group.pending_txn_offsets and \
                    self.partition_for(gid) == offsets_partition:
                group.complete_txn_offsets(producer_id, commit)
                done += 1
        return done

    def _apply_one(self, e: LoadedEntry, touched: dict[str, GroupMetadata],
                   member_cls: Any) -> None:
        if e.kind == "marker":
            self.complete_txn(e.producer_id, e.partition, e.commit)
            return
        group = self.groups.get(e.group)
        if e.kind == "offset":
            tp = (e.topic, e.partition)
            if e.value is None:
                if group is not None:
                    if e.producer_id >= 0:
                        group.pending_txn_offsets.get(e.producer_id, {}).pop(tp, None)
                    else:
                        group.offsets.pop(tp, None)
                        group.offset_positions.pop(tp, None)
                    if _bare(group):  # as Kafka's loader: a group is made of what is left
                        self.groups.pop(e.group, None)
                        touched.pop(e.group, None)
                return
            if group is None:
                group = self.groups[e.group] = GroupMetadata(e.group)
            v = e.value
            offset = OffsetAndMetadata(
                v["offset"], v.get("leader_epoch", -1), v.get("metadata") or "",
                v.get("commit_timestamp", -1),
                v.get("expire_timestamp", -1) if e.value_version == 1 else -1)
            if e.producer_id >= 0:  # pending until its transaction's marker
                group.pending_txn_offsets.setdefault(e.producer_id, {})[tp] = (offset,
                                                                               e.position)
            else:
                group.offsets[tp] = offset
                group.offset_positions[tp] = e.position
            touched[e.group] = group
            return
        if e.value is None:
            if group is not None:
                group.offsets.clear()
                group.offset_positions.clear()
                if group.pending_txn_offsets:  # Kafka keeps a group with pending offsets
                    group.members, group.static_members = {}, {}
                    group.state = GroupState.EMPTY
                    return
                self.groups.pop(e.group, None)
                touched.pop(e.group, None)
            return
        if group is None:
            group = self.groups[e.group] = GroupMetadata(e.group)
        v = e.value
        group.protocol_type = v["protocol_type"] or None
        group.generation_id = v["generation"]
        group.protocol_name = v.get("protocol")
        group.leader_id = v.get("leader")
        group.state_timestamp_ms = v.get("current_state_timestamp", -1)
        group.members = {}
        group.static_members = {}
        for m in v.get("members") or ():
            member = member_cls(
                m["member_id"], m.get("group_instance_id"), m["client_id"],
                m["client_host"], m.get("rebalance_timeout", -1) if
                m.get("rebalance_timeout", -1) >= 0 else m["session_timeout"],
                m["session_timeout"], group.protocol_type or "",
                [(group.protocol_name or "", bytes(m["subscription"] or b""))],
                bytes(m["assignment"] or b""), is_new=False)
            group.members[member.member_id] = member
            if member.group_instance_id:
                group.static_members[member.group_instance_id] = member.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        touched[e.group] = group
