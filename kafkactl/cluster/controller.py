"""The cluster controller (Kafka's KafkaController in ZooKeeper mode).

Every broker runs one; the one that holds `/controller` is active. It watches the broker
registry, the topics and the deletion requests in ZooKeeper, decides partition leaders
(partition_election.py), writes `/brokers/topics/[t]/partitions/[n]/state`, and tells the
brokers with LeaderAndIsr, UpdateMetadata and StopReplica over the Kafka protocol
(controller_channel.py). Brokers never decide leadership themselves.

Kafka's ControllerEventManager shape: ZooKeeper watches and the session listener only queue
typed events (controller_events.py); one asyncio task takes them in order and alone
changes controller state (`view`, `reassignments`, deletions). ZooKeeper I/O runs in worker
threads that only return values. Every write is a ZooKeeper transaction that checks the
controller epoch's znode version (controller_zk.py), so a deposed controller's late write
fails and it resigns; after each await a handler checks it is still the controller of the
same session (`check_active`). A session expiry queues Expire ahead of everything; a broker
stands for election only once its own registration is in ZooKeeper for the current
session. A failing event is logged and queued again later, without holding up the events
behind it.

Unclean leader election follows each topic's effective unclean.leader.election.enable
(its override, else this broker's dynamic config, else the cluster default, else
server.properties), read from ZooKeeper only for the partitions that need it: no live
in-sync replica, a live out-of-sync one. The broker's /config/changes listener tells the
controller when a topic's or the dynamic broker config's setting may have turned true
(`enable_topic_unclean_leader_election`, `enable_default_unclean_leader_election`), and
it elects the offline partitions concerned at once, as Kafka's controller does.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from kafkactl.cluster import controller_admin, controller_zk, log_dir_events, zk_paths
from kafkactl.cluster import controller_decisions as decisions
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster.broker_connection import PLAINTEXT, InterBrokerSecurity
from kafkactl.cluster.broker_registry import BrokerInfo, live_brokers
from kafkactl.cluster.controller_admin import IsrChange, Reassignment
from kafkactl.cluster.controller_channel import ControllerChannel
from kafkactl.cluster.controller_election import (
    NO_CONTROLLER,
    Election,
    current_controller,
    resign,
    try_elect,
)
from kafkactl.cluster.controller_events import (
    REQUESTS,
    AlterPartition,
    AutoRebalance,
    BrokerChange,
    ControlledShutdown,
    ControllerEvent,
    Elect,
    ElectLeaders,
    EventManager,
    Expire,
    LogDirEventNotification,
    PartitionModification,
    Reassign,
    ReplicasOffline,
    ReplicaStopped,
    RequestEvent,
    TopicChange,
    TopicDeletion,
    TopicUncleanLeaderElectionEnable,
    UncleanLeaderElectionEnable,
    request_event,
)
from kafkactl.cluster.controller_requests import ClusterView
from kafkactl.cluster.controller_sends import BrokerNotices
from kafkactl.cluster.controller_zk import ControllerMovedError
from kafkactl.cluster.topic_deletion import TopicDeletionManager
from kafkactl.cluster.topic_state import NO_LEADER, PartitionState, TopicAssignment
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.controller")

TopicPartition = tuple[str, int]
RETRY_AFTER_ERROR_S = 1.0
UNCLEAN_LOGGED = 10  # partitions named in the warning about an unclean election
T = TypeVar("T")


class NotControllerError(Exception):
    """This broker is not the active controller."""


class Deposed(Exception):
    """This broker stopped being the controller (or lost its session) while a handler
    awaited: the handler's results are dropped."""


