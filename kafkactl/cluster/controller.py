"""The cluster controller (Kafka's KafkaController in ZooKeeper mode).

Every broker runs one; the one that holds `/controller` is active. It watches the broker
registry, the topics and the deletion requests in ZooKeeper, decides partition leaders
(partition_election.py), writes `/brokers/topics/[t]/partitions/[n]/state` with its epoch
and conditional versions, and tells the brokers with LeaderAndIsr, UpdateMetadata and
StopReplica over the Kafka protocol (controller_channel.py). Brokers never decide
leadership themselves.

ZooKeeper watches fire on kazoo's thread; they only queue an event. One asyncio task takes
the events in order (as Kafka's single controller event thread does) and runs the blocking
ZooKeeper work in a worker thread, so the broker's event loop keeps serving clients.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafkactl.cluster import controller_admin, zk_paths
from kafkactl.cluster import controller_requests as requests
from kafkactl.cluster import topic_state as zk_topics
from kafkactl.cluster.broker_connection import PLAINTEXT, InterBrokerSecurity
from kafkactl.cluster.broker_registry import BrokerInfo, live_brokers
from kafkactl.cluster.controller_admin import IsrChange, Reassignment
from kafkactl.cluster.controller_channel import ControllerChannel
from kafkactl.cluster.controller_election import NO_CONTROLLER, resign, try_elect
from kafkactl.cluster.controller_requests import ClusterView
from kafkactl.cluster.partition_election import (
    elect_leader,
    new_partition_state,
    remove_replicas,
)
from kafkactl.cluster.topic_deletion import TopicDeletionManager
from kafkactl.cluster.topic_state import PartitionState
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kazoo.client import KazooClient

log = logging.getLogger("kafkactl.controller")

TopicPartition = tuple[str, int]
RETRY_AFTER_ERROR_S = 1.0


class NotControllerError(Exception):
    """This broker is not the active controller."""



class KafkaController:
    def __init__(self, zk: KazooClient, broker_id: int, *,
                 inter_broker: InterBrokerSecurity = PLAINTEXT,
                 unclean_leader_election: bool = False,
                 leader_rebalance_interval_s: float | None = None,
                 leader_imbalance_percent: int = 10) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.inter_broker = inter_broker  # how the channel reaches the brokers
        self.unclean = unclean_leader_election
        self.active = False
        self.epoch = 0
        self.controller_id = NO_CONTROLLER
        self.view = ClusterView(broker_id, 0)
        self.channel: ControllerChannel | None = None
        self.shutting_down: set[int] = set()
        self.deletions = TopicDeletionManager(self)
        self._events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._pending: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._watched_topics: set[str] = set()
        self._watching = False
        self.reassignments: dict[TopicPartition, Reassignment] = {}
        self.rebalance_interval_s = leader_rebalance_interval_s
        self.imbalance_percent = leader_imbalance_percent
        self._rebalance_task: asyncio.Task[None] | None = None
        # what brokers and operators ask for: run on the event task, answered by a future
        self._requests: dict[str, Callable[..., Awaitable[Any]]] = {
            "controlled_shutdown": self._controlled_shutdown,
            "alter_partition": self._alter_partition,
            "elect_leaders": functools.partial(controller_admin.elect_preferred, self),
            "reassign": functools.partial(controller_admin.reassign, self),
        }

    # ---- life cycle --------------------------------------------------------------------------
    async def start(self) -> None:
        """Watch ZooKeeper and take part in the election (ZooKeeper errors propagate: the
        caller retries; a retry after a partial start does not watch twice)."""
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch

        self._loop = asyncio.get_running_loop()
        if self._task is None:
            self._task = self._loop.create_task(self._process())
        if self._rebalance_task is None and self.rebalance_interval_s:
            self._rebalance_task = self._loop.create_task(self._rebalance_timer())

        def on_children(kind: str) -> Any:
            def fn(_children: list[str]) -> None:
                self._enqueue(kind)
            return fn

        def on_controller(_data: Any, _stat: Any) -> None:
            self._enqueue("elect")

        def prepare() -> None:
            for path in (zk_paths.BROKER_IDS, zk_paths.BROKER_TOPICS, zk_paths.DELETE_TOPICS):
                self.zk.ensure_path(path)
            if self._watching:
                return
            self._watching = True
            DataWatch(self.zk, zk_paths.CONTROLLER, on_controller)
            ChildrenWatch(self.zk, zk_paths.BROKER_IDS, on_children("brokers"))
            ChildrenWatch(self.zk, zk_paths.BROKER_TOPICS, on_children("topics"))
            ChildrenWatch(self.zk, zk_paths.DELETE_TOPICS, on_children("deletions"))
            self.zk.add_listener(self._on_session_state)

        await asyncio.to_thread(prepare)

    async def stop(self) -> None:
        """Give up the controller role (another broker takes it at once) and stop."""
        from kazoo.protocol.states import KazooState

        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
        was_active = self.active
        self._deactivate()
        if was_active and self.zk.state == KazooState.CONNECTED:
            try:
                await asyncio.to_thread(resign, self.zk)
            except Exception as e:  # ZooKeeper away: the session end removes it
                log.warning("could not resign as controller: %s", e)

    def _on_session_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST:  # our ephemeral /controller is gone with the session
            self._call_soon(self._deactivate)
        elif state == KazooState.CONNECTED:
            self._enqueue("elect")

    def _call_soon(self, fn: Any) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(fn)

    def _enqueue(self, kind: str, arg: Any = None) -> None:
        """Queue an event (from any thread); a plain event already queued is not repeated."""
        def put() -> None:
            if arg is None:
                if kind in self._pending:
                    return
                self._pending.add(kind)
            self._events.put_nowait((kind, arg))
        if self._loop is None or self._loop.is_closed():
            return
        try:
            if asyncio.get_running_loop() is self._loop:
                put()
                return
        except RuntimeError:
            pass
        self._loop.call_soon_threadsafe(put)

    async def _process(self) -> None:
        while True:
            kind, arg = await self._events.get()
            if arg is None:
                self._pending.discard(kind)
            try:
                await self._handle(kind, arg)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                future = arg[1] if kind in self._requests else None
                if isinstance(future, asyncio.Future):
                    if not future.done():
                        future.set_exception(e)
                    log.warning("controller request %s failed: %s: %s", kind,
                                type(e).__name__, e)
                    continue
                log.warning("controller event %s failed (%s: %s); retrying", kind,
                            type(e).__name__, e)
                await asyncio.sleep(RETRY_AFTER_ERROR_S)
                self._enqueue(kind, arg)

    async def _handle(self, kind: str, arg: Any) -> None:
        if kind == "elect":
            await self._elect()
            return
        if not self.active:
            future = arg[1] if kind in self._requests else None
            if isinstance(future, asyncio.Future) and not future.done():
                future.set_exception(NotControllerError(
                    f"broker {self.broker_id} is not the controller"))
            return
        if kind == "brokers":
            await self._on_broker_change()
        elif kind == "topics":
            await self._on_topic_change()
        elif kind == "partitions":
            await self._on_partition_change(arg)
        elif kind == "deletions":
            await self.deletions.on_requests()
        elif kind == "stopped":
            await self.deletions.on_replica_stopped(*arg)
        elif kind in self._requests:
            args, future = arg
            result = await self._requests[kind](*args)
            if not future.done():
                future.set_result(result)
        elif kind == "auto_rebalance":
            imbalanced = controller_admin.imbalanced_partitions(self, self.imbalance_percent)
            if imbalanced:
                log.info("leadership is imbalanced: moving %d partition(s) back to their "
                         "preferred leader", len(imbalanced))
                await controller_admin.elect_preferred(self, imbalanced)

    # ---- election ----------------------------------------------------------------------------
    async def _elect(self) -> None:
        result = await asyncio.to_thread(try_elect, self.zk, self.broker_id,
                                         self.epoch if self.active else 0)
        self.controller_id = result.controller_id
        if result.won and not (self.active and result.epoch == self.epoch):
            self.epoch = result.epoch
            log.info("broker %d won the controller election (epoch %d)", self.broker_id,
                     self.epoch)
            await self._become_active()
        elif not result.won and self.active:
            log.info("broker %d is no longer the controller (broker %d is)", self.broker_id,
                     result.controller_id)
            self._deactivate()

    def _deactivate(self) -> None:
        self.active = False
        if self.channel is not None:
            channel, self.channel = self.channel, None
            asyncio.ensure_future(channel.close(), loop=self._loop)
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
        view = ClusterView(self.broker_id, self.epoch)
        view.brokers, names = await asyncio.to_thread(self._read_brokers_and_topics)
        self.view = view
        for info in view.brokers.values():
            self.channel.add_broker(info.broker_id,
                                    *info.endpoint(self.inter_broker.listener))
        await asyncio.to_thread(self._load_topics, names)
        loaded = time.monotonic()
        log.info("broker %d loaded the cluster state in %.0f ms: %d live broker(s), %d "
                 "topic(s), %d partition(s)", self.broker_id, (loaded - began) * 1000,
                 len(view.brokers), len(view.assignments), len(view.states))
        offline = {r for state in view.states.values() for r in state.isr} - set(view.brokers)
        changed = await asyncio.to_thread(self._on_brokers_changed, offline)
        log.info("broker %d is the controller (epoch %d): %d live broker(s), %d topic(s); "
                 "%d partition(s) changed leader or ISR in %.0f ms (brokers %s offline)",
                 self.broker_id, self.epoch, len(view.brokers), len(view.assignments),
                 len(changed), (time.monotonic() - loaded) * 1000, sorted(offline))
        self.send_update_metadata()
        for b in view.brokers:
            self._send_leader_and_isr(b, view.partitions_of(b), full=True)
        await asyncio.to_thread(self._watch_topics, names)
        self._enqueue("deletions")

    def _read_brokers_and_topics(self) -> tuple[dict[int, BrokerInfo], list[str]]:
        """(worker thread) The live brokers and the topics' names."""
        return live_brokers(self.zk), zk_topics.topic_names(self.zk)

    # ---- brokers -----------------------------------------------------------------------------
    async def _on_broker_change(self) -> None:
        live = await asyncio.to_thread(live_brokers, self.zk)
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
        if dead:
            log.info("brokers %s left the cluster", sorted(dead))
        if new:
            log.info("brokers %s joined the cluster", sorted(new))
        began = time.monotonic()
        changed = await asyncio.to_thread(self._on_brokers_changed, dead)
        if changed:
            log.info("%d partition(s) changed leader or ISR in %.0f ms", len(changed),
                     (time.monotonic() - began) * 1000)
        self.send_update_metadata()
        for b in live:
            hosted = self.view.partitions_of(b) if b in new else \
                [tp for tp in changed if b in self.view.assignments[tp[0]][tp[1]]]
            self._send_leader_and_isr(b, hosted, full=b in new)
        self.deletions.resume_for(new)

    def _on_brokers_changed(self, dead: set[int]) -> set[TopicPartition]:
        """(worker thread) New states for the partitions the change affects: replicas that
        died leave, offline partitions with an eligible live replica get a leader."""
        live = set(self.view.brokers)
        changed: dict[TopicPartition, PartitionState] = {}
        for tp, state in self.view.states.items():
            replicas = self.view.assignments[tp[0]][tp[1]]
            new = None
            if state.leader in dead or state.leader not in live:
                new = elect_leader(replicas, state, live, self.epoch, unclean=self.unclean,
                                   exclude=self.shutting_down)
            if new is None and set(state.isr) & dead:
                new = remove_replicas(state, dead, self.epoch)
            if new is not None:
                changed[tp] = new
        self.write_states(changed, create=False)
        started = self._start_partitions(self._all_partitions())
        return set(changed) | started

    # ---- topics ------------------------------------------------------------------------------
    def _all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, parts in self.view.assignments.items() for p in parts]

    async def _on_topic_change(self) -> None:
        names = await asyncio.to_thread(zk_topics.topic_names, self.zk)
        present = set(names)
        for gone in [t for t in self.view.assignments if t not in present]:
            self.forget_topic(gone)
        new = [n for n in names if n not in self.view.assignments and n not in self.deletions]
        if new:
            await self._add_topics(new, announce=True)
        elif len(present) != len(self.view.assignments):
            self.send_update_metadata()

    async def _add_topics(self, names: Iterable[str], *, announce: bool) -> None:
        names = list(names)
        added = await asyncio.to_thread(self._load_topics, names)
        if announce and added:
            started = await asyncio.to_thread(self._start_partitions, added)
            self.announce(started, is_new=True)
        await asyncio.to_thread(self._watch_topics, names)

    def _load_topics(self, names: list[str]) -> list[TopicPartition]:
        """(worker thread) Assignments (a missing topic id is created and written back) and
        the partition states that exist, each kind read pipelined; returns the partitions
        read."""
        assignments = zk_topics.read_assignments(self.zk, names)
        out: list[TopicPartition] = []
        for name in names:
            assignment = assignments[name]
            if assignment is None:
                continue
            if assignment.topic_id is None:
                assignment.topic_id = uuid.uuid4()
                try:
                    zk_topics.set_assignment(self.zk, assignment)
                except Exception as e:
                    log.warning("could not store a topic id for %s: %s", name, e)
            self.view.assignments[name] = assignment.partitions
            self.view.topic_ids[name] = assignment.topic_id
            controller_admin.resume(self, assignment)
            out.extend((name, p) for p in assignment.partitions)
        for tp, state in zk_topics.read_partition_states(self.zk, out).items():
            if state is not None:
                self.view.states[tp] = state
        return out

    def _watch_topics(self, names: list[str]) -> None:
        """(worker thread) Watch the topic znodes for added partitions (a watch's first call
        queues a check of the topic, so a change before it was set is not missed)."""
        from kazoo.recipe.watchers import DataWatch

        for name in names:
            if name in self._watched_topics or name not in self.view.assignments:
                continue
            self._watched_topics.add(name)
            DataWatch(self.zk, zk_paths.topic(name), self._topic_watch(name))

    def _topic_watch(self, topic: str) -> Callable[[Any, Any], bool]:
        """A DataWatch function for one topic znode. Exactly two parameters: kazoo passes
        its WatchedEvent as a third one when the function takes it (a `topic=name` default
        there would receive the event, not the name)."""
        def on_change(data: Any, _stat: Any) -> bool:
            if data is None:
                self._watched_topics.discard(topic)
                return False
            self._enqueue("partitions", topic)
            return True
        return on_change

    def _start_partitions(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """(worker thread) Give a first state to partitions that have none and a live
        replica, and a leader to offline ones that have an eligible live replica."""
        live = set(self.view.brokers) - self.shutting_down
        created: dict[TopicPartition, PartitionState] = {}
        elected: dict[TopicPartition, PartitionState] = {}
        for tp in partitions:
            replicas = self.view.assignments.get(tp[0], {}).get(tp[1])
            if replicas is None:
                continue
            state = self.view.states.get(tp)
            if state is None:
                first = new_partition_state(replicas, live, self.epoch)
                if first is not None:
                    created[tp] = first
            elif state.leader not in live:
                new = elect_leader(replicas, state, live, self.epoch, unclean=self.unclean)
                if new is not None:
                    elected[tp] = new
        self.write_states(created, create=True)
        self.write_states(elected, create=False)
        return set(created) | set(elected)

    def write_states(self, states: dict[TopicPartition, PartitionState], *,
                      create: bool) -> None:
        """(worker thread) Write partition states, pipelined; a conditional update that
        lost a race re-reads the znode and keeps what it holds (the next event decides)."""
        from kazoo.exceptions import BadVersionError, NodeExistsError

        pending = []
        for (topic, p), state in states.items():
            path = zk_paths.partition_state(topic, p)
            if create:
                op = self.zk.create_async(path, state.to_json(), makepath=True)
            else:
                op = self.zk.set_async(path, state.to_json(), version=state.zk_version)
            pending.append(((topic, p), state, op))
        for tp, state, op in pending:
            try:
                result = op.get(timeout=30)
                state.zk_version = 0 if create else result.version
                self.view.states[tp] = state
            except (BadVersionError, NodeExistsError):
                found = zk_topics.read_partition_state(self.zk, *tp)
                if found is not None:
                    self.view.states[tp] = found

    async def _on_partition_change(self, topic: str) -> None:
        if topic in self.deletions or topic not in self.view.assignments:
            return
        assignment = await asyncio.to_thread(zk_topics.read_assignment, self.zk, topic)
        if assignment is None:
            return
        known = self.view.assignments[topic]
        added = [(topic, p) for p in assignment.partitions if p not in known]
        if not added:
            return
        known.update({p: r for p, r in assignment.partitions.items() if p not in known})
        started = await asyncio.to_thread(self._start_partitions, added)
        log.info("topic %s now has %d partitions", topic, len(known))
        self.announce(started, is_new=True)

    def forget_topic(self, name: str) -> None:
        parts = self.view.assignments.pop(name, {})
        self.view.topic_ids.pop(name, None)
        for p in parts:
            self.view.states.pop((name, p), None)

    # ---- deletion (topic_deletion.py) ------------------------------------------------------
    def send_stop_replica(self, broker_id: int, name: str, parts: dict[int, list[int]], *,
                           deleting_topic: bool = True) -> None:
        """StopReplica with deletion of `broker_id`'s replicas among `parts`; for a topic
        being deleted its answer counts towards finishing the deletion."""
        if self.channel is None:
            return
        mine = [p for p, reps in parts.items() if broker_id in reps]
        body = requests.stop_replica(self.view, broker_id, {name: mine}, delete=True)
        self.channel.send(broker_id, ApiKey.STOP_REPLICA, requests.STOP_REPLICA_VERSION, body,
                          (lambda resp: self._enqueue("stopped", (name, broker_id, resp)))
                          if deleting_topic else self._checker("StopReplica", broker_id))

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
        await asyncio.to_thread(self.write_states, moves, create=False)
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
        if writes:
            await asyncio.to_thread(self.write_states, writes, create=False)
        for change in changes:
            tp = (change.topic, change.partition)
            if tp not in writes:
                continue
            now = self.view.states[tp]
            if now.isr == change.isr:
                results.append((change, ErrorCode.NONE, now))
            else:  # lost a race with another writer: the leader proposes again
                results.append((change, ErrorCode.INVALID_UPDATE_VERSION, None))
        if writes:
            log.info("ISR changes: %s", ", ".join(
                f"{t}-{p} {self.view.states[(t, p)].isr}" for t, p in writes))
            self.send_update_metadata()
        for tp in writes:
            if tp in self.reassignments:
                await controller_admin.maybe_complete_reassignment(self, tp)
        return results

    # ---- preferred leaders and reassignments (controller_admin) -------------------------------
    async def request(self, kind: str, args: tuple[Any, ...]) -> Any:
        """Run a request (controlled_shutdown, alter_partition, elect_leaders, reassign)
        on the event task; its answer, or NotControllerError."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._enqueue(kind, (args, future))
        return await future

    async def _rebalance_timer(self) -> None:
        assert self.rebalance_interval_s
        while True:
            await asyncio.sleep(self.rebalance_interval_s)
            if self.active:
                self._enqueue("auto_rebalance")

    # ---- telling the brokers -----------------------------------------------------------------
    def announce(self, partitions: set[TopicPartition], *, is_new: bool) -> None:
        self.send_update_metadata()
        for b in self.view.brokers:
            parts = [tp for tp in partitions if b in self.view.assignments[tp[0]][tp[1]]]
            self._send_leader_and_isr(b, parts, is_new=is_new)

    def send_update_metadata(self) -> None:
        if self.channel is None:
            return
        for b in self.view.brokers:
            self.channel.send(b, ApiKey.UPDATE_METADATA, requests.UPDATE_METADATA_VERSION,
                              requests.update_metadata(self.view, b),
                              self._checker("UpdateMetadata", b))

    def _send_leader_and_isr(self, broker_id: int, partitions: Iterable[TopicPartition], *,
                             is_new: bool = False, full: bool = False) -> None:
        if self.channel is None:
            return
        body = requests.leader_and_isr(self.view, broker_id, partitions, is_new=is_new,
                                       full=full)
        if body is not None:
            self.channel.send(broker_id, ApiKey.LEADER_AND_ISR,
                              requests.LEADER_AND_ISR_VERSION, body,
                              self._checker("LeaderAndIsr", broker_id))

    @staticmethod
    def _checker(what: str, broker_id: int) -> Callable[[dict[str, Any]], None]:
        def check(response: dict[str, Any]) -> None:
            code = response.get("error_code", 0)
            failed = [e for t in response.get("topics", [])
                      for e in t.get("partition_errors", []) if e["error_code"]]
            if code or failed:
                name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else code
                log.warning("broker %d answered %s with %s%s", broker_id, what, name,
                            f" ({len(failed)} partition error(s))" if failed else "")
        return check
