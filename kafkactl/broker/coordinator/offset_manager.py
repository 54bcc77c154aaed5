"""OffsetManager: OffsetCommit, OffsetFetch, OffsetDelete and offset expiration.

Committed offsets live in each group's GroupMetadata and are persisted as OffsetCommit
records of `__consumer_offsets` (a tombstone deletes one) through the GroupMetadataManager,
which also replays them after a restart. Whether a member may commit (generation, member
id, static-member fencing) is the GroupCoordinator's question: it owns the membership state
machine, and every offset API reaches this class through it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from kafkactl.broker.coordinator.group import GroupMetadata, GroupState, OffsetAndMetadata
from kafkactl.broker.coordinator.group_metadata_manager import offset_key, offset_value
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkactl.broker.config import BrokerConfig
    from kafkactl.broker.coordinator.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
OFFSET_METADATA_MAX_BYTES = 4096


def java_length(text: str) -> int:
    """Java's String.length(): UTF-16 code units (a character past U+FFFF counts 2), what
    Kafka compares offset.metadata.max.bytes with (GroupMetadataManager's
    validateOffsetMetadataLength, `metadata.length() <= maxMetadataSize`), not UTF-8
    bytes: 4096 'é' (8192 UTF-8 bytes) fit the default, 2049 emoji (4098 units) do not."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for c in text if c > "\uffff")


