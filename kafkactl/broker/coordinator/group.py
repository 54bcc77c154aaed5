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
from dataclasses import dataclass, field
from typing import Any


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
    join_future: asyncio.Future[Any] | None = None
    sync_future: asyncio.Future[Any] | None = None
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

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms
