"""The topic decisions of a broker in a ZooKeeper cluster (Kafka's ZK-mode AdminManager):
requests are checked here and written to ZooKeeper; the controller acts on the znodes
(assigns leaders, tells the brokers which partitions to host). As in Kafka, CreateTopics,
DeleteTopics and CreatePartitions are served by the controller only (others answer
NOT_CONTROLLER, and clients send them to the Metadata response's controller), while any
broker may auto-create a topic or change its configs.

Replicas are spread over the live brokers (cluster.assignment); a replication factor above
the number of live brokers is refused with INVALID_REPLICATION_FACTOR. Auto-created topics
take default.replication.factor, __consumer_offsets offsets.topic.replication.factor.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.coordinator.group_metadata_manager import OFFSETS_TOPIC
from kafkactl.broker.partition_store import PartitionStore
from kafkactl.broker.topic_admin import (
    ReplicaAssignment,
    T,
    TopicError,
    TopicState,
    assign,
    check_config_changes,
    check_new_name,
    check_replication_factor,
    has_collision_chars,
    plan_added_partitions,
    plan_new_topic,
    requested_overrides,
    validate_topic_name,
)
from kafkactl.broker.zk_metadata_cache import ZkMetadataCache
from kafkactl.cluster import config_changes, zk_paths
from kafkactl.cluster.controller import KafkaController
from kafkactl.cluster.metadata_store import ConcurrentChangeError, TopicExistsError
from kafkactl.cluster.topic_state import (
    TopicAssignment,
    check_assignment_size,
    check_topic_size,
    min_topic_znode_bytes,
    topic_names,
)
from kafkactl.cluster.zk_metadata_store import ZkMetadataStore
from kafkactl.cluster.zookeeper import WRITE_MAX_BYTES, ZnodeTooLargeError
from kafkactl.log.config_def import validate_topic_config_values
from kafkactl.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kazoo.client import KazooClient

ZK_ANSWER_MIN_S = 10.0
# the admin's methods that only read ZooKeeper: no change can be left pending when
# ZooKeeper does not answer them
READ_ONLY = frozenset({"topic_overrides", "topics_overrides"})
NULL_UUID = uuid.UUID(int=0)
log = logging.getLogger(__name__)


@contextlib.contextmanager
def zookeeper_errors(what: str, code: ErrorCode) -> Iterator[None]:
    """ZooKeeper unreachable or this broker's session lost while doing `what`: a retriable
    Kafka error for the client (`code`), never a dropped connection."""
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    try:
        yield
    except (KazooException, KazooTimeoutError) as e:
        log.warning("%s failed: ZooKeeper %s", what, type(e).__name__)
        raise TopicError(code, f"{what}: ZooKeeper is not reachable from this broker "
                         f"({type(e).__name__}); retry") from None


class ZkTopicAdmin:
    def __init__(self, zk: KazooClient, cache: ZkMetadataCache, store: PartitionStore,
                 controller: KafkaController, *, config: BrokerConfig, broker_id: int) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None  # the broker's, set by `call`
        # the handlers' calls that wait on ZooKeeper; their own threads, so calls stuck on
        # an absent ZooKeeper never hold up the broker's other worker-thread work
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="zk-admin")
        self.zk = zk
        self.metadata = ZkMetadataStore(zk)  # where the decisions are written
        self.cache = cache
        self.store = store
        self.controller = controller
        self.config = config
        self.broker_id = broker_id
        # told of the partitions of deleted topics (the group coordinator: its groups'
        # offsets of them go, Kafka's onPartitionsDeleted), whether this broker hosted them
        # or not: every broker learns of a deletion from the controller's UpdateMetadata
        self.deletion_listeners = cache.removal_listeners
        # topic -> (its id, the partition count CreatePartitions gave it) until this
        # broker's metadata has them all: `settled` waits for them (Kafka's
        # DelayedCreatePartitions), not only for the partitions the topic had before
        self._growing: dict[str, tuple[uuid.UUID | None, int]] = {}
        # held from a new topic's name checks to its znodes' write, so that two creations
        # on this broker (CreateTopics on the two zk-admin threads, auto-creation) never
        # both pass the '.'/'_' collision check
        self._creation = threading.Lock()

    def topic(self, name: str) -> TopicState | None:
        meta = self.cache.topic(name)
        if meta is None:
            return None
        rf = max((len(p.replicas) for p in meta.partitions.values()), default=1)
        return TopicState(name, meta.topic_id, len(meta.partitions),
                          dict(self.store.configs.overrides.get(name, {})), rf)

    # ---- off the event loop --------------------------------------------------------------------
    async def call(self, method: Callable[..., T], *args: Any, timeout_s: float,
                   **kwargs: Any) -> T:
        """On a zk-admin thread (what it changes in the broker is done on the event loop,
        `_on_loop`); REQUEST_TIMED_OUT when ZooKeeper has not answered in time."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        job = loop.run_in_executor(self._executor, functools.partial(method, *args, **kwargs))
        # a healthy ZooKeeper answers in milliseconds: a request's short (or 0, "do not
        # wait for the controller") timeout still gives it ZK_ANSWER_MIN_S
        wait = max(timeout_s, ZK_ANSWER_MIN_S)
        try:
            return await asyncio.wait_for(asyncio.shield(job), wait)
        except TimeoutError:
            what = getattr(method, "__name__", "").lstrip("_")
            outcome = "nothing was changed; retry once it is reachable" \
                if what in READ_ONLY else "the change may still be made"
            # nobody awaits the job any more: its outcome is logged here, once
            job.add_done_callback(functools.partial(_log_late_outcome, what, args))
            raise TopicError(ErrorCode.REQUEST_TIMED_OUT,
                             f"ZooKeeper did not answer within {wait:.0f} s; {outcome}"
                             ) from None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _on_loop(self, fn: Callable[..., object], *args: object) -> None:
        """Run `fn` on the broker's event loop: now when called there, else (a worker
        thread) next on the loop, before the request waiting on this thread resumes."""
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        loop = self._loop
        if loop is None or loop is here or not loop.is_running():
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    # ---- checks ------------------------------------------------------------------------------
    def _require_controller(self, what: str) -> None:
        if not self.controller.active:
            raise TopicError(ErrorCode.NOT_CONTROLLER,
                             f"{what} goes to the controller (broker "
                             f"{self.cache.controller_id()}), not broker {self.broker_id}")

    def _live_brokers(self) -> list[int]:
        return [b.node_id for b in self.cache.brokers()]

    def _check_new_name(self, name: str) -> None:
        """Kafka's AdminZkClient.validateTopicCreate, from ZooKeeper: a valid name; a topic
        that is marked for deletion or exists is TOPIC_ALREADY_EXISTS; then a name that
        collides with an existing topic's ('.' and '_') is INVALID_TOPIC_EXCEPTION. Every
        topic written so far counts (one made a moment ago, or earlier in the same batch,
        that the controller has not announced yet)."""
        validate_topic_name(name)
        found = self.metadata.read_assignment(name)
        if self.cache.topic(name) is not None or found is not None:
            if self.metadata.marked_for_deletion(name):
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                 self._pending_deletion(name, found))
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if has_collision_chars(name):
            check_new_name(name, set(topic_names(self.zk)))

    def _pending_deletion(self, name: str, found: TopicAssignment | None) -> str:
        """Why a topic being deleted is not gone yet (Kafka: "Topic 'T' is marked for
        deletion."): the brokers its replicas wait for."""
        replicas = {b for r in found.partitions.values() for b in r} if found else set()
        waiting = sorted(replicas - set(self._live_brokers()))
        if self.controller.deletions.waits_for_reassignment(name):
            why = "it waits for the reassignment of its partitions to finish"
        elif waiting:
            brokers = ", ".join(map(str, waiting))
            why = f"it waits for broker{'s' if len(waiting) > 1 else ''} {brokers} " \
                  f"(not live) to delete {'their' if len(waiting) > 1 else 'its'} replicas"
        else:
            why = "its replicas are being deleted"
        return f"topic {name!r} is marked for deletion; {why}; create it again once the " \
               "deletion is done"

    def _znode_room(self, name: str, partitions: int, replication_factor: int) -> None:
        """Refuse at once a topic of more partitions than one znode can ever hold (checked
        before the assignment is built)."""
        least = min_topic_znode_bytes(partitions, replication_factor)
        if least > WRITE_MAX_BYTES:
            raise self._too_large(name, partitions, replication_factor, least, "at least ")

    def _check_fits(self, assignment: TopicAssignment,
                    configs: Mapping[str, str] | None = None) -> None:
        """INVALID_PARTITIONS when ZooKeeper would refuse the topic's znodes (`configs`: a
        new topic's, written with it): it drops the connection of a request over its
        jute.maxbuffer, so such a request is never sent."""
        try:
            if configs is None:
                check_assignment_size(assignment)
            else:
                check_topic_size(assignment, dict(configs))
        except ZnodeTooLargeError as e:
            raise self._too_large(assignment.name, len(assignment.partitions),
                                  len(assignment.partitions[0]), e.size, "") from None

    @staticmethod
    def _too_large(name: str, partitions: int, replication_factor: int, size: int,
                   qualifier: str) -> TopicError:
        return TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"topic {name!r} with {partitions:,} partitions of {replication_factor} "
            f"replica{'s' if replication_factor != 1 else ''} does not fit in ZooKeeper: it "
            f"needs {qualifier}{size:,} bytes in one request and ZooKeeper takes at most "
            f"{WRITE_MAX_BYTES:,} (jute.maxbuffer); use fewer partitions or replicas")

    def _log_config_check(self, configs: Mapping[str, str]) -> None:
        """The effective config of a topic with `configs` (its overrides over the broker
        defaults) builds, its values checked across keys too (Kafka's
        LogConfig.validateValues)."""
        try:
            validate_topic_config_values(self.store.configs.log_config_for(configs))
        except ValueError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from e

    def _write_new_topic(self, name: str, partitions: dict[int, list[int]],
                         configs: Mapping[str, str]) -> TopicState:
        from kazoo.exceptions import RolledBackError

        topic_id = uuid.uuid4()
        try:
            self.metadata.create_topic(TopicAssignment(name, partitions, topic_id), configs)
        except TopicExistsError:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {name!r} already exists") from None
        except RolledBackError:
            # the transaction's config write, rolled back because its topic znode write
            # failed: written meanwhile by another broker (creating the same topic, as
            # every broker creates the internal topics on first use), a lost race that
            # Kafka sees as TopicExistsException; anything else is raised as it is
            if not self.zk.exists(zk_paths.topic(name)):
                raise
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {name!r} already exists") from None
        except ZnodeTooLargeError as e:  # checked before anything was sent
            raise self._too_large(name, len(partitions), len(partitions[0]), e.size,
                                  "") from None
        self._on_loop(self.store.set_topic_overrides, name, dict(configs))
        log.info("created topic %s with %d partition(s)%s", name, len(partitions),
                 f" and configs {dict(configs)}" if configs else "")
        rf = len(next(iter(partitions.values())))
        return TopicState(name, topic_id, len(partitions), dict(configs), rf)

    # ---- create ----------------------------------------------------------------------------
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: list[ReplicaAssignment],
                     configs: Sequence[tuple[str, str | None]], *,
                     validate_only: bool = False) -> TopicState:
        self._require_controller("CreateTopics")
        with zookeeper_errors(f"creating topic {name!r}", ErrorCode.NOT_CONTROLLER), \
                self._creation:
            return self._create_topic(name, num_partitions, replication_factor, assignments,
                                      configs, validate_only=validate_only)

    def _create_topic(self, name: str, num_partitions: int, replication_factor: int,
                      assignments: list[ReplicaAssignment],
                      configs: Sequence[tuple[str, str | None]], *,
                      validate_only: bool) -> TopicState:
        # as Kafka, a topic that exists (or is being deleted) is said before anything else
        self._check_new_name(name)
        default_rf = self.config.get_int("default.replication.factor")
        rf = len(assignments[0][1]) if assignments else \
            default_rf if replication_factor == -1 else replication_factor
        partitions = plan_new_topic(
            num_partitions, replication_factor, assignments, live=self._live_brokers(),
            default_partitions=self.config.get_int("num.partitions"),
            default_replication_factor=default_rf,
            check_count=lambda count: self._znode_room(name, count, rf))
        overrides = requested_overrides(configs)
        self._log_config_check(overrides)
        if validate_only:
            self._check_fits(TopicAssignment(name, partitions, uuid.UUID(int=0)), overrides)
            return TopicState(name, uuid.UUID(int=0), len(partitions), overrides,
                              len(next(iter(partitions.values()))))
        return self._write_new_topic(name, partitions, overrides)

    def auto_create(self, name: str, num_partitions: int | None = None,
                    configs: Mapping[str, str] | None = None) -> TopicState:
        """Any broker: written to ZooKeeper unless it exists; the controller makes it."""
        with zookeeper_errors(f"creating topic {name!r}", ErrorCode.LEADER_NOT_AVAILABLE), \
                self._creation:
            return self._auto_create(name, num_partitions, configs)

    def _auto_create(self, name: str, num_partitions: int | None,
                     configs: Mapping[str, str] | None) -> TopicState:
        validate_topic_name(name)
        existing = self.topic(name)
        if existing is not None:
            return existing
        count = self.config.get_int("num.partitions") if num_partitions is None \
            else num_partitions
        found = self.metadata.read_assignment(name)
        if found is not None:  # created, not yet propagated
            return TopicState(name, found.topic_id or uuid.UUID(int=0), len(found.partitions),
                              dict(configs or {}), 1)
        if has_collision_chars(name):  # as CreateTopics (Kafka auto-creates through it)
            names = set(topic_names(self.zk))
            if name in names:  # its znode is being written: made by another request
                return TopicState(name, uuid.UUID(int=0), count, dict(configs or {}), 1)
            check_new_name(name, names)
        key = "offsets.topic.replication.factor" if name == OFFSETS_TOPIC \
            else "transaction.state.log.replication.factor" if name == "__transaction_state" \
            else "default.replication.factor"
        rf = self.config.get_int(key)
        live = self._live_brokers()
        check_replication_factor(rf, live)
        try:
            return self._write_new_topic(name, assign(live, count, rf), dict(configs or {}))
        except TopicError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:  # another broker won the race
                log.debug("topic %s was created by another broker meanwhile", name)
                return TopicState(name, uuid.UUID(int=0), count, dict(configs or {}), 1)
            raise

    # ---- delete / partitions -----------------------------------------------------------------
    def delete_topic(self, name: str) -> TopicState:
        self._require_controller("DeleteTopics")
        state = self.topic(name)
        if state is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        if not self.config.get_bool("delete.topic.enable"):
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        with zookeeper_errors(f"deleting topic {name!r}", ErrorCode.NOT_CONTROLLER):
            self.metadata.mark_for_deletion(name)
        self._on_loop(self._growing.pop, name, None)
        log.info("topic %s marked for deletion", name)
        return state

    def add_partitions(self, name: str, count: int, assignments: list[list[int]], *,
                       validate_only: bool = False) -> None:
        self._require_controller("CreatePartitions")
        with zookeeper_errors(f"adding partitions to {name!r}", ErrorCode.NOT_CONTROLLER):
            self._add_partitions(name, count, assignments, validate_only=validate_only)

    def _add_partitions(self, name: str, count: int, assignments: list[list[int]], *,
                        validate_only: bool) -> None:
        current = self.metadata.read_assignment(name)
        # Kafka's KafkaApis.handleCreatePartitionsRequest, then ZkAdminManager.createPartitions
        if current is not None and self.metadata.marked_for_deletion(name):
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             "The topic is queued for deletion.")
        if current is None or self.cache.topic(name) is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        moving = any(t == name for t, _p in list(self.controller.reassignments))
        if moving or any(current.adding.values()) or any(current.removing.values()):
            # ZooKeeper's reassignment state, and this controller's (it writes that a
            # moment later): the new partitions would copy a replica list being changed
            raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"A partition reassignment is in progress for the topic "
                             f"{name!r}; add partitions once it is done (or cancelled).")
        have, rf = len(current.partitions), len(current.partitions[0])
        added = plan_added_partitions(
            name, current.partitions, count, assignments, live=self._live_brokers(),
            check_count=lambda more: self._znode_room(name, have + more, rf))
        current.partitions.update(added)
        self._check_fits(current)
        if validate_only:
            return
        try:
            self.metadata.set_assignment(current)
        except ConcurrentChangeError:
            raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"topic {name!r} changed meanwhile; retry") from None
        self._on_loop(self._expect_partitions, name, current.topic_id, len(current.partitions))
        log.info("topic %s grows to %d partitions", name, count)

    def _expect_partitions(self, name: str, topic_id: uuid.UUID | None, count: int) -> None:
        """`name` is written with `count` partitions: it is not settled before this
        broker's metadata has them (on the event loop, as `settled` reads it)."""
        _, before = self._growing.get(name, (None, 0))
        self._growing[name] = (topic_id, max(before, count))

    # ---- configs ---------------------------------------------------------------------------
    def set_configs(self, name: str, configs: Mapping[str, str], *,
                    validate_only: bool = False) -> None:
        if self.cache.topic(name) is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        with zookeeper_errors(f"changing the configs of {name!r}", ErrorCode.REQUEST_TIMED_OUT):
            current = self.metadata.read_topic_config(name)
            check_config_changes(current, configs)
            self._log_config_check(configs)
            if validate_only:
                return
            # the config znode and a /config/changes notification: every broker applies it
            zxid = self.metadata.write_topic_config(name, configs)
        self._on_loop(self._apply_here, name, dict(configs), zxid)
        log.info("topic %s configs are now %s", name, dict(configs) or "the broker defaults")

    def _apply_here(self, name: str, configs: dict[str, str], zxid: int) -> None:
        """This broker's logs of the topic take the change at once (the notification
        follows), unless a newer change got here first; a topic not hosted here is read
        from ZooKeeper when it is."""
        newest = self.store.zk_topic_config(name, configs, zxid)
        if newest is not None and name in self.store.configs.overrides and \
                self.store.configs.overrides[name] != newest:
            try:
                self.store.update_topic_config(name, newest)
            except ValueError as e:  # checked when written; the defaults changed since?
                log.warning("topic %s: its new configs do not apply here: %s", name, e)

    def topic_overrides(self, name: str) -> dict[str, str] | None:
        """A topic's overrides as ZooKeeper has them (None: it has no config znode), for
        DescribeConfigs and IncrementalAlterConfigs on any broker, hosting it or not."""
        return self.topics_overrides([name])[name]

    def topics_overrides(self, names: Sequence[str]) -> dict[str, dict[str, str] | None]:
        """`topic_overrides` of several topics, read pipelined (one round trip)."""
        what = f"reading the configs of {names[0]!r}" if len(names) == 1 else \
            f"reading the configs of {len(names)} topics"
        with zookeeper_errors(what, ErrorCode.REQUEST_TIMED_OUT):
            return config_changes.read_entity_configs(self.zk, config_changes.TOPICS,
                                                      names)

    # ---- waiting for the controller ----------------------------------------------------------
    async def settled(self, created: Sequence[str], deleted: Sequence[str],
                      timeout_ms: int) -> dict[str, ErrorCode]:
        """Wait until the created topics (or grown ones: CreatePartitions) have a leader
        for every partition, all the partitions written, and the deleted ones are gone from
        the metadata (Kafka's delayed CreateTopics/DeleteTopics/CreatePartitions); the
        topics not there by the timeout get REQUEST_TIMED_OUT."""
        def pending() -> list[str]:
            out = [n for n in created if not self._ready(n)]
            return out + [n for n in deleted if self.cache.topic(n) is not None]

        await self.cache.wait_until(lambda: not pending(), max(0, timeout_ms) / 1000)
        return {n: ErrorCode.REQUEST_TIMED_OUT for n in pending()}

    def _ready(self, name: str) -> bool:
        meta = self.cache.topic(name)
        if meta is None or not all(p.leader >= 0 for p in meta.partitions.values()):
            return False
        growing = self._growing.get(name)
        if growing is None:
            return True
        topic_id, count = growing
        if NULL_UUID not in (topic_id or NULL_UUID, meta.topic_id) and \
                topic_id != meta.topic_id:  # deleted and made again since
            self._growing.pop(name, None)
            return True
        if len(meta.partitions) < count:
            return False
        self._growing.pop(name, None)
        return True


def _log_late_outcome(what: str, args: tuple[Any, ...], job: asyncio.Future[Any]) -> None:
    """The outcome of a zk-admin job whose request was answered REQUEST_TIMED_OUT, in one
    line (it would otherwise be "Future exception was never retrieved")."""
    if job.cancelled():
        return
    subject = f" of {args[0]!r}" if args and isinstance(args[0], str) else ""
    error = job.exception()
    if error is None:
        log.info("%s%s, answered REQUEST_TIMED_OUT, was done after all", what, subject)
    elif isinstance(error, TopicError):
        log.warning("%s%s, answered REQUEST_TIMED_OUT, failed afterwards: %s (%s)", what,
                    subject, error, error.code.name)
    else:
        log.error("%s%s, answered REQUEST_TIMED_OUT, failed afterwards", what, subject,
                  exc_info=error)
