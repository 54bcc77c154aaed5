"""GroupCoordinator: the classic group membership protocol.

JoinGroup / SyncGroup / Heartbeat / LeaveGroup drive the state machine in group.py; the
leader computes the assignment (the broker never decodes it) and SyncGroup hands each
member its part. Delayed joins, session expiry and the initial rebalance delay are asyncio
timers and tasks on the broker's event loop, never polling loops. Offset commits, fetches
and deletes are the OffsetManager's (offset_manager.py); the coordinator hands them on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkactl.broker.coordinator.group import (
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncResult,
)
from kafkactl.broker.coordinator.group_metadata_manager import (
    OFFSETS_TOPIC,
    GroupMetadataManager,
)
from kafkactl.broker.coordinator.offset_manager import OffsetManager
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkactl.broker.config import BrokerConfig
    from kafkactl.broker.metadata_cache import MetadataCache
    from kafkactl.broker.partition_store import PartitionStore
    from kafkactl.broker.replica_manager import ReplicaManager
    from kafkactl.broker.topic_admin import TopicAdmin

log = logging.getLogger(__name__)

MIN_SESSION_TIMEOUT_MS = 6000
MAX_SESSION_TIMEOUT_MS = 1800000
MAX_GROUP_ID_LENGTH = 32767


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, cache: MetadataCache, topic_admin: TopicAdmin,
                 partitions: PartitionStore, replica_manager: ReplicaManager) -> None:
        self.cache = cache
        self.initial_rebalance_delay_ms = config.get_int_or("group.initial.rebalance.delay.ms",
                                                            3000)
        self.min_session_timeout_ms = config.get_int_or("group.min.session.timeout.ms",
                                                        MIN_SESSION_TIMEOUT_MS)
        self.max_session_timeout_ms = config.get_int_or("group.max.session.timeout.ms",
                                                        MAX_SESSION_TIMEOUT_MS)
        self.max_group_size = config.get_int_or("group.max.size", 2**31 - 1)
        self.manager = GroupMetadataManager(
            config, topic_admin, partitions, replica_manager,
            num_partitions=max(1, config.get_int_or("offsets.topic.num.partitions", 50)))
        self.manager.on_group_loaded = self._on_group_loaded
        self.offsets = OffsetManager(self, config)
        self._tasks: list[asyncio.Task[None]] = []
        self.active = False
        # partitions deleted while a __consumer_offsets partition was being loaded: its
        # groups are cleaned of them once loaded
        self._deleted_while_loading: dict[int, set[tuple[str, int]]] = {}
        # the topic admin tells of deleted topics (a standalone broker's own deletion, a
        # cluster's UpdateMetadata): their offsets leave every group (Kafka's
        # onPartitionsDeleted)
        listeners = getattr(topic_admin, "deletion_listeners", None)
        if listeners is not None:
            listeners.append(self.on_partitions_deleted)

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return self.manager.groups

    def now_ms(self) -> int:
        return self.manager.now_ms()

    # ---- lifecycle ----------------------------------------------------------------------
    async def startup(self) -> None:
        self.active = True
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self.offsets.expire_loop()))

    async def shutdown(self) -> None:
        self.active = False
        for t in self._tasks:
            t.cancel()
        for group in list(self.groups.values()):
            group.shutdown()

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        for m in group.members.values():
            self.schedule_session(group, m)

    # ---- common checks ------------------------------------------------------------------
    def check_group(self, group_id: str | None) -> ErrorCode:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_id is None or group_id == "" or len(group_id) > MAX_GROUP_ID_LENGTH:
            return ErrorCode.INVALID_GROUP_ID
        if self.manager.is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.owns(group_id):
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # ---- leadership of __consumer_offsets partitions -------------------------------------
    # The coordinator serves the groups of the __consumer_offsets partitions this broker
    # leads: elected()/resigned() follow the controller's decisions, a cluster's or a
    # standalone broker's own (kafkactl.broker.replica_state calls them).
    def elected(self, partition: int) -> None:
        owned = self.manager.owned
        if partition in owned:
            return
        owned.add(partition)
        part = self.manager.partitions.get_partition(OFFSETS_TOPIC, partition)
        if part is not None and part.log_start_offset >= part.log_end_offset:
            return  # nothing to replay (a new partition): its groups are served at once
        self.manager.loading.add(partition)
        task = asyncio.get_running_loop().create_task(self._load_partition(partition))
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _load_partition(self, partition: int) -> None:
        try:
            await self.manager.load_partition(partition)
        except Exception:
            log.exception("loading %s-%d failed", "__consumer_offsets", partition)
            self.manager.loading.discard(partition)
        doomed = self._deleted_while_loading.pop(partition, None)
        if doomed and partition in self.manager.owned:
            self._remove_deleted(doomed, partition)

    def resigned(self, partition: int) -> None:
        owned = self.manager.owned
        if partition not in owned:
            return
        owned.discard(partition)
        for group in self.manager.unload_partition(partition):
            group.shutdown()  # parked joins/syncs answer; members find the new coordinator

    # ---- deleted topics -------------------------------------------------------------------
    def on_partitions_deleted(self, tps: Iterable[tuple[str, int]]) -> int:
        """Kafka's onPartitionsDeleted (handleDeletedPartitions): the committed offsets of
        the deleted partitions leave every group coordinated here, each with a tombstone in
        __consumer_offsets (so a restart or a new coordinator does not bring them back, and
        a topic created again under the name starts without them); a group left Empty with
        no offsets becomes Dead. Returns how many offsets were removed."""
        doomed = {tp for tp in tps if tp[0] != OFFSETS_TOPIC}
        if not doomed:
            return 0
        for p in self.manager.loading:  # cleaned once loaded
            self._deleted_while_loading.setdefault(p, set()).update(doomed)
        return self._remove_deleted(doomed)

    def _remove_deleted(self, doomed: set[tuple[str, int]], partition: int | None = None
                        ) -> int:
        """Remove the offsets of `doomed` from the groups of `partition` (None: every
        partition loaded here)."""
        manager = self.manager
        groups = [g for gid, g in manager.groups.items()
                  if (p := manager.partition_for(gid)) in manager.owned
                  and p not in manager.loading and (partition is None or p == partition)]
        n = manager.cleanup_group_metadata(groups, lambda g: g.remove_offsets(doomed))
        if n:
            topics = sorted({t for t, _p in doomed})
            log.info("removed %d committed offset(s) of deleted topic(s) %s", n,
                     ", ".join(topics) if len(topics) <= 5 else f"{len(topics)} topics")
        return n

    def coordinator_for(self, group_id: str) -> int:
        """The __consumer_offsets partition whose leader coordinates `group_id` (the
        FindCoordinator handler creates the topic on first use: `manager.ensure_topic`)."""
        return self.manager.partition_for(group_id)

    # ---- JoinGroup ----------------------------------------------------------------------
    async def join_group(self, group_id: str, member_id: str, instance_id: str | None,
                         require_known_member: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]]) -> JoinResult:
        code = self.check_group(group_id)
        if code != ErrorCode.NONE:
            return JoinResult(code, member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = GroupMetadata(group_id, state_timestamp_ms=-1)
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports(protocol_type, [n for n, _ in protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not member_id:
            return await self._join_unknown(group, instance_id, require_known_member,
                                            client_id, client_host, rebalance_timeout_ms,
                                            session_timeout_ms, protocol_type, protocols)
        return await self._join_known(group, member_id, instance_id, client_id, client_host,
                                      rebalance_timeout_ms, session_timeout_ms,
                                      protocol_type, protocols)

    async def _join_unknown(self, group: GroupMetadata, instance_id: str | None,
                            require_known: bool, client_id: str, client_host: str,
                            rebalance_ms: int, session_ms: int, protocol_type: str,
                            protocols: list[tuple[str, bytes]]) -> JoinResult:
        new_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id in group.members:
                return await self._replace_static(group, old_id, new_id, protocols)
        elif require_known:
            # KIP-394: hand out the id first; the member joins again with it
            loop = asyncio.get_running_loop()
            group.pending_members[new_id] = loop.call_later(
                session_ms / 1000, self._expire_pending, group, new_id)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id)
        if len(group.members) >= self.max_group_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
        member = MemberMetadata(new_id, instance_id, client_id, client_host, rebalance_ms,
                                session_ms, protocol_type, protocols)
        return await self._add_and_wait(group, member)

    async def _join_known(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                          client_id: str, client_host: str, rebalance_ms: int,
                          session_ms: int, protocol_type: str,
                          protocols: list[tuple[str, bytes]]) -> JoinResult:
        if group.is_fenced(member_id, instance_id):
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        if member_id not in group.members:
            if not group.remove_pending(member_id):
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            if len(group.members) >= self.max_group_size:
                return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
            member = MemberMetadata(member_id, instance_id, client_id, client_host,
                                    rebalance_ms, session_ms, protocol_type, protocols)
            return await self._add_and_wait(group, member)
        member = group.members[member_id]
        if group.is_(GroupState.PREPARING_REBALANCE):
            return await self._update_and_wait(group, member, rebalance_ms, session_ms,
                                               protocols)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                return self._join_result(group, member)
            return await self._update_and_wait(group, member, rebalance_ms, session_ms,
                                               protocols)
        if group.is_(GroupState.STABLE):
            if member_id == group.leader_id or not member.matches(protocols):
                return await self._update_and_wait(group, member, rebalance_ms, session_ms,
                                                   protocols)
            return self._join_result(group, member)
        return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    async def _replace_static(self, group: GroupMetadata, old_id: str, new_id: str,
                              protocols: list[tuple[str, bytes]]) -> JoinResult:
        """A static member came back with a new member id: take over the old identity."""
        current_leader = group.leader_id or ""
        member = group.replace_static_member(old_id, new_id)
        if group.is_(GroupState.STABLE) and member.matches(protocols):
            self.schedule_session(group, member)
            self.manager.store_group(group)
            result = self._join_result(group, member)
            # as Kafka: no member list, and the leader id from before the replacement, so
            # a returning static leader does not compute an assignment a stable group
            # would never hand out (SyncGroup returns the stored one)
            result.members = []
            result.leader_id = current_leader
            return result
        member.protocols = protocols
        return await self._update_and_wait(group, member, member.rebalance_timeout_ms,
                                           member.session_timeout_ms, protocols)

    def _join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinResult:
        self.schedule_session(group, member)
        members = (group.current_member_metadata() if member.member_id == group.leader_id
                   else [])
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation_id,
                          group.protocol_type, group.protocol_name, group.leader_id or "",
                          members)

    async def _add_and_wait(self, group: GroupMetadata, member: MemberMetadata) -> JoinResult:
        loop = asyncio.get_running_loop()
        member.join_future = loop.create_future()
        member.is_new = True
        group.add(member)
        self._prepare_or_check(group, f"member {member.member_id} joined")
        return await self._wait_join(member)

    async def _update_and_wait(self, group: GroupMetadata, member: MemberMetadata,
                               rebalance_ms: int, session_ms: int,
                               protocols: list[tuple[str, bytes]]) -> JoinResult:
        loop = asyncio.get_running_loop()
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_ms
        member.session_timeout_ms = session_ms
        member.answer_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        member.join_future = loop.create_future()
        self._prepare_or_check(group, f"member {member.member_id} rejoined")
        return await self._wait_join(member)

    async def _wait_join(self, member: MemberMetadata) -> JoinResult:
        member.cancel_session_timer()
        fut = member.join_future
        assert fut is not None
        result = await fut
        if result is None:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member.member_id)
        return result

    def _prepare_or_check(self, group: GroupMetadata, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                           GroupState.EMPTY):
            self.prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join_complete(group)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            for m in group.members.values():  # pending syncs must rejoin
                m.answer_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        was_empty = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, self.now_ms())
        log.info("preparing to rebalance group %s (generation %d): %s", group.group_id,
                 group.generation_id, reason)
        if group.join_task is not None:
            group.join_task.cancel()
        group.join_event = asyncio.Event()
        loop = asyncio.get_running_loop()
        if was_empty and self.initial_rebalance_delay_ms > 0:
            group.join_task = loop.create_task(self._initial_delayed_join(group))
        else:
            group.join_task = loop.create_task(self._delayed_join(group))

    async def _initial_delayed_join(self, group: GroupMetadata) -> None:
        remaining = group.max_rebalance_timeout_ms()
        delay = min(self.initial_rebalance_delay_ms, remaining)
        while True:
            group.new_member_added = False
            await asyncio.sleep(max(delay, 0) / 1000)
            remaining -= delay
            if group.new_member_added and remaining > 0:
                delay = min(self.initial_rebalance_delay_ms, remaining)
                continue
            break
        group.join_task = None
        self._complete_join(group)

    async def _delayed_join(self, group: GroupMetadata) -> None:
        event = group.join_event
        if event is not None and not group.all_members_joined():
            timeout = group.max_rebalance_timeout_ms() / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        group.join_task = None
        self._complete_join(group)

    def _check_join_complete(self, group: GroupMetadata) -> None:
        event = group.join_event
        if group.all_members_joined() and event is not None:
            event.set()

    def _complete_join(self, group: GroupMetadata) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        # as Kafka: only dynamic members that missed the rebalance are dropped; a static
        # member keeps its place (and its partitions) until its session expires
        for m in list(group.members.values()):
            if not m.awaiting_join and not m.group_instance_id:
                log.info("removing member %s of group %s: it did not rejoin in time",
                         m.member_id, group.group_id)
                group.remove(m)
        joined = [m for m in group.members.values() if m.awaiting_join]
        if group.members and not joined:
            log.warning("group %s: no member rejoined in time; waiting for the static "
                        "members to rejoin or expire", group.group_id)
            group.join_event = asyncio.Event()
            group.join_task = asyncio.get_running_loop().create_task(self._delayed_join(group))
            return
        leader = group.members.get(group.leader_id or "")
        if joined and (leader is None or not leader.awaiting_join):
            group.leader_id = joined[0].member_id  # the leader must be a member that rejoined
        group.init_next_generation(self.now_ms())
        if group.is_empty:
            self.manager.store_group(group)
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            return
        log.info("group %s: generation %d with %d member(s), protocol %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name)
        for m in group.members.values():
            m.is_new = False
            m.answer_join(self._join_result(group, m))

    # ---- sessions -----------------------------------------------------------------------
    def schedule_session(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.cancel_session_timer()
        loop = asyncio.get_running_loop()
        member.session_timer = loop.call_later(member.session_timeout_ms / 1000,
                                               self._session_expired, group, member)

    def _session_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member or member.awaiting_join:
            return
        log.info("member %s of group %s failed to heartbeat within %d ms; removing it",
                 member.member_id, group.group_id, member.session_timeout_ms)
        self._member_left(group, member)

    def _expire_pending(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.pop(member_id, None)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join_complete(group)

    def _member_left(self, group: GroupMetadata, member: MemberMetadata) -> None:
        group.remove(member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"member {member.member_id} left")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join_complete(group)

    # ---- SyncGroup ----------------------------------------------------------------------
    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        code, group = self._group_for_sync(group_id, generation_id, member_id, instance_id,
                                           protocol_type, protocol_name)
        if group is None:
            return SyncResult(code)
        member = group.members[member_id]
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_(GroupState.STABLE):
            self.schedule_session(group, member)
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type,
                              group.protocol_name)
        if not group.is_(GroupState.COMPLETING_REBALANCE):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        fut: asyncio.Future[SyncResult | None] = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        self.schedule_session(group, member)
        if member_id == group.leader_id:
            self._store_assignment(group, assignments)
        result = await fut
        if result is None:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return result

    def _group_for_sync(self, group_id: str, generation_id: int, member_id: str,
                        instance_id: str | None, protocol_type: str | None,
                        protocol_name: str | None) -> tuple[ErrorCode, GroupMetadata | None]:
        """The group of a current member, or (the error, None)."""
        code = self.check_group(group_id)
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # as Kafka: the rebalance's state is lost while loading; REBALANCE_IN_PROGRESS
            # sends the member back to JoinGroup (older clients do not expect the loading
            # error from SyncGroup)
            return ErrorCode.REBALANCE_IN_PROGRESS, None
        if code != ErrorCode.NONE:
            return code, None
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID, None
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION, None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, None
        return ErrorCode.NONE, group

    def _store_assignment(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        """The leader's SyncGroup: persist the assignment, then answer every member (or
        rebalance again if it could not be stored)."""
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        stored = self.manager.store_group(group)
        if stored != ErrorCode.NONE:
            for m in group.members.values():
                m.assignment = b""
            group.propagate_assignment(stored)
            self.prepare_rebalance(group, "storing the assignment failed")
            return
        group.transition(GroupState.STABLE, self.now_ms())
        group.propagate_assignment(ErrorCode.NONE)
        log.info("group %s is stable at generation %d", group.group_id, group.generation_id)

    # ---- Heartbeat / LeaveGroup ---------------------------------------------------------
    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        code = self.check_group(group_id)
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # as Kafka: answered blindly while the group loads
        if code != ErrorCode.NONE:
            return code
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        # Kafka's order: a zombie of a static member (its old member id with its instance
        # id) is fenced before it could be told its id is unknown
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id) or group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        if not member.awaiting_join:
            self.schedule_session(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[ErrorCode]]:
        code = self.check_group(group_id)
        if code != ErrorCode.NONE:
            return code, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        results = []
        for member_id, instance_id in members:
            if instance_id:
                known = group.static_members.get(instance_id)
                if known is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if group.remove_pending(member_id):
                self._check_join_complete(group)
                results.append(ErrorCode.NONE)
                continue
            member = group.members.get(member_id)
            if member is None:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            log.info("member %s is leaving group %s", member_id, group_id)
            self._member_left(group, member)
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    # ---- DescribeGroups / ListGroups / DeleteGroups --------------------------------------
    def describe(self, group_id: str) -> tuple[ErrorCode, GroupMetadata | None]:
        code = self.check_group(group_id)
        if code != ErrorCode.NONE:
            return code, None
        return ErrorCode.NONE, self.groups.get(group_id)

    def list_groups(self, states: list[str] | None) -> tuple[ErrorCode, list[GroupMetadata]]:
        if self.manager.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        wanted = {s.lower() for s in states or ()}
        return ErrorCode.NONE, [g for g in self.groups.values()
                        if not wanted or g.state.value.lower() in wanted]

    def delete_group(self, group_id: str) -> ErrorCode:
        code = self.check_group(group_id)
        if code != ErrorCode.NONE:
            return code
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        return self.manager.delete_group(group)

    # ---- offsets (the OffsetManager's) -------------------------------------------------
    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       instance_id: str | None,
                       offsets: dict[tuple[str, int], OffsetAndMetadata]
                       ) -> dict[tuple[str, int], ErrorCode]:
        return self.offsets.commit_offsets(group_id, generation_id, member_id, instance_id,
                                           offsets)

    def fetch_offsets(self, group_id: str, tps: list[tuple[str, int]] | None,
                      require_stable: bool = False
                      ) -> tuple[ErrorCode, dict[tuple[str, int], OffsetAndMetadata | None],
                                 set[tuple[str, int]]]:
        return self.offsets.fetch_offsets(group_id, tps, require_stable)

    # ---- transactions (KIP-98, KIP-447) -------------------------------------------------
    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           generation_id: int, member_id: str, instance_id: str | None,
                           offsets: dict[tuple[str, int], OffsetAndMetadata]
                           ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: the offsets are written in the producer's transaction and
        stay pending until its marker (handle_txn_completion)."""
        return self.offsets.commit_txn_offsets(group_id, producer_id, producer_epoch,
                                               generation_id, member_id, instance_id, offsets)

    def handle_txn_completion(self, producer_id: int, offsets_partition: int,
                              commit: bool) -> None:
        """The transaction coordinator's marker for `producer_id` was appended to
        __consumer_offsets partition `offsets_partition` (WriteTxnMarkers calls this after
        the append): the producer's pending offsets in that partition's groups become the
        committed ones (commit) or are dropped (abort)."""
        n = self.offsets.complete_txn(producer_id, offsets_partition, commit)
        if n:
            log.debug("%s of producer %d: %d group(s) of %s-%d", "commit" if commit
                      else "abort", producer_id, n, "__consumer_offsets", offsets_partition)

    def delete_offsets(self, group_id: str, tps: list[tuple[str, int]]
                       ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        return self.offsets.delete_offsets(group_id, tps)
