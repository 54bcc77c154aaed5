"""Group state (Kafka's GroupMetadata / MemberMetadata) for the classic group protocol.

States and transitions, as in Kafka:

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup--> Stable
    Stable / CompletingRebalance --join, leave, session expiry--> PreparingRebalance
    PreparingRebalance --last member gone--> Empty;  any --DeleteGroups / unload--> Dead

A group is only touched from the broker's event loop thread, so nothing here locks.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Set
from dataclasses import dataclass, field

from kafkactl.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # explicit retention (OffsetCommit v2-4), else -1


@dataclass(slots=True)
class JoinResult:
    """A JoinGroup answer."""

    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] | None = None


@dataclass(slots=True)
class SyncResult:
    """A SyncGroup answer."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # a parked JoinGroup / SyncGroup; None answers "the coordinator is stopping"
    join_future: asyncio.Future[JoinResult | None] | None = None
    sync_future: asyncio.Future[SyncResult | None] | None = None
    session_timer: asyncio.TimerHandle | None = None
    is_new: bool = True

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    def cancel_session_timer(self) -> None:
        if self.session_timer is not None:
            self.session_timer.cancel()
            self.session_timer = None

    def answer_join(self, result: JoinResult | None) -> None:
        """Answer the parked JoinGroup, if any, and forget it."""
        fut, self.join_future = self.join_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    def answer_sync(self, result: SyncResult | None) -> None:
        """Answer the parked SyncGroup, if any, and forget it."""
        fut, self.sync_future = self.sync_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)