class KafkaController(BrokerNotices):
    def __init__(self, zk: KazooClient, broker_id: int, *,
                 inter_broker: InterBrokerSecurity = PLAINTEXT,
                 unclean_leader_election: bool = False,
                 leader_rebalance_interval_s: float | None = None,
                 leader_imbalance_percent: int = 10) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.inter_broker = inter_broker  # how the channel reaches the brokers
        # server.properties' unclean.leader.election.enable: under the dynamic configs and
        # each topic's override, read from ZooKeeper when an election needs them
        self.unclean = unclean_leader_election
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1  # /controller_epoch's version: every write checks it
        self.controller_id = NO_CONTROLLER
        self.view = ClusterView(broker_id, 0)
        self.channel: ControllerChannel | None = None
        self.shutting_down: set[int] = set()
        self.deletions = TopicDeletionManager(self)
        self.reassignments: dict[TopicPartition, Reassignment] = {}
        self.events = EventManager(self._handle, self._failed, self._refuse,
                                   RETRY_AFTER_ERROR_S)
        self._watched_topics: set[str] = set()
        self._watching = False
        # sessions lost so far (kazoo's thread counts them); the count when we became active
        self._sessions_lost = 0
        self._active_session = -1
        self._waiting_registration = False
        self.rebalance_interval_s = leader_rebalance_interval_s
        self.imbalance_percent = leader_imbalance_percent
        self._rebalance_task: asyncio.Task[None] | None = None

    # ---- life cycle --------------------------------------------------------------------------
    async def start(self) -> None:
        """Watch ZooKeeper and take part in the election (ZooKeeper errors propagate: the
        caller retries; a retry after a partial start does not watch twice)."""
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch

        self.events.start(asyncio.get_running_loop())
        if self._rebalance_task is None and self.rebalance_interval_s:
            self._rebalance_task = asyncio.get_running_loop().create_task(
                self._rebalance_timer())

        def on_children(event: ControllerEvent) -> Callable[[list[str]], None]:
            def fn(_children: list[str]) -> None:
                self._enqueue(event)
            return fn

        def on_controller(_data: Any, _stat: Any) -> None:
            self._enqueue(Elect())

        def prepare() -> None:
            for path in (zk_paths.BROKER_IDS, zk_paths.BROKER_TOPICS, zk_paths.DELETE_TOPICS,
                         zk_paths.LOG_DIR_EVENTS):
                self.zk.ensure_path(path)
            if self._watching:
                return
            self._watching = True
            DataWatch(self.zk, zk_paths.CONTROLLER, on_controller)
            ChildrenWatch(self.zk, zk_paths.BROKER_IDS, on_children(BrokerChange()))
            ChildrenWatch(self.zk, zk_paths.BROKER_TOPICS, on_children(TopicChange()))
            ChildrenWatch(self.zk, zk_paths.DELETE_TOPICS, on_children(TopicDeletion()))
            ChildrenWatch(self.zk, zk_paths.LOG_DIR_EVENTS,
                          on_children(LogDirEventNotification()))
            self.zk.add_listener(self._on_session_state)

        await asyncio.to_thread(prepare)

    async def stop(self) -> None:
        """Give up the controller role (another broker takes it at once) and stop; every
        request queued or in hand is answered NOT_CONTROLLER at once."""
        from kazoo.protocol.states import KazooState

        self.events.stop()
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        was_active = self.active
        self._deactivate()
        if was_active and self.zk.state == KazooState.CONNECTED:
            try:
                await asyncio.to_thread(resign, self.zk)
            except Exception as e:  # ZooKeeper away: the session end removes it
                log.warning("could not resign as controller: %s: %s", type(e).__name__, e)

    def _on_session_state(self, state: str) -> None:
        """(kazoo's connection thread; must not block)"""
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST:  # our ephemeral /controller is gone with the session
            self._sessions_lost += 1  # handlers awaiting ZooKeeper see it at once
            self.events.call_soon(lambda: self.events.clear_and_put(Expire()))
        elif state == KazooState.CONNECTED:
            self._enqueue(Elect())

    def _enqueue(self, event: ControllerEvent) -> None:
        self.events.put(event)

    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """(any thread) `topic`'s configs changed, not setting unclean.leader.election.enable
        false: where its effective setting is true, its offline partitions get a leader
        if a replica of theirs is live (Kafka's enableTopicUncleanLeaderElection, for a
        topic setting it true; the active controller alone acts)."""
        if self.active:
            self._enqueue(TopicUncleanLeaderElectionEnable(topic))

    def enable_default_unclean_leader_election(self) -> None:
        """(any thread) this broker's dynamic config (its own or the cluster default)
        changed: if its unclean.leader.election.enable is true (read from ZooKeeper),
        every offline partition that may have a leader now gets one (Kafka's
        enableDefaultUncleanLeaderElection)."""
        if self.active:
            self._enqueue(UncleanLeaderElectionEnable())

    def _refuse(self, event: RequestEvent, why: str = "") -> None:
        if not event.future.done():
            event.future.set_exception(NotControllerError(
                why or f"broker {self.broker_id} is not the controller"))

    def check_active(self) -> None:
        """Raise Deposed unless this broker is still the controller of the session it was
        elected in (called by every handler after each await)."""
        if not self.active or self._sessions_lost != self._active_session:
            raise Deposed(f"broker {self.broker_id} is no longer the controller")

    def _failed(self, event: ControllerEvent, e: Exception) -> bool:
        """A handler raised: a deposed controller resigns; a request is answered (a
        ZooKeeper error as NOT_CONTROLLER). True: queue the event again later."""
        what = f"{type(e).__name__}: {e}".rstrip(": ")
        if isinstance(e, (ControllerMovedError, Deposed)) and self.active:
            log.warning("broker %d resigns as controller: %s", self.broker_id, what)
            self._deactivate()
            self._enqueue(Elect())
        if isinstance(event, REQUESTS):
            log.warning("controller request %s failed (%s)", type(event).__name__, what)
            if isinstance(e, Deposed) or controller_zk.zookeeper_error(e):
                self._refuse(event, f"broker {self.broker_id} cannot act as the controller "
                                    f"({what})")
            elif not event.future.done():
                event.future.set_exception(e)
            return False
        if isinstance(e, Deposed) or isinstance(event, Expire):
            return False
        log.warning("controller event %s failed (%s); retrying in %g s",
                    type(event).__name__, what, RETRY_AFTER_ERROR_S)
        return True

    async def _handle(self, event: ControllerEvent) -> None:  # noqa: C901 - one case a kind
        match event:
            case Elect():
                await self._elect()
            case Expire():
                if self.active:
                    log.warning("broker %d lost its ZooKeeper session: no longer the "
                                "controller", self.broker_id)
                self._deactivate()
            case BrokerChange() if not self.active:
                # our own registration may be what we waited for before standing
                if self.controller_id == NO_CONTROLLER or self._waiting_registration:
                    await self._elect()
            case _ if not self.active:
                if isinstance(event, REQUESTS):
                    self._refuse(event)
            case BrokerChange():
                await self._on_broker_change()
            case TopicChange():
                await self._on_topic_change()
            case PartitionModification(topic=topic):
                await self._on_partition_change(topic)
            case UncleanLeaderElectionEnable():
                if await asyncio.to_thread(controller_zk.broker_unclean_election_enabled,
                                           self.zk, self.broker_id, self.unclean):
                    self.check_active()
                    await self._on_unclean_enabled(None)
            case TopicUncleanLeaderElectionEnable(topic=topic):
                await self._on_unclean_enabled(topic)
            case TopicDeletion():
                await self.deletions.on_requests()
            case ReplicaStopped(topic=topic, broker_id=broker_id, response=response):
                await self.deletions.on_replica_stopped(topic, broker_id, response)
            case LogDirEventNotification():
                await self._on_log_dir_events()
            case ReplicasOffline(broker_id=broker_id, broker_epoch=epoch, partitions=parts):
                await self._on_replicas_offline(broker_id, epoch, parts)
            case ControlledShutdown(broker_id=broker_id, future=future):
                _answer(future, await self._controlled_shutdown(broker_id))
            case AlterPartition(broker_id=broker_id, changes=changes, future=future):
                _answer(future, await self._alter_partition(broker_id, changes))
                self._resume_deletions()
            case ElectLeaders(partitions=partitions, election_type=election, future=future):
                _answer(future, await controller_admin.elect_leaders(self, partitions, election))
            case Reassign(targets=targets, future=future):
                _answer(future, await controller_admin.reassign(self, targets))
                self._resume_deletions()
            case AutoRebalance():
                imbalanced = controller_admin.imbalanced_partitions(self, self.imbalance_percent)
                if imbalanced:
                    log.info("leadership is imbalanced: moving %d partition(s) back to their "
                             "preferred leader", len(imbalanced))
                    await controller_admin.elect_preferred(self, imbalanced)

    # ---- election ----------------------------------------------------------------------------
    def _stand(self) -> tuple[bool, Election]:
        """(worker thread) (registered, election): a broker stands only once its own
        registration belongs to the current session (Kafka registers the broker before
        it may win: a controller without itself among the live brokers would see every
        replica dead)."""
        stat = self.zk.exists(zk_paths.broker(self.broker_id))
        session = self.zk.client_id
        if stat is None or session is None or stat.ephemeralOwner != session[0]:
            holder, _ours = current_controller(self.zk)
            return False, Election(False, holder, 0)
        return True, try_elect(self.zk, self.broker_id)

    async def _elect(self) -> None:
        session = self._sessions_lost
        registered, result = await asyncio.to_thread(self._stand)
        self.controller_id = result.controller_id
        if not registered:
            if not self._waiting_registration:
                log.info("broker %d waits for its own registration before standing for "
                         "controller", self.broker_id)
            self._waiting_registration = True
            if self.active:
                self._deactivate()
            return
        self._waiting_registration = False
        if result.won and self.active and session == self._active_session:
            return  # still ours: the epoch we won with stays (a write finds out if it moved)
        if result.won:
            if session != self._sessions_lost:  # the session went while we stood
                self._enqueue(Elect())
                return
            self.epoch, self.epoch_zk_version = result.epoch, result.epoch_zk_version
            self._active_session = session
            log.info("broker %d won the controller election (epoch %d)", self.broker_id,
                     self.epoch)
            try:
                await self._become_active()
            except BaseException:  # half loaded: the retried Elect starts over (a full
                self._deactivate()  # UpdateMetadata to every broker included)
                raise
        elif not result.won and self.active:
            log.info("broker %d is no longer the controller (broker %d is)", self.broker_id,
                     result.controller_id)
            self._deactivate()

    def _deactivate(self) -> None:
        self.active = False
        self.epoch_zk_version = -1
        if self.channel is not None:
            channel, self.channel = self.channel, None
            for b in channel.brokers():
                channel.remove_broker(b)
        self.deletions.clear()
        self.shutting_down.clear()
        self.reassignments.clear()

    async def _become_active(self) -> None:
        """Load the cluster's state (pipelined reads), then act as Kafka's controller does
        on fail-over: offline partitions get a leader from their ISR, replicas on brokers
        that are not live leave the ISRs, and every broker hears the result."""
        began = time.monotonic()
        self.active = True
        self.channel = ControllerChannel(self.broker_id, self.inter_broker)
        self.view = ClusterView(self.broker_id, self.epoch)
        self.deletions.clear()
        self.shutting_down.clear()
        self.reassignments.clear()
        brokers, names = await asyncio.to_thread(self._read_brokers_and_topics)
        self.check_active()
        view = self.view
        view.brokers = brokers
        for info in brokers.values():
            self.channel.add_broker(info.broker_id,
                                    *info.endpoint(self.inter_broker.listener))
        await self._add_topics(names, announce=False)
        loaded = time.monotonic()
        log.info("broker %d loaded the cluster state in %.0f ms: %d live broker(s), %d "
                 "topic(s), %d partition(s)", self.broker_id, (loaded - began) * 1000,
                 len(view.brokers), len(view.assignments), len(view.states))
        offline = {r for state in view.states.values() for r in state.isr} - set(view.brokers)
        changed = await self._on_brokers_changed(offline)
        log.info("broker %d is the controller (epoch %d): %d live broker(s), %d topic(s); "
                 "%d partition(s) changed leader or ISR in %.0f ms (brokers %s offline)",
                 self.broker_id, self.epoch, len(view.brokers), len(view.assignments),
                 len(changed), (time.monotonic() - loaded) * 1000, sorted(offline))
        self.send_update_metadata(full_to=set(view.brokers))
        for b in view.brokers:
            self._send_leader_and_isr(b, view.partitions_of(b), full=True)
        self._enqueue(TopicDeletion())
        self._enqueue(LogDirEventNotification())  # those a deposed controller left

    def _read_brokers_and_topics(self) -> tuple[dict[int, BrokerInfo], list[str]]:
        """(worker thread) The live brokers and the topics' names."""
        return live_brokers(self.zk), zk_topics.topic_names(self.zk)

    # ---- brokers -----------------------------------------------------------------------------
    async def _on_broker_change(self) -> None:
        live = await asyncio.to_thread(live_brokers, self.zk)
        self.check_active()
        old = self.view.brokers
        dead = {b for b, info in old.items() if b not in live or live[b].epoch != info.epoch}
        new = {b for b, info in live.items() if b not in old or old[b].epoch != info.epoch}
        if not dead and not new:
            return
        self.view.brokers = live
        assert self.channel is not None
        for b in dead - set(live):
            self.channel.remove_broker(b)
        for b in new:
            self.channel.add_broker(b, *live[b].endpoint(self.inter_broker.listener))
        self.shutting_down -= dead
        for b in dead | new:  # a broker's offline log dirs are its own life's
            self.view.offline_replicas.pop(b, None)
        if dead:
            log.info("brokers %s left the cluster", sorted(dead))
        if new:
            log.info("brokers %s joined the cluster", sorted(new))
        began = time.monotonic()
        changed = await self._on_brokers_changed(dead)
        if changed:
            log.info("%d partition(s) changed leader or ISR in %.0f ms", len(changed),
                     (time.monotonic() - began) * 1000)
        self.send_update_metadata(changed | self.view.partitions_on(dead | new), full_to=new)
        for b in live:
            hosted = self.view.partitions_of(b) if b in new else \
                [tp for tp in changed if b in self.view.assignments[tp[0]][tp[1]]]
            self._send_leader_and_isr(b, hosted, full=b in new)
        self.deletions.resume_for(new)

    async def _on_log_dir_events(self) -> None:
        """Brokers took log dirs offline while they ran: each is sent a LeaderAndIsr for
        every replica it has, whose KAFKA_STORAGE_ERROR answers name the replicas offline
        now (ReplicasOffline moves their leadership), and the notifications are deleted
        (Kafka's onBrokerLogDirFailure)."""
        events = await asyncio.to_thread(log_dir_events.read, self.zk)
        self.check_active()
        brokers = sorted({e.broker_id for e in events if e.broker_id is not None}
                         & set(self.view.brokers))
        if brokers:
            log.warning("broker(s) %s took a log dir offline: asking which of their replicas "
                        "they still host", brokers)
        for b in brokers:
            self._send_leader_and_isr(b, self.view.partitions_of(b))
        await asyncio.to_thread(log_dir_events.delete, self.zk, self.epoch_zk_version,
                                events)

    async def _on_replicas_offline(self, broker_id: int, broker_epoch: int,
                                   partitions: frozenset[TopicPartition]) -> None:
        """A broker cannot host these replicas: a log dir of theirs is offline there
        (KIP-112). They count as offline until the broker registers again (a restart):
        other in-sync replicas take over what it led, and it leaves their ISRs."""
        view = self.view
        if view.broker_epoch(broker_id) != broker_epoch:
            return  # answered by an earlier life of the broker: its next start is asked anew
        known = view.offline_replicas.setdefault(broker_id, set())
        fresh = {tp for tp in partitions if tp not in known
                 and broker_id in view.assignments.get(tp[0], {}).get(tp[1], ())}
        if not fresh:
            return
        known |= fresh
        changed = await self._decide(lambda unclean: decisions.offline_replica_states(
            view, broker_id, fresh, self.epoch, unclean=unclean,
            shutting_down=self.shutting_down))
        self._warn_unclean(changed)
        await self.write_states(changed, create=False)
        log.warning("broker %d has %d replica(s) in an offline log dir (%s%s): %d partition(s) "
                    "changed leader or ISR", broker_id, len(fresh),
                    ", ".join(f"{t}-{p}" for t, p in sorted(fresh)[:5]),
                    ", ..." if len(fresh) > 5 else "", len(changed))
        self.announce(set(changed), is_new=False, metadata=fresh)

    def adding_replicas(self) -> dict[TopicPartition, list[int]]:
        return {tp: r.adding for tp, r in self.reassignments.items()}

    async def _on_brokers_changed(self, dead: set[int]) -> set[TopicPartition]:
        settings: dict[str, bool] = {}  # the topics' unclean settings, read once
        changed = await self._decide(lambda unclean: decisions.broker_change_states(
            self.view, dead, self.epoch, unclean=unclean, shutting_down=self.shutting_down),
            settings)
        self._warn_unclean(changed)
        await self.write_states(changed, create=False)
        started = await self._start_partitions(self._all_partitions(), settings)
        return set(changed) | started

    # ---- unclean leader election -----------------------------------------------------------
    async def _decide(self, decide: Callable[[decisions.Unclean], T],
                      settings: dict[str, bool] | None = None) -> T:
        """Run a decision with each topic's effective unclean.leader.election.enable: it
        runs once answering False for the topics it asks about whose setting is not known
        yet (only partitions with no live in-sync replica and a live out-of-sync one ask),
        their settings are read from ZooKeeper in one round trip (kept in `settings` for
        the handler's next decision), and it runs again only when one of them is true."""
        known = {} if settings is None else settings
        asked: set[str] = set()

        def first(topic: str) -> bool:
            if topic not in known:
                asked.add(topic)
            return known.get(topic, False)
        result = decide(first)
        if not asked:
            return result
        known.update(await asyncio.to_thread(controller_zk.unclean_election_enabled, self.zk,
                                             asked, self.broker_id, self.unclean))
        self.check_active()
        if not any(known[t] for t in asked):
            return result
        return decide(lambda topic: known.get(topic, False))

    def _warn_unclean(self, states: dict[TopicPartition, PartitionState]) -> None:
        """Name the partitions about to be led by a replica that was not in their ISR."""
        unclean = [(tp, new.leader, old.isr) for tp, new in sorted(states.items())
                   if (old := self.view.states.get(tp)) is not None
                   and new.leader != NO_LEADER and new.leader not in old.isr]
        if unclean:
            log.warning("unclean leader election: %d partition(s) led by a replica that was "
                        "not in sync (records only the others had are lost): %s%s",
                        len(unclean), ", ".join(f"{t}-{p} by {leader} (ISR {isr})"
                                                for (t, p), leader, isr
                                                in unclean[:UNCLEAN_LOGGED]),
                        ", ..." if len(unclean) > UNCLEAN_LOGGED else "")

    async def _on_unclean_enabled(self, topic: str | None) -> None:
        """unclean.leader.election.enable may have turned true for `topic` (None: in the
        dynamic broker config): elect the offline partitions concerned (Kafka's
        triggerOnlinePartitionStateChange), not those of topics being deleted."""
        if topic is not None and topic not in self.view.assignments:
            return
        partitions = [tp for tp in (self._all_partitions() if topic is None else
                                    [(topic, p) for p in self.view.assignments[topic]])
                      if tp[0] not in self.deletions]
        started = await self._start_partitions(partitions)
        if started:
            log.info("unclean.leader.election.enable is true %s: %d offline partition(s) "
                     "got a leader", "by default" if topic is None else f"for topic {topic}",
                     len(started))
            self.announce(started, is_new=False)

    # ---- topics ------------------------------------------------------------------------------
    def _all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, parts in self.view.assignments.items() for p in parts]

    async def _on_topic_change(self) -> None:
        names = await asyncio.to_thread(zk_topics.topic_names, self.zk)
        self.check_active()
        present = set(names)
        for gone in [t for t in self.view.assignments if t not in present]:
            self.forget_topic(gone)
        new = [n for n in names if n not in self.view.assignments and n not in self.deletions]
        if new:
            await self._add_topics(new, announce=True)
        elif self.view.deleted:
            self.send_update_metadata()

    async def _add_topics(self, names: list[str], *, announce: bool) -> None:
        assignments, states = await asyncio.to_thread(controller_zk.read_topics, self.zk, names)
        self.check_active()
        added = self.apply_topics(assignments, states)
        for assignment in assignments.values():
            if assignment.topic_id is None:
                await self._store_topic_id(assignment)
        if announce and added:
            started = await self._start_partitions(added)
            self.announce(started, is_new=True, metadata=added)
        await self._watch_topics(names)

    def apply_topics(self, assignments: dict[str, TopicAssignment],
                     states: dict[TopicPartition, PartitionState]) -> list[TopicPartition]:
        """Take in topics read from ZooKeeper (a reassignment an earlier controller began
        is resumed); returns their partitions."""
        out: list[TopicPartition] = []
        for name, assignment in assignments.items():
            self.view.assignments[name] = dict(assignment.partitions)
            self.view.topic_ids[name] = assignment.topic_id or uuid.uuid4()
            controller_admin.resume(self, assignment)
            out.extend((name, p) for p in assignment.partitions)
        for tp, state in states.items():
            if tp[0] in assignments:
                self.view.states[tp] = state
        return out

    async def _store_topic_id(self, assignment: TopicAssignment) -> None:
        """A topic created without an id (an old tool) gets the one chosen for it."""
        from kazoo.exceptions import KazooException

        assignment.topic_id = self.view.topic_ids[assignment.name]
        try:
            await asyncio.to_thread(controller_zk.set_assignment, self.zk,
                                    self.epoch_zk_version, assignment)
        except KazooException as e:
            log.warning("could not store a topic id for %s: %s: %s", assignment.name,
                        type(e).__name__, e)
        self.check_active()

    async def _watch_topics(self, names: list[str]) -> None:
        """Watch the topic znodes for added partitions (a watch's first call queues a
        check of the topic, so a change before it was set is not missed)."""
        from kazoo.recipe.watchers import DataWatch

        todo = [n for n in names if n not in self._watched_topics and n in self.view.assignments]
        if not todo:
            return
        self._watched_topics.update(todo)

        def watch() -> None:
            for name in todo:
                DataWatch(self.zk, zk_paths.topic(name), self._topic_watch(name))
        try:
            await asyncio.to_thread(watch)
        except BaseException:
            self._watched_topics.difference_update(todo)
            raise

    def _topic_watch(self, topic: str) -> Callable[[Any, Any], bool]:
        """A DataWatch function for one topic znode. Exactly two parameters: kazoo passes
        its WatchedEvent as a third one when the function takes it (a `topic=name` default
        there would receive the event, not the name)."""
        def on_change(data: Any, _stat: Any) -> bool:
            if data is None:
                self.events.call_soon(lambda: self._watched_topics.discard(topic))
                return False
            self._enqueue(PartitionModification(topic))
            return True
        return on_change

    async def _start_partitions(self, partitions: Iterable[TopicPartition],
                                settings: dict[str, bool] | None = None
                                ) -> set[TopicPartition]:
        parts = list(partitions)  # decided twice when a topic's unclean setting is on
        created, elected = await self._decide(lambda unclean: decisions.start_states(
            self.view, parts, self.epoch, unclean=unclean, shutting_down=self.shutting_down),
            settings)
        self._warn_unclean(elected)
        await self.write_states(created, create=True)
        await self.write_states(elected, create=False)
        return set(created) | set(elected)

    async def write_states(self, states: dict[TopicPartition, PartitionState], *,
                           create: bool) -> None:
        """Write partition states (fenced by the controller epoch, pipelined) and take in
        what ZooKeeper holds afterwards: the state written or, when a conditional write
        lost a race, the one read back (the next event decides)."""
        if not states:
            return
        self.check_active()
        written = await asyncio.to_thread(controller_zk.write_states, self.zk,
                                          self.epoch_zk_version, states, create=create)
        self.check_active()
        for tp, state in written.items():
            if state is not None and tp[0] in self.view.assignments:
                self.view.states[tp] = state

    async def _on_partition_change(self, topic: str) -> None:
        if topic in self.deletions or topic not in self.view.assignments:
            return
        assignment = await asyncio.to_thread(zk_topics.read_assignment, self.zk, topic)
        self.check_active()
        if assignment is None or topic not in self.view.assignments:
            return
        known = self.view.assignments[topic]
        added = [(topic, p) for p in assignment.partitions if p not in known]
        if not added:
            return
        known.update({p: r for p, r in assignment.partitions.items() if p not in known})
        started = await self._start_partitions(added)
        log.info("topic %s now has %d partitions", topic, len(known))
        self.announce(started, is_new=True, metadata=added)

    def _resume_deletions(self) -> None:
        """A reassignment may have completed: the deletions that waited for it start
        (Kafka's resumeDeletionForTopics), as an event of their own (retried on failure)."""
        if self.deletions.resumable():
            self._enqueue(TopicDeletion())

    def forget_topic(self, name: str) -> None:
        self.view.remove_topic(name)  # the next UpdateMetadata announces it deleted
        for tp in [tp for tp in self.reassignments if tp[0] == name]:
            del self.reassignments[tp]  # no move of a topic that is gone

    # ---- controlled shutdown -----------------------------------------------------------------
    async def controlled_shutdown(self, broker_id: int) -> list[TopicPartition]:
        """Move leadership away from a stopping broker; returns the replicated partitions
        it still leads (the broker retries while there are some)."""
        result: list[TopicPartition] = await self.request("controlled_shutdown", (broker_id,))
        return result

    async def _controlled_shutdown(self, broker_id: int) -> list[TopicPartition]:
        if broker_id not in self.view.brokers:
            raise NotControllerError(f"broker {broker_id} is not a live broker")
        self.shutting_down.add(broker_id)
        moves, remaining = controller_admin.shutdown_moves(self, broker_id)
        await self.write_states(moves, create=False)
        self.announce(set(moves), is_new=False)
        log.info("controlled shutdown of broker %d: moved %d leader(s), %d remain",
                 broker_id, len(moves), len(remaining))
        return sorted(remaining)

    # ---- ISR changes asked by leaders (AlterPartition) -----------------------------------------
    async def alter_partition(self, broker_id: int, changes: list[IsrChange]
                              ) -> list[tuple[IsrChange, ErrorCode, PartitionState | None]]:
        """Check and write the ISR changes a leader asks for; each answered with the
        resulting state (or the error)."""
        result: list[tuple[IsrChange, ErrorCode, PartitionState | None]] = \
            await self.request("alter_partition", (broker_id, changes))
        return result

    async def _alter_partition(self, broker_id: int, changes: list[IsrChange]
                               ) -> list[tuple[IsrChange, ErrorCode, PartitionState | None]]:
        writes, results = controller_admin.isr_changes(self, broker_id, changes)
        await self.write_states(writes, create=False)
        for change in changes:
            tp = (change.topic, change.partition)
            if tp not in writes:
                continue
            now = self.view.states.get(tp)
            if now is not None and now.isr == change.isr:
                results.append((change, ErrorCode.NONE, now))
            else:  # lost a race with another writer: the leader proposes again
                results.append((change, ErrorCode.INVALID_UPDATE_VERSION, None))
        if writes:
            log.info("ISR changes: %s", ", ".join(
                f"{t}-{p} {self.view.states[(t, p)].isr}" for t, p in writes
                if (t, p) in self.view.states))
            self.send_update_metadata(writes)
        for tp in writes:
            if tp in self.reassignments:
                await controller_admin.maybe_complete_reassignment(self, tp)
        return results

    # ---- preferred leaders and reassignments (controller_admin) -------------------------------
    async def request(self, kind: str, args: tuple[Any, ...]) -> Any:
        """Run a request (controlled_shutdown, alter_partition, elect_leaders, reassign)
        on the event task; its answer, or NotControllerError."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not self.events.running or not self.active:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        event = request_event(kind, args, future)
        self._enqueue(event)
        return await future

    async def _rebalance_timer(self) -> None:
        assert self.rebalance_interval_s
        while True:
            await asyncio.sleep(self.rebalance_interval_s)
            if self.active:
                self._enqueue(AutoRebalance())


def _answer(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)
