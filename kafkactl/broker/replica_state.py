"""The one partition lifecycle on a broker: what a controller's decision does here (Kafka's
ReplicaManager.becomeLeaderOrFollower and stopReplicas).

A standalone broker and a broker of a ZooKeeper cluster host, lead, follow and stop
partitions through this module alone:

- in a cluster, the controller's LeaderAndIsr and StopReplica requests arrive over the wire
  (kafkactl.broker.handlers.controller_requests checks their epochs, then calls here);
- a standalone broker is a cluster of one whose controller (kafkactl.broker.
  standalone_topic_admin, over the data dir's metadata store) makes the same decisions and
  calls here in process, with the same partition states (this broker the only replica,
  leader, ISR).

`host(topic, state)` is one partition's step: open (or make) its log, lead or follow for
the state's epoch, and tell the coordinator of an internal topic (`listeners`:
__consumer_offsets -> the group coordinator, __transaction_state -> the transaction
coordinator) that it now leads the partition (`elected`) or no longer does (`resigned`).
`become_leader_or_follower` does it for a whole request: the files of many new partitions
made on a worker thread, the event loop given back between partitions. `stop(topic, p,
delete)` is StopReplica's step; `stop_replicas` deletes the logs on a worker thread.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kafkactl.broker.partition import Partition
from kafkactl.broker.partition_store import PartitionStore
from kafkactl.log.errors import LogDirOfflineError, LogError
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kafkactl.broker.purgatory import FetchPurgatory
    from kafkactl.broker.replica_fetcher import ReplicaFetcherManager
    from kafkactl.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

YIELD_EVERY = 4  # partitions made between two turns of the event loop
FIRST_FETCH_POLL_S = 0.02  # a new leader's check that its in-sync followers have fetched
FIRST_FETCH_WAIT_S = 1.0  # ... for at most this long (a follower may be slow or gone)
PREPARE_OFF_LOOP = 32  # new partitions in one request whose files a worker thread makes
PREPARE_CHUNK = 32
FREEZE_AFTER = 100  # partitions made in one request after which the GC freezes
TopicPartition = tuple[str, int]


class LeadershipListener(Protocol):
    """The coordinator of an internal topic: it serves what the partitions it leads hold."""

    def elected(self, partition: int) -> None: ...

    def resigned(self, partition: int) -> None: ...


def leader_state(broker_id: int, leader_epoch: int = 0, partition_epoch: int = 0
                 ) -> dict[str, Any]:
    """A LeaderAndIsr partition state for the only replica of a cluster of one: what
    cluster.partition_election.new_partition_state gives a partition whose one replica is
    live (leader and ISR itself)."""
    return {"leader": broker_id, "leader_epoch": leader_epoch, "isr": [broker_id],
            "replicas": [broker_id], "partition_epoch": partition_epoch}


class ReplicaStates:
    """Hosts, leads, follows and stops the partitions a controller names (module doc)."""

    def __init__(self, broker_id: int, store: PartitionStore, replica_manager: ReplicaManager,
                 fetch_purgatory: FetchPurgatory) -> None:
        self.broker_id = broker_id
        self.store = store
        self.replica_manager = replica_manager
        self.fetch_purgatory = fetch_purgatory
        # a cluster: the followers' fetchers, and a topic's configs read before it is hosted
        self.fetchers: ReplicaFetcherManager | None = None
        self.load_topic_config: Callable[[str], Awaitable[None]] | None = None
        self.listeners: dict[str, LeadershipListener] = {}
        self._background: set[asyncio.Task[None]] = set()

    # ---- one partition ---------------------------------------------------------------------
    def host(self, topic: str, index: int, state: Mapping[str, Any],
             now_ms: float | None = None) -> tuple[Partition, bool]:
        """Host (topic, index) as `state` says (leader, leader_epoch, isr, replicas,
        partition_epoch): (the partition, whether a new leader term began here). Raises
        OSError or LogError when its log cannot be opened or made (nothing is hosted)."""
        part = self.store.get_partition(topic, index)
        if part is None:
            part = self.store.make_partition(topic, index, self.store.configs.for_topic(topic),
                                             state["leader_epoch"],
                                             is_new=state.get("is_new", True))
        new_term = self._take_role(part, state, time.time() * 1000 if now_ms is None
                                   else now_ms)
        listener = self.listeners.get(topic)
        if listener is not None:
            if part.is_leader:
                listener.elected(index)
            else:
                listener.resigned(index)
        return part, new_term

    def _take_role(self, part: Partition, ps: Mapping[str, Any], now_ms: float) -> bool:
        """Lead or follow as the controller says; a leader that becomes a follower fails
        its waiting acks=all produces and wakes its long polls. True: a new leader term
        began here."""
        me, key = self.broker_id, (part.topic, part.partition)
        fetchers = self.fetchers
        was_leader = part.is_leader
        if ps["leader"] == me:
            new_term = not was_leader or ps["leader_epoch"] != part.leader_epoch
            if fetchers is not None:
                fetchers.unfollow(key)
            part.become_leader(me, ps["leader_epoch"], ps["isr"], ps["replicas"],
                               ps["partition_epoch"], now_ms)
            if part.maybe_advance_high_watermark():
                self.replica_manager.high_watermark_moved(part)
            return new_term
        part.become_follower(me, ps["leader"], ps["leader_epoch"], ps["isr"], ps["replicas"],
                             ps["partition_epoch"])
        if was_leader:
            self.replica_manager.produce_purgatory.fail(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self.fetch_purgatory.wake(key)
        if fetchers is not None:
            if ps["leader"] >= 0:
                fetchers.follow(part)
            else:
                fetchers.unfollow(key)
        return False

    def stop(self, topic: str, index: int, *, delete: bool) -> None:
        """StopReplica's step: no longer lead or follow (topic, index); with `delete`, its
        log goes too. Raises OSError when the log dir cannot be renamed for deletion."""
        key = (topic, index)
        listener = self.listeners.get(topic)
        if listener is not None:
            listener.resigned(index)
        if self.fetchers is not None:
            self.fetchers.unfollow(key)
        self.replica_manager.produce_purgatory.fail(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if delete:
            self.store.remove_partition(topic, index)
            return
        part = self.store.get_partition(topic, index)
        if part is not None:
            part.is_leader = False
        self.fetch_purgatory.wake(key)

    def unhost(self, topic: str, indexes: Iterable[int]) -> None:
        """Stop serving `indexes` of `topic` at once, their logs kept for `delete_logs` on a
        worker thread (a large deletion)."""
        listener = self.listeners.get(topic)
        for p in indexes:
            if listener is not None:
                listener.resigned(p)
            if self.fetchers is not None:
                self.fetchers.unfollow((topic, p))
            self.replica_manager.produce_purgatory.fail((topic, p),
                                                        ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self.store.stop_hosting(topic, range(p, p + 1))

    def take_offline(self, partitions: Iterable[TopicPartition]) -> None:
        """Their log dir went offline (a storage error, in a cluster): stop leading and
        following them at once, as StopReplica does, their waiting produces failed with
        KAFKA_STORAGE_ERROR, which they answer from now to the next start; the controller,
        told through ZooKeeper, moves their leadership to other in-sync replicas."""
        for topic, p in partitions:
            key = (topic, p)
            listener = self.listeners.get(topic)
            if listener is not None:
                listener.resigned(p)
            if self.fetchers is not None:
                self.fetchers.unfollow(key)
            self.replica_manager.produce_purgatory.fail(key, ErrorCode.KAFKA_STORAGE_ERROR)
            self.store.take_offline(topic, p)

    # ---- a whole request --------------------------------------------------------------------
    async def become_leader_or_follower(self, topic_states: list[dict[str, Any]]
                                        ) -> list[dict[str, Any]]:
        """LeaderAndIsr's `topic_states`: each partition hosted in its role (a state older
        than the hosted one is refused with STALE_CONTROLLER_EPOCH); the per-topic
        partition errors."""
        made = 0
        now_ms = time.time() * 1000
        topics = []
        new_terms: list[Partition] = []
        offline: list[str] = []
        for t in topic_states:
            name = t["topic_name"]
            if self.load_topic_config is not None:
                await self.load_topic_config(name)
            await self._prepare_new_logs(name, t["partition_states"])
            errors = []
            for ps in t["partition_states"]:
                p = ps["partition_index"]
                error = ErrorCode.NONE
                part = self.store.get_partition(name, p)
                if part is not None and ps["leader_epoch"] < part.leader_epoch:
                    error = ErrorCode.STALE_CONTROLLER_EPOCH
                else:
                    if part is None:
                        made += 1
                    try:
                        part, new_term = self.host(name, p, ps, now_ms)
                        if new_term:
                            new_terms.append(part)
                    except LogDirOfflineError:
                        offline.append(f"{name}-{p}")
                        error = ErrorCode.KAFKA_STORAGE_ERROR
                    except (OSError, LogError) as e:
                        log.error("cannot host %s-%d: %s", name, p, e)
                        error = ErrorCode.KAFKA_STORAGE_ERROR
                errors.append({"topic_name": name, "partition_index": p, "error_code": error})
                if made and made % YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # let produce and fetch requests through
            topics.append({"topic_id": t.get("topic_id"), "partition_errors": errors})
        if offline:
            log.warning("cannot host %d partition(s) whose log may be in the offline log "
                        "dir(s) %s: %s%s", len(offline),
                        ", ".join(map(str, self.store.log_manager.offline)),
                        ", ".join(offline[:10]), ", ..." if len(offline) > 10 else "")
        if new_terms and self.fetchers is not None:
            task = asyncio.get_running_loop().create_task(self._hurry_followers(new_terms))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        if made >= FREEZE_AFTER:
            # thousands of long-lived objects: out of the cyclic GC's sight, as at start-up
            # (KafkaServer.startup), so full collections stay short
            gc.freeze()
        return topics

    async def _prepare_new_logs(self, name: str, states: list[dict[str, Any]]) -> None:
        """Make the files of the partitions a request adds on a worker thread, a chunk at a
        time, when there are many (a topic of thousands of partitions): a slow mkdir or
        open blocks the thread, not the produce and fetch requests on the event loop. A
        chunk that fails is left to `host`, which reports each partition's error."""
        store = self.store
        offline = bool(store.log_manager.offline)  # then only new replicas (host says why)
        new = [ps["partition_index"] for ps in states
               if store.get_partition(name, ps["partition_index"]) is None
               and (ps.get("is_new") or not offline)]
        if len(new) < PREPARE_OFF_LOOP:
            return
        config = store.configs.for_topic(name)
        for first in range(0, len(new), PREPARE_CHUNK):
            try:
                await asyncio.to_thread(store.prepare_logs, name,
                                        new[first:first + PREPARE_CHUNK], config)
            except (OSError, LogError):
                return

    async def stop_replicas(self, topic_states: list[dict[str, Any]]
                            ) -> list[dict[str, Any]]:
        """StopReplica's `topic_states`: each partition stopped at once; the logs to delete
        are deleted on a worker thread (close, rename, fsync), off the event loop."""
        errors = []
        for t in topic_states:
            name = t["topic_name"]
            doomed: list[int] = []
            # a replica whose log may be in an offline log dir cannot be deleted yet (Kafka:
            # KAFKA_STORAGE_ERROR; the controller asks again when this broker restarts)
            unreachable = {ps["partition_index"] for ps in t["partition_states"]
                           if ps["delete_partition"]
                           and (name, ps["partition_index"]) in self.store.offline}
            for ps in t["partition_states"]:
                p = ps["partition_index"]
                if ps["delete_partition"]:
                    if p not in unreachable:
                        doomed.append(p)
                else:
                    self.stop(name, p, delete=False)
            self.unhost(name, doomed)
            failed = dict(await asyncio.to_thread(self.store.delete_logs, name, doomed)) \
                if doomed else {}
            for ps in t["partition_states"]:
                p = ps["partition_index"]
                error = ErrorCode.NONE
                if p in unreachable:
                    error = ErrorCode.KAFKA_STORAGE_ERROR
                elif p in failed:
                    log.error("cannot delete the log of %s-%d: %s", name, p,
                              failed[p].strerror or failed[p])
                    error = ErrorCode.KAFKA_STORAGE_ERROR
                errors.append({"topic_name": name, "partition_index": p, "error_code": error})
            if not any(tp[0] == name for tp in self.store.partitions):
                self.store.forget_topic(name)
        return errors

    # ---- a new leader's followers --------------------------------------------------------------
    def _unheard(self, part: Partition) -> set[int]:
        """In-sync followers that have not fetched since this leader's term began."""
        return {r for r in part.isr if r != part.local_id
                and (f := part.followers.get(r)) is not None and f.log_end_offset < 0}

    async def _hurry_followers(self, parts: list[Partition]) -> None:
        """A follower's fetcher parks one fetch at a time here, for up to
        replica.fetch.wait.max.ms; a partition it must now fetch from this leader (or fetch
        again in the new term) joins only its next fetch, and until then the high
        watermark, and with it every acks=all write, waits. So end the parked fetches on the
        partitions led here that those followers replicate, until each has fetched (at most
        FIRST_FETCH_WAIT_S: a follower may be slow to hear of its new leader, or gone)."""
        deadline = time.monotonic() + FIRST_FETCH_WAIT_S
        followers = {r for part in parts for r in self._unheard(part)}
        led = [(key, set(p.replicas) & followers)
               for key, p in self.store.partitions.items()
               if p.is_leader and followers.intersection(p.replicas)]
        while time.monotonic() < deadline:
            waiting = {r for part in parts if part.is_leader for r in self._unheard(part)}
            if not waiting:
                return
            for key, replicas in led:
                if waiting & replicas:
                    self.fetch_purgatory.wake(key)
            await asyncio.sleep(FIRST_FETCH_POLL_S)
