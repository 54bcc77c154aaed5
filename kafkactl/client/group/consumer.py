"""GroupConsumer: the Consumer with its partitions assigned by a consumer group.

Subscribe to topic names or a regex; membership (join/sync, background heartbeats) is the
ConsumerCoordinator's. Each poll first checks for a pending rebalance: partitions are
revoked (offsets committed when auto-commit is on, then `on_revoke`), the member rejoins,
and `on_assign` sees the new partitions, whose positions come from the committed offsets
(or auto.offset.reset). A partition kept across the rebalance keeps its position only when
the member held it all along (the generation it rejoined follows the one it held: nobody
else can have read or committed it meanwhile); the others start again from the commits.

When the member lost its membership (the coordinator expelled it: its session expired, the
process was stopped, or ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID; or it left after
max.poll.interval.ms without a poll) its partitions are lost, as Java's onPartitionsLost:
`on_lost` (default `on_revoke`) sees them, nothing of them is committed (another member may
own them and have committed further), their positions are forgotten, and those assigned
again resume from the group's committed offsets. A poll whose fetch comes back after the
member lost its generation hands out nothing of it; one that comes back after the member
heard nothing from the coordinator for longer than its session asks the coordinator first
(a Heartbeat) and hands out nothing if the member was expelled meanwhile.

What is committed is `consumed`, never what was only fetched: the
records poll() or iteration handed out, or, for a caller that renders fetches itself, what it
marked (kafkactl consume marks the records it has written to stdout). Auto-commit commits
them every auto_commit_interval_ms and before partitions are revoked; `commit()` commits
now; `close()` commits (when auto-commit is on) and leaves the group so the others
rebalance at once.

When the brokers go away (a restart, a network cut) a poll does not fail: it drops the
coordinator, waits a backoff and returns nothing, and the next polls rejoin and resume from
the positions held (or the commits). Only when no poll has reached the cluster for
`reconnect_timeout_ms` (default: the rebalance timeout, max.poll.interval.ms) does poll
raise, naming the last error.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkactl.client.consumer import Consumer
from kafkactl.client.errors import (
    ClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    without_advice,
)
from kafkactl.client.fetcher import PartitionFetch
from kafkactl.client.group.membership import (
    LOST_CLUSTER,
    CommitFailedError,
    ConsumerCoordinator,
)
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.errors import KafkaError

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
RebalanceCallback = Callable[[set[TopicPartition]], None]


class _GroupSource:
    """The AssignmentSource view of the coordinator (committed offsets for positions)."""

    def __init__(self, consumer: GroupConsumer) -> None:
        self.consumer = consumer

    def assignment(self, client: KafkaClient) -> set[TopicPartition]:
        return self.consumer.assignment()

    def committed(self, client: KafkaClient,
                  tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        return self.consumer.coordinator.committed(tps)

    def on_poll(self, client: KafkaClient) -> None:
        self.consumer.maybe_rebalance()

    def born_since_start(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return self.consumer.coordinator.watch.born_since_start(tps)

    def close(self, client: KafkaClient) -> None:
        return None


class GroupConsumer(Consumer):
    def __init__(self, *topics: str, group_id: str,
                 bootstrap_servers: str | Iterable[str] | None = None,
                 pattern: str | None = None, assignors: Iterable[str] = ("range", "roundrobin"),
                 session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 3000,
                 rebalance_timeout_ms: int = 300000, enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, group_instance_id: str | None = None,
                 on_assign: RebalanceCallback | None = None,
                 on_revoke: RebalanceCallback | None = None,
                 on_lost: RebalanceCallback | None = None,
                 auto_offset_reset: str = "latest", client_id: str = "kafkactl-consumer",
                 reconnect_timeout_ms: int | None = None, **kwargs: Any) -> None:
        if not topics and not pattern:
            raise ValueError("subscribe to at least one topic or a pattern")
        super().__init__(bootstrap_servers=bootstrap_servers,
                         auto_offset_reset=auto_offset_reset, client_id=client_id, **kwargs)
        self.group_id = group_id
        self.report_outages = False  # the group's own notice (LOST_CLUSTER) says it
        self.coordinator = ConsumerCoordinator(
            self.client, group_id, topics=topics, pattern=pattern, assignors=assignors,
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms, group_instance_id=group_instance_id)
        self.source = _GroupSource(self)
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.on_lost = on_lost
        self._owned: set[TopicPartition] = set()
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        self._closed = False
        self.reconnect_timeout = (rebalance_timeout_ms if reconnect_timeout_ms is None
                                  else reconnect_timeout_ms) / 1000
        self._unreachable_since: float | None = None
        self.coordinator.reconnect_timeout = self.reconnect_timeout

    # ---- assignment ---------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | None = None,
                  exclude: str | None = None, partitions: Iterable[int] | None = None) -> None:
        coordinator = getattr(self, "coordinator", None)
        if coordinator is None:
            return  # Consumer.__init__ has no topics to hand over
        coordinator.topics = tuple(topics)
        coordinator.pattern = re.compile(pattern) if pattern else None
        coordinator.watch.restart()
        coordinator.rejoin_needed = True

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        raise ValueError("a GroupConsumer gets its partitions from the group; use Consumer "
                         "for manual assignment")

    def assignment(self) -> set[TopicPartition]:
        if not self._owned and self.coordinator.rejoin_needed:
            self.maybe_rebalance()
        return set(self._owned)

    def rebalance_pending(self) -> bool:
        return self.coordinator.rejoin_needed and not self._closed

    def out_of_group(self) -> bool:
        """The member lost its membership (expelled, or left after max.poll.interval.ms)
        and has not rejoined yet: the next poll rejoins."""
        return not self._closed and self.coordinator.partitions_lost

    def check_membership(self) -> bool:
        """Ask the coordinator now whether this member still holds its generation (a
        Heartbeat); False, its partitions lost, when it does not. For a caller about to
        make its progress final (a transaction with the group's offsets, as KIP-447 fences
        a zombie's)."""
        if self.coordinator.partitions_lost:
            return False
        return self.coordinator.check_membership()

    def maybe_rebalance(self) -> None:
        """Rejoin if the group asked for it (or we never joined); auto-commit when due."""
        if self._closed:
            return
        coordinator = self.coordinator
        coordinator.raise_if_fatal()
        if not coordinator.rejoin_needed and coordinator.subscription_changed():
            coordinator.rejoin_needed = True
        if coordinator.rejoin_needed:
            revoked = False
            if coordinator.partitions_lost:
                self._lose()  # before rejoining: nothing of them is committed
            elif self._owned:
                self._revoke()
                revoked = True
            budget = None
            if self._unreachable_since is not None:  # reconnecting: within what is left
                budget = max(1.0, self._unreachable_since + self.reconnect_timeout
                             - time.monotonic())
            coordinator.ensure_active(budget)
            if coordinator.partitions_lost or not coordinator.assignment_continuous:
                # lost while rejoining (the revoking commit or the JoinGroup said so), or
                # a generation went by unseen: what it held may have moved meanwhile
                self._lose(notify=not revoked)
            new = set(coordinator.assignment)
            self.forget_positions((self._owned | set(self.positions) | set(self.consumed))
                                  - new)
            self._owned = new
            coordinator.polled()
            if self.on_assign is not None:
                self.on_assign(set(self._owned))
        elif self.enable_auto_commit and time.monotonic() >= self._next_auto_commit:
            with contextlib.suppress(CommitFailedError):
                self.commit()

    def _revoke(self) -> None:
        if not self._owned:
            return
        if self.enable_auto_commit:
            with contextlib.suppress(CommitFailedError, ClientError, KafkaError):
                self.commit()
        self._drop_in_flight()
        if self.on_revoke is not None:
            self.on_revoke(set(self._owned))

    def _lose(self, notify: bool = True) -> None:
        """The partitions held are lost: tell `on_lost` (else `on_revoke`, as Java's
        default onPartitionsLost), commit nothing, forget their positions."""
        coordinator = self.coordinator
        reason = coordinator.lost_reason or "a generation of the group went by unseen"
        coordinator.partitions_lost = False
        lost, self._owned = self._owned, set()
        if not lost:
            return
        log.warning("group %s: this member lost its partitions %s (%s); they are read "
                    "again from the group's committed offsets when assigned again",
                    self.group_id, ", ".join(f"{t}-{p}" for t, p in sorted(lost)), reason)
        self._drop_in_flight()
        callback = self.on_lost if self.on_lost is not None else self.on_revoke
        if notify and callback is not None:
            callback(set(lost))
        self.forget_positions(lost)

    # ---- polling through broker outages ------------------------------------------------
    def poll_fetches(self, timeout: float = 1.0) -> list[PartitionFetch]:
        self.coordinator.polled()
        try:
            out = super().poll_fetches(timeout)
            if out and (self.coordinator.partitions_lost or self.coordinator.session_lapsed()):
                # the heartbeat thread heard the generation is lost while these were
                # fetched, or this process did not run for longer than its session
                # (stopped, starved) and the group may have expelled it meanwhile: these
                # records may be another member's by now (read and committed): none is
                # handed out
                try:
                    member = self.check_membership()
                except BaseException:
                    self._unfetch(out)
                    raise
                if not member:
                    self._unfetch(out)
                    return []
        except (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable) as e:
            self._lost_cluster(e)
            return []
        except KafkaError as e:
            if not e.retriable:
                raise
            self._lost_cluster(e)
            return []
        self._unreachable_since = None
        return out

    def _unfetch(self, fetches: list[PartitionFetch]) -> None:
        """Put the partitions of `fetches` back where these fetches started."""
        for pf in fetches:
            tp = (pf.topic, pf.partition)
            if tp in self.positions:
                self.seek(tp, pf.fetch_offset)

    def _lost_cluster(self, error: Exception) -> None:
        """A poll could not reach the group's coordinator or the cluster: forget the
        coordinator and rejoin at the next poll, unless that has gone on too long."""
        now = time.monotonic()
        if self._unreachable_since is None:
            if self.coordinator.unreachable_since is None:
                log.warning(LOST_CLUSTER, self.group_id, without_advice(error),
                            self.reconnect_timeout)
            self._unreachable_since = self.coordinator.unreachable_since or now
        elif now - self._unreachable_since >= self.reconnect_timeout:
            raise ClientError(
                f"group {self.group_id!r}: no broker of the cluster could be reached for "
                f"{now - self._unreachable_since:.0f} s (the limit is max.poll.interval.ms, "
                f"{self.reconnect_timeout * 1000:.0f} ms): {error}") from None
        self.coordinator.lost_coordinator()
        self._drop_in_flight()
        self.client.cluster.invalidate()
        time.sleep(min(1.0, max(self.client.retry_backoff, 0.25)))

    # ---- commits ------------------------------------------------------------------------
    def commit(self, offsets: Mapping[TopicPartition, int] | None = None,
               metadata: str = "") -> None:
        """Commit `offsets` (default: the consumed offset of every owned partition)."""
        if offsets is None:
            if self.before_commit is not None:
                self.before_commit()
            offsets = {tp: off for tp, off in self.consumed.items() if tp in self._owned}
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        self.coordinator.commit(offsets, metadata)

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.coordinator.committed(list(tps))

    # ---- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        if self.enable_auto_commit and self._owned:
            with contextlib.suppress(ClientError, KafkaError, OSError):
                self.commit()
        self._closed = True
        with contextlib.suppress(ClientError, KafkaError, OSError):
            self.coordinator.close()
        super().close()