class OffsetManager:
    def __init__(self, coordinator: GroupCoordinator, config: BrokerConfig) -> None:
        self.coordinator = coordinator
        self.group_manager = coordinator.manager
        self.metadata_max_bytes = config.get_int_or("offset.metadata.max.bytes",
                                                    OFFSET_METADATA_MAX_BYTES)
        self.retention_ms = config.get_int_or("offsets.retention.minutes", 10080) * 60000
        self.retention_check_ms = config.get_int_or("offsets.retention.check.interval.ms",
                                                    600000)

    # ---- OffsetCommit -------------------------------------------------------------------
    def _checked(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
                 ) -> tuple[dict[TopicPartition, ErrorCode],
                            dict[TopicPartition, OffsetAndMetadata]]:
        """(the errors of the partitions that cannot take an offset: unknown, or metadata
        over offset.metadata.max.bytes in UTF-16 code units, as Kafka; the offsets of the
        others). OffsetCommit and TxnOffsetCommit both check here."""
        errors: dict[TopicPartition, ErrorCode] = {}
        good: dict[TopicPartition, OffsetAndMetadata] = {}
        cache = self.coordinator.cache
        for tp, o in offsets.items():
            if cache.partition(*tp) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif java_length(o.metadata) > self.metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                good[tp] = o
        return errors, good

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       instance_id: str | None,
                       offsets: dict[TopicPartition, OffsetAndMetadata]
                       ) -> dict[TopicPartition, ErrorCode]:
        """Validate then store; returns an error per partition."""
        code, group = self._group_for_commit(group_id, generation_id, member_id, instance_id)
        if group is None:
            return {tp: code for tp in offsets}
        errors, good = self._checked(offsets)
        if good:
            stored = self.store_offsets(group, good)
            for tp in good:
                errors[tp] = stored
        return errors

    def _group_for_commit(self, group_id: str, generation_id: int, member_id: str,
                          instance_id: str | None) -> tuple[ErrorCode, GroupMetadata | None]:
        """The group to commit to, or (the error for every partition, None). A negative
        generation commits to an Empty or unknown group without membership (simple
        consumers and tools); otherwise the member must be current."""
        code = self.coordinator.check_group(group_id)
        if code != ErrorCode.NONE:
            return code, None
        groups = self.group_manager.groups
        group = groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return ErrorCode.ILLEGAL_GENERATION, None
            group = groups[group_id] = GroupMetadata(group_id)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.NONE, group
        code = self._check_member(group, generation_id, member_id, instance_id)
        return code, (group if code == ErrorCode.NONE else None)

    def _check_member(self, group: GroupMetadata, generation_id: int, member_id: str,
                      instance_id: str | None) -> ErrorCode:
        """A commit from a member counts as a heartbeat."""
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members[member_id]
        if not member.awaiting_join:
            self.coordinator.schedule_session(group, member)
        return ErrorCode.NONE

    # ---- TxnOffsetCommit -----------------------------------------------------------------
    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation_id: int, member_id: str, instance_id: str | None,
                           offsets: dict[TopicPartition, OffsetAndMetadata]
                           ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleTxnCommitOffsets: an unknown group is created (Empty: a
        transactional producer need not be a member); v3+ (KIP-447) carries the
        consumer's generation and member id, checked when given, so a zombie of an
        older generation cannot commit."""
        code = self.coordinator.check_group(group_id)
        if code != ErrorCode.NONE:
            return dict.fromkeys(offsets, code)
        groups = self.group_manager.groups
        group = groups.get(group_id)
        if group is None:
            group = groups[group_id] = GroupMetadata(group_id)
        code = self._check_txn_member(group, generation_id, member_id, instance_id)
        if code != ErrorCode.NONE:
            return dict.fromkeys(offsets, code)
        errors, good = self._checked(offsets)
        if good:
            stored = self.store_txn_offsets(group, producer_id, producer_epoch, good)
            for tp in good:
                errors[tp] = stored
        return errors

    @staticmethod
    def _check_txn_member(group: GroupMetadata, generation_id: int, member_id: str,
                          instance_id: str | None) -> ErrorCode:
        """KIP-447's checks of doTxnCommitOffsets (no heartbeat: the producer is not the
        member's connection)."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id and not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def complete_txn(self, producer_id: int, offsets_partition: int, commit: bool) -> int:
        """The marker of `producer_id`'s transaction was written to `offsets_partition`."""
        return self.group_manager.complete_txn(producer_id, offsets_partition, commit)

    # ---- OffsetFetch --------------------------------------------------------------------
    def fetch_offsets(self, group_id: str, tps: list[TopicPartition] | None,
                      require_stable: bool = False
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None],
                                 set[TopicPartition]]:
        """The committed offsets of `tps` (None: all of the group's), and with
        `require_stable` (OffsetFetch v7+, KIP-447) the partitions whose offsets a
        transaction has pending: those answer UNSTABLE_OFFSET_COMMIT until its marker."""
        code = self.coordinator.check_group(group_id)
        if code != ErrorCode.NONE:
            return code, {}, set()
        group = self.group_manager.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        found: dict[TopicPartition, OffsetAndMetadata | None] = (
            dict(stored) if tps is None else {tp: stored.get(tp) for tp in tps})
        unstable: set[TopicPartition] = set()
        if require_stable and group is not None and group.pending_txn_offsets:
            pending = {tp for p in group.pending_txn_offsets.values() for tp in p}
            unstable = pending if tps is None else pending & set(tps)
            for tp in unstable:
                found.setdefault(tp, None)
        return ErrorCode.NONE, found, unstable

    # ---- OffsetDelete -------------------------------------------------------------------
    def delete_offsets(self, group_id: str, tps: list[TopicPartition]
                       ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Delete committed offsets of topics the group does not subscribe to (of a
        partition that does not exist: only one the group has an offset for)."""
        code = self.coordinator.check_group(group_id)
        if code != ErrorCode.NONE:
            return code, {}
        group = self.group_manager.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if group.protocol_type not in (None, "", "consumer") and not group.is_empty:
            return ErrorCode.NON_EMPTY_GROUP, {}
        subscribed = group.subscribed_topics() if not group.is_empty else set()
        results: dict[TopicPartition, ErrorCode] = {}
        deletable = []
        cache = self.coordinator.cache
        for tp in tps:
            if subscribed is None or tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            elif cache.partition(*tp) is None and tp not in group.offsets:
                # an offset the group still has of a partition that is gone (a deleted
                # topic whose offsets outlived it: written by an older broker, or while
                # this coordinator was not told) may be deleted: nothing else removes it
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                deletable.append(tp)
                results[tp] = ErrorCode.NONE
        if deletable:
            stored = self.remove_offsets(group, deletable)
            for tp in deletable:
                results[tp] = stored
        return ErrorCode.NONE, results

    # ---- __consumer_offsets records -----------------------------------------------------
    def store_offsets(self, group: GroupMetadata,
                      offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """Append one OffsetCommit record per partition, then cache them."""
        code, position = self.group_manager.append_batch(group.group_id, [
            (offset_key(group.group_id, t, p), offset_value(o)) for (t, p), o in offsets.items()])
        if code == ErrorCode.NONE:
            group.offsets.update(offsets)
            for tp in offsets:
                group.offset_positions[tp] = position
        return code

    def store_txn_offsets(self, group: GroupMetadata, producer_id: int, producer_epoch: int,
                          offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """TxnOffsetCommit's write: one transactional batch of the producer, whose offsets
        stay pending until the transaction's marker (handle_txn_completion)."""
        code, position = self.group_manager.append_batch(
            group.group_id, [(offset_key(group.group_id, t, p), offset_value(o))
                             for (t, p), o in offsets.items()],
            producer_id=producer_id, producer_epoch=producer_epoch, transactional=True)
        if code == ErrorCode.NONE:
            pending = group.pending_txn_offsets.setdefault(producer_id, {})
            for tp, o in offsets.items():
                pending[tp] = (o, position)
        return code

    def remove_offsets(self, group: GroupMetadata, tps: Iterable[TopicPartition]) -> ErrorCode:
        """Append a tombstone per committed partition of `tps`, then forget them."""
        tps = [tp for tp in tps if tp in group.offsets]
        code = self.group_manager.append_records(
            group.group_id, [(offset_key(group.group_id, t, p), None) for t, p in tps])
        if code == ErrorCode.NONE:
            for tp in tps:
                group.offsets.pop(tp, None)
                group.offset_positions.pop(tp, None)
        return code

    # ---- expiration ---------------------------------------------------------------------
    async def expire_loop(self) -> None:
        """Expire offsets every offsets.retention.check.interval.ms until cancelled."""
        while True:
            await asyncio.sleep(max(self.retention_check_ms, 100) / 1000)
            try:
                self.expire_offsets(self.retention_ms)
            except Exception:
                log.exception("offset expiration failed; will retry")

    def expire_offsets(self, retention_ms: int) -> int:
        """Kafka's offset expiration (KIP-211, KIP-496), per group:

        * a group with a protocol type and no members (Empty): an offset expires
          offsets.retention.minutes after the group became Empty (after its commit if that
          time is unknown);
        * a Stable consumer group: only offsets of topics no member subscribes to, counted
          from their commit;
        * a group that only stores offsets (no protocol type): counted from the commit;
        * an explicit expire timestamp (OffsetCommit v2-v4 retention) replaces the
          computed deadline wherever the group's rule lets an offset expire.

        An Empty group left with no offsets is deleted, unless a new member is between its
        two JoinGroups (KIP-394: the first only hands out a member id, and the second would
        find no group). Returns how many offsets expired."""
        manager = self.group_manager
        now = manager.now_ms()
        expired_total = 0
        for group in list(manager.groups.values()):
            if manager.is_loading(group.group_id):
                continue
            doomed = _expired_offsets(group, now, retention_ms)
            if doomed and self.remove_offsets(group, doomed) == ErrorCode.NONE:
                expired_total += len(doomed)
                log.info("expired %d offset(s) of group %s", len(doomed), group.group_id)
            if group.is_(GroupState.EMPTY) and not group.offsets and \
                    not group.pending_members and not group.pending_txn_offsets:
                manager.delete_group(group)
        return expired_total


def _expired_offsets(group: GroupMetadata, now: int, retention_ms: int
                     ) -> list[TopicPartition]:
    keep_topics: set[str] = set()
    since_empty = False
    if group.protocol_type and group.is_(GroupState.EMPTY):
        since_empty = group.state_timestamp_ms >= 0
    elif group.protocol_type == "consumer" and group.is_(GroupState.STABLE):
        subscribed = group.subscribed_topics()
        if subscribed is None:
            return []
        keep_topics = subscribed
    elif group.protocol_type:
        return []  # rebalancing, or a non-consumer protocol with members
    doomed = []
    for tp, o in group.offsets.items():
        if tp[0] in keep_topics:
            continue
        if o.expire_timestamp >= 0:
            if now >= o.expire_timestamp:
                doomed.append(tp)
            continue
        base = group.state_timestamp_ms if since_empty else o.commit_timestamp
        if now - base >= retention_ms:
            doomed.append(tp)
    return doomed