@dataclass(eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    state_timestamp_ms: int = -1
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # the __consumer_offsets offset of the batch each committed offset was written in: a
    # transactional commit completed by its marker replaces a committed offset only when
    # written after it (Kafka's CommitRecordMetadataAndOffset.olderThan)
    offset_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    # TxnOffsetCommit: producer id -> partition -> (offset, its batch's log offset), until
    # the transaction's marker commits (materialize) or aborts (drop) them
    pending_txn_offsets: dict[int, dict[tuple[str, int], tuple[OffsetAndMetadata, int]]] = \
        field(default_factory=dict)
    join_task: asyncio.Task[None] | None = None
    join_event: asyncio.Event | None = None
    new_member_added: bool = False

    # ---- queries ------------------------------------------------------------------------
    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """Kafka's isStaticMemberFenced: the instance id is known and belongs to another
        member id (the caller is a zombie of a static member that has since rejoined)."""
        if not instance_id:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_pending_txn_offsets(self, tp: tuple[str, int] | None = None) -> bool:
        """Transactional offsets awaiting their marker (for partition `tp`, or any)."""
        if tp is None:
            return bool(self.pending_txn_offsets)
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> int:
        """The marker of `producer_id`'s transaction: its pending offsets become the
        committed ones (commit; an offset committed later in the log stays) or are dropped
        (abort). Returns how many were materialized."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not pending or not commit:
            return 0
        done = 0
        for tp, (offset, position) in pending.items():
            current = self.offset_positions.get(tp)
            if tp in self.offsets and current is not None and current > position:
                continue
            self.offsets[tp] = offset
            self.offset_positions[tp] = position
            done += 1
        return done

    def remove_offsets(self, doomed: Set[tuple[str, int]]) -> list[tuple[str, int]]:
        """Kafka's GroupMetadata.removeOffsets: forget the committed offsets of the
        partitions in `doomed` (and any a transaction has pending for them); returns the
        partitions whose committed offset was removed."""
        for pending in self.pending_txn_offsets.values():
            for tp in [tp for tp in pending if tp in doomed]:
                del pending[tp]
        removed = [tp for tp in self.offsets if tp in doomed]
        for tp in removed:
            del self.offsets[tp]
            self.offset_positions.pop(tp, None)
        return removed

    @property
    def has_offsets(self) -> bool:
        """Kafka's hasOffsets: committed offsets, or a transaction's pending ones."""
        return bool(self.offsets) or bool(self.pending_txn_offsets)

    def all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports(self, protocol_type: str, protocols: list[str]) -> bool:
        """Can a member with these protocols join (Kafka's supportsProtocols)?"""
        if not protocols:
            return False
        if not self.members:
            return bool(protocol_type)
        if self.protocol_type != protocol_type:
            return False
        common = set(protocols)
        for m in self.members.values():
            common &= set(m.protocol_names)
        return bool(common)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports;
        the protocol with the most votes wins (ties: the first in the leader's order)."""
        members = list(self.members.values())
        common = set(members[0].protocol_names)
        for m in members[1:]:
            common &= set(m.protocol_names)
        if not common:
            raise ValueError("no protocol supported by every member")
        votes: dict[str, int] = {}
        for m in members:
            choice = next(n for n in m.protocol_names if n in common)
            votes[choice] = votes.get(choice, 0) + 1
        order = [n for n in members[0].protocol_names if n in common]
        return max(order, key=lambda n: (votes.get(n, 0), -order.index(n)))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None if unknown."""
        if self.protocol_type != "consumer" or not self.protocol_name:
            return None
        from kafkactl.protocol.data import SUBSCRIPTION, decode_data

        topics: set[str] = set()
        for m in self.members.values():
            try:
                _v, sub = decode_data(SUBSCRIPTION, m.metadata_for(self.protocol_name))
            except Exception:
                return None
            topics.update(sub.get("topics") or ())
        return topics

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, instance id, subscription) of every member, for the leader."""
        return [(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
                for m in self.members.values()]

    # ---- changes ------------------------------------------------------------------------
    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def add(self, member: MemberMetadata) -> None:
        """A new member; the first one sets the protocol type and any one leads a group
        whose leader is gone."""
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id:
            self.static_members[member.group_instance_id] = member.member_id
        self.new_member_added = True
        if self.leader_id is None or self.leader_id not in self.members:
            self.leader_id = member.member_id

    def remove(self, member: MemberMetadata) -> None:
        """Drop a member: its session timer stops, its parked requests answer
        UNKNOWN_MEMBER_ID and the next member leads if it did."""
        member.cancel_session_timer()
        self.members.pop(member.member_id, None)
        if member.group_instance_id:
            self.static_members.pop(member.group_instance_id, None)
        member.answer_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        member.answer_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if self.leader_id == member.member_id:
            self.leader_id = next(iter(self.members), None)

    def remove_pending(self, member_id: str) -> bool:
        """Forget a member id handed out by MEMBER_ID_REQUIRED; False if there is none."""
        if member_id not in self.pending_members:
            return False
        handle = self.pending_members.pop(member_id)
        if handle is not None:
            handle.cancel()
        return True

    def replace_static_member(self, old_id: str, new_id: str) -> MemberMetadata:
        """A static member rejoined under a new member id: the old id's parked requests
        answer FENCED_INSTANCE_ID and the member (and its leadership) moves to the new id."""
        member = self.members.pop(old_id)
        member.cancel_session_timer()
        member.answer_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        member.answer_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_id
        self.members[new_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def init_next_generation(self, now_ms: int) -> None:
        """The next generation: Empty without members, else CompletingRebalance with the
        protocol the members vote for."""
        self.generation_id += 1
        if self.is_empty:
            self.protocol_name = None
            self.leader_id = None
            self.transition(GroupState.EMPTY, now_ms)
            return
        self.protocol_name = self.select_protocol()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.transition(GroupState.COMPLETING_REBALANCE, now_ms)

    def propagate_assignment(self, error: ErrorCode) -> None:
        """Answer every parked SyncGroup: its member's assignment, or `error`."""
        for m in self.members.values():
            m.answer_sync(SyncResult(error, m.assignment if error == ErrorCode.NONE else b"",
                                     self.protocol_type, self.protocol_name))

    def shutdown(self) -> None:
        """The coordinator is stopping: cancel the group's tasks and timers and answer its
        parked requests with None."""
        if self.join_task is not None:
            self.join_task.cancel()
        for m in self.members.values():
            m.cancel_session_timer()
            m.answer_join(None)
            m.answer_sync(None)
        for handle in self.pending_members.values():
            if handle is not None:
                handle.cancel()
