"""The controller of a cluster of one: a standalone broker, the only replica and the leader
of every partition.

It decides as every controller does (kafkactl.broker.topic_admin's plans over the live
brokers, here this broker alone; the partition state Kafka's first election gives the
only replica, `replica_state.leader_state`), writes its decisions to the data dir's metadata store
(kafkactl.cluster.metadata_store.LocalMetadataStore, topic-metadata.json), and acts on them
through the one partition lifecycle a cluster's LeaderAndIsr and StopReplica take
(kafkactl.broker.replica_state), in process. What only a cluster of one has is here: every
assignment names this broker, the new partitions must fit in its open-files limit, and a
large CreateTopics or DeleteTopics (over INLINE_PARTITIONS) is decided durably at once and
its partitions made or deleted in the background while the broker answers other requests;
the answer waits for it (`settled`). A topic enters the metadata when whole and leaves it
at once when deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.metadata_cache import (
    DeletionListener,
    StandaloneMetadataCache,
    tell_deleted,
)
from kafkactl.broker.open_files import check_open_file_room
from kafkactl.broker.partition_store import PartitionStore
from kafkactl.broker.replica_state import ReplicaStates, leader_state
from kafkactl.broker.topic_admin import (
    ReplicaAssignment,
    T,
    TopicError,
    TopicState,
    check_config_changes,
    check_new_name,
    plan_added_partitions,
    plan_new_topic,
    requested_overrides,
    validate_topic_name,
)
from kafkactl.cluster.metadata_store import LocalMetadataStore, TopicExistsError
from kafkactl.cluster.topic_state import TopicAssignment
from kafkactl.log.config import LogConfig
from kafkactl.log.config_def import validate_topic_config_values
from kafkactl.log.errors import LogDirOfflineError, LogError
from kafkactl.log.log_dir_failure import describe_os_error
from kafkactl.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

METADATA_FILE = "topic-metadata.json"
# A CreateTopics of more partitions than this makes them in the background (files on a
# worker thread, CREATE_CHUNK at a time; Partition objects on the event loop in slices of at
# most CREATE_SLICE_S), answering other requests meanwhile; smaller topics are made before
# the answer, in one go.
INLINE_PARTITIONS = 100
CREATE_SLICE_S = 0.005
CREATE_CHUNK = 32  # logs made per worker-thread call


def _storage_error(what: str, e: OSError | LogError) -> TopicError:
    """KAFKA_STORAGE_ERROR for a change a full or failing disk undid (and said in the log)."""
    log.error("%s: %s", what, e)
    reason = e.strerror if isinstance(e, OSError) and e.strerror else e
    return TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {reason}")


class StandaloneTopicAdmin:
    """TopicAdmin of a cluster of one (see the module docstring)."""

    def __init__(self, store: PartitionStore, cache: StandaloneMetadataCache,
                 metadata: LocalMetadataStore, *, config: BrokerConfig, broker_id: int,
                 default_partitions: int, delete_enabled: bool = True) -> None:
        self.store = store
        self.cache = cache
        self.metadata = metadata
        metadata.broker_id = broker_id
        self.config = config
        self.broker_id = broker_id
        self.default_partitions = default_partitions
        self.delete_enabled = delete_enabled
        # the one partition lifecycle (set by the server once the replica manager exists)
        self.replicas: ReplicaStates | None = None
        self._creating: dict[str, asyncio.Task[ErrorCode]] = {}
        # CreatePartitions made in the background: the task, and how many it adds
        self._growing: dict[str, tuple[asyncio.Task[ErrorCode], int]] = {}
        self._stopping: set[str] = set()  # creations and growths to stop at their next step
        self._deleting: dict[str, asyncio.Task[None]] = {}
        self._stopping_all = False  # shutdown
        # told of each deleted topic's partitions once it has left the metadata (the group
        # coordinator: its groups' offsets of them go, as a cluster's UpdateMetadata does)
        self.deletion_listeners: list[DeletionListener] = []

    async def call(self, method: Callable[..., T], *args: Any, timeout_s: float,
                   **kwargs: Any) -> T:
        """On the event loop (no ZooKeeper; large work goes on in the background)."""
        return method(*args, **kwargs)

    def topic(self, name: str) -> TopicState | None:
        assignment = self.metadata.topics.get(name)
        if assignment is None:
            return None
        assert assignment.topic_id is not None
        return TopicState(name, assignment.topic_id, len(assignment.partitions),
                          self.metadata.read_topic_config(name))

    # ---- the one lifecycle ----------------------------------------------------------------------
    def _host(self, name: str, p: int, *, is_new: bool = True) -> None:
        """The controller's decision for partition p, acted on as a cluster's LeaderAndIsr
        is: this broker, the only replica, leads it. Raises OSError or LogError (nothing
        of it hosted): LogDirOfflineError for a partition that existed (not `is_new`)
        whose log may be in an offline log dir."""
        assert self.replicas is not None, "the server attaches the replica states first"
        self.replicas.host(name, p, {**leader_state(self.broker_id), "is_new": is_new})

    def _undo_host(self, name: str, p: int) -> None:
        """Undo a `_host` that a disk error interrupted, ignoring further errors."""
        if self.replicas is not None:
            with contextlib.suppress(OSError):
                self.replicas.stop(name, p, delete=False)
        self.store.discard_partition(name, p)

    # ---- startup ---------------------------------------------------------------------------
    def load(self) -> None:
        """Host every partition: persisted topics plus logs found on disk."""
        deleting = self.metadata.deleting
        offline_dirs = self.store.log_manager.offline
        for name in sorted(deleting):  # deletions a crash interrupted: finish them
            if name not in self.metadata.topics:
                n = self.store.delete_stray_logs(name)
                log.info("finished deleting topic %s (%d partition dir(s) left by an "
                         "interrupted deletion)", name, n)
        if not offline_dirs:  # else an offline dir may hold more: the next start deletes
            deleting.clear()
        # Logs on disk that the metadata file does not know (older data dir): adopt them.
        for topic, partition in self.store.logs_on_disk():
            self.metadata.adopt(topic, partition + 1)
        for name, assignment in self.metadata.topics.items():
            self.store.set_topic_overrides(name, self.metadata.read_topic_config(name))
            offline: list[int] = []
            for p in range(len(assignment.partitions)):
                try:
                    self._host(name, p, is_new=False)
                except LogDirOfflineError:
                    offline.append(p)
                except (OSError, LogError) as e:  # e.g. a file where its dir should be
                    why = (f"{e.filename}: {describe_os_error(e)}" if isinstance(e, OSError)
                           and e.filename else describe_os_error(e))
                    log.error("cannot host %s-%d: %s; it is offline until this is repaired "
                              "and the broker restarted", name, p, why)
                    self.store.offline.add((name, p))
                    offline.append(p)
            assert assignment.topic_id is not None
            self.cache.put_topic(name, assignment.topic_id, len(assignment.partitions),
                                 offline=offline)
        if self.store.offline:
            log.warning("%d partition(s) are offline: their logs may be in the offline log "
                        "dir(s) %s (KAFKA_STORAGE_ERROR until a restart with them repaired)",
                        len(self.store.offline), ", ".join(map(str, offline_dirs)))
        self.metadata.write()

    # ---- create ----------------------------------------------------------------------------
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: list[ReplicaAssignment],
                     configs: Sequence[tuple[str, str | None]], *,
                     validate_only: bool = False) -> TopicState:
        partitions = plan_new_topic(
            num_partitions, replication_factor, assignments, live=[self.broker_id],
            default_partitions=self.config.get_int("num.partitions"),
            default_replication_factor=self.config.get_int("default.replication.factor"),
            check_count=self._check_open_file_room)
        overrides = requested_overrides(configs)
        return self._create(name, len(partitions), overrides, validate_only=validate_only)

    def auto_create(self, name: str, num_partitions: int | None = None,
                    configs: Mapping[str, str] | None = None) -> TopicState:
        """Idempotent, as Kafka's auto-creation: a topic another request made (or is
        making) meanwhile is no error, it is returned; the caller answers with it, or with
        LEADER_NOT_AVAILABLE while it is not served yet. Two Metadata requests that both
        found the topic missing before either created it (requests of different
        connections are handled concurrently) both succeed this way; Kafka answers the
        second creator LEADER_NOT_AVAILABLE, never TOPIC_ALREADY_EXISTS. A topic still being
        deleted is LEADER_NOT_AVAILABLE too (retriable: it can be made once that is done),
        as Kafka maps its TopicExistsException."""
        existing = self.topic(name)
        if existing is not None:  # made, or being made (_creating), by another request
            return existing
        partitions = self.default_partitions if num_partitions is None else num_partitions
        try:
            return self._create(name, partitions, dict(configs or {}))
        except TopicError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                raise TopicError(ErrorCode.LEADER_NOT_AVAILABLE, str(e)) from None
            raise

    def _create(self, name: str, num_partitions: int, configs: dict[str, str], *,
                validate_only: bool = False) -> TopicState:
        # as Kafka's AdminZkClient.validateTopicCreate: a valid name, not being deleted,
        # not existing, then not colliding with another topic's
        validate_topic_name(name)
        if name in self._deleting:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {name!r} is being deleted; retry once that is done")
        if name in self.metadata.deleting:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {name!r} is marked for deletion; retry after a restart")
        check_new_name(name, self.metadata.topics)
        if num_partitions < 1:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             "the number of partitions must be at least 1")
        config = self._log_config(configs)
        self._check_open_file_room(num_partitions)
        assignment = TopicAssignment(name, {p: [self.broker_id] for p in range(num_partitions)},
                                     uuid.uuid4())
        state = TopicState(name, assignment.topic_id or uuid.uuid4(), num_partitions, configs)
        if validate_only:  # nothing made: no topic id (Kafka answers the zero UUID)
            return TopicState(name, uuid.UUID(int=0), num_partitions, configs)
        # Decided durably first: a restart makes whatever partition is missing.
        try:
            self.metadata.create_topic(assignment, configs)
        except TopicExistsError:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {name!r} already exists") from None
        except OSError as e:
            raise _storage_error(f"cannot create topic {name!r}", e) from None
        self.store.set_topic_overrides(name, configs)
        if num_partitions > INLINE_PARTITIONS and self._loop() is not None:
            task = asyncio.get_running_loop().create_task(self._make_partitions(state, config))
            self._creating[name] = task
            return state
        try:
            for p in range(num_partitions):
                self._host(name, p)
        except (OSError, LogError) as e:
            raise self._undo_creation(state, e) from None
        self._announce(state)
        return state

    def _check_open_file_room(self, count: int) -> None:
        """`count` more partitions fit in the open-files limit, with the creations under
        way, which open their files later, counted as open already."""
        check_open_file_room(count + self._opening_later())

    def _opening_later(self) -> int:
        """Partitions the creations and growths under way have yet to open."""
        return sum(len(self.metadata.topics[n].partitions) for n in self._creating
                   if n in self.metadata.topics) + sum(n for _t, n in self._growing.values())

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop | None:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return None

    def _undo_creation(self, state: TopicState, e: OSError | LogError) -> TopicError:
        """A full or failing disk: undo the partitions made so far, so the topic is either
        whole or absent (a retry can create it once space is freed)."""
        name = state.name
        self.metadata.remove_topic(name)
        for p in range(state.num_partitions):
            self._undo_host(name, p)
        self.store.forget_topic(name)
        return _storage_error(f"cannot create topic {name!r}", e)

    def _announce(self, state: TopicState) -> None:
        self.cache.put_topic(state.name, state.topic_id, state.num_partitions)
        log.info("created topic %s with %d partition(s)%s", state.name, state.num_partitions,
                 f" and configs {state.configs}" if state.configs else "")

    # ---- creation in slices (large topics) ---------------------------------------------------
    async def _host_in_slices(self, name: str, partitions: range, config: LogConfig) -> bool:
        """Make and host `partitions`: their files on a worker thread (a slow mkdir or
        open on a busy disk blocks it, not the event loop), CREATE_CHUNK at a time; each
        partition's step of the lifecycle on the event loop in slices of at most
        CREATE_SLICE_S. False when told to stop (`_stopping`) between two steps; raises
        OSError or LogError."""
        deadline = time.monotonic() + CREATE_SLICE_S
        for first in range(partitions.start, partitions.stop, CREATE_CHUNK):
            chunk = range(first, min(first + CREATE_CHUNK, partitions.stop))
            await asyncio.to_thread(self.store.prepare_logs, name, chunk, config)
            for p in chunk:
                if name in self._stopping:
                    return False
                self._host(name, p)
                if time.monotonic() >= deadline:
                    await asyncio.sleep(0)
                    deadline = time.monotonic() + CREATE_SLICE_S
        return True

    async def _make_partitions(self, state: TopicState, config: LogConfig) -> ErrorCode:
        name = state.name
        try:
            if not await self._host_in_slices(name, range(state.num_partitions), config):
                return self._stopped(name)
        except (OSError, LogError) as e:
            if name in self._stopping:
                return self._stopped(name)
            self._undo_creation(state, e)
            return ErrorCode.KAFKA_STORAGE_ERROR
        finally:
            self._creating.pop(name, None)
            self._stopping.discard(name)
        self._announce(state)
        # thousands of long-lived objects: out of the cyclic GC's sight, as at start-up
        # (KafkaServer.startup), so full collections stay short
        gc.freeze()
        return ErrorCode.NONE

    def _stopped(self, name: str) -> ErrorCode:
        """A creation told to stop, between two steps. Shutdown: the next start makes the
        rest. Deletion: delete_topic removed what was hosted; the logs made but not hosted
        yet go too, and only then is the deletion finished (its durable mark cleared)."""
        if name in self.metadata.topics:
            return ErrorCode.REQUEST_TIMED_OUT
        try:
            self.store.delete_stray_logs(name)
        except OSError as e:
            log.error("cannot delete the logs of %s: %s; the next start deletes them",
                      name, e.strerror or e)
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with contextlib.suppress(OSError):
            self.metadata.finish_deletion(name)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def creating(self, name: str) -> bool:
        """Whether `name`'s partitions are being made (it is not in the metadata yet)."""
        return name in self._creating

    async def stop_background_work(self) -> None:
        """Stop making and deleting partitions (shutdown), once each worker-thread step
        in progress has finished: the next start finishes both."""
        tasks = [*self._creating.values(), *self._deleting.values(),
                 *(t for t, _n in self._growing.values())]
        self._stopping.update(self._creating)
        self._stopping.update(self._growing)
        self._stopping_all = True
        await asyncio.gather(*tasks, return_exceptions=True)

    def _log_config(self, configs: Mapping[str, str]) -> LogConfig:
        """The effective config of a topic with `configs` (its overrides over the broker
        defaults), its values checked across keys too (Kafka's LogConfig.validateValues)."""
        try:
            config = self.store.configs.log_config_for(configs)
            validate_topic_config_values(config)
        except ValueError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from e
        return config

    # ---- delete / partitions ---------------------------------------------------------------
    def delete_topic(self, name: str) -> TopicState:
        state = self.topic(name)
        if state is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        if not self.delete_enabled:
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        assert self.replicas is not None
        creating = name in self._creating or name in self._growing
        if creating:  # it stops at its next step and deletes the logs it made meanwhile
            self._stopping.add(name)
        # Decided first, durably: a crash from here on finishes the deletion at the next
        # start (load) instead of adopting the remaining dirs as a topic again.
        try:
            self.metadata.mark_for_deletion(name)
        except OSError as e:
            self._stopping.discard(name)
            raise _storage_error(f"cannot delete topic {name!r}", e) from None
        self.cache.remove_topic(name)
        tell_deleted(self.deletion_listeners, [(name, p) for p in range(state.num_partitions)])
        if state.num_partitions > INLINE_PARTITIONS and self._loop() is not None:
            task = asyncio.get_running_loop().create_task(
                self._remove_partitions(name, state.num_partitions, finish=not creating))
            self._deleting[name] = task
            return state
        failed = self._offline_dirs_may_hold(name)
        for p in range(state.num_partitions):
            try:
                self.replicas.stop(name, p, delete=True)
            except OSError as e:
                failed = True
                log.error("cannot delete the log dir of %s-%d: %s; the next start "
                          "deletes it", name, p, e.strerror or e)
        self.store.forget_topic(name)
        if not failed and not creating:
            self.metadata.finish_deletion(name)
        log.info("deleted topic %s", name)
        return state

    def _offline_dirs_may_hold(self, name: str) -> bool:
        """Whether an offline log dir may hold logs of `name`: its deletion then stays
        pending (marked in the metadata) until a start with every dir online finishes it."""
        offline = self.store.log_manager.offline
        if offline:
            log.warning("topic %s: the offline log dir(s) %s may hold some of its partitions; "
                        "they are deleted at the first start with every log dir online",
                        name, ", ".join(map(str, offline)))
        return bool(offline)

    async def _remove_partitions(self, name: str, count: int, *, finish: bool) -> None:
        """A large deletion: stop hosting each chunk of partitions (event loop), delete
        their logs (close, rename, fsync: a worker thread). Shutdown stops it between
        chunks; the next start finishes it (the topic is marked as being deleted)."""
        assert self.replicas is not None
        failed = self._offline_dirs_may_hold(name)
        try:
            for first in range(0, count, CREATE_CHUNK):
                if self._stopping_all:
                    return
                chunk = range(first, min(first + CREATE_CHUNK, count))
                self.replicas.unhost(name, chunk)
                for p, e in await asyncio.to_thread(self.store.delete_logs, name, chunk):
                    failed = True
                    log.error("cannot delete the log dir of %s-%d: %s; the next start "
                              "deletes it", name, p, e.strerror or e)
            self.store.forget_topic(name)
            if not failed and finish:
                with contextlib.suppress(OSError):
                    self.metadata.finish_deletion(name)
            log.info("deleted topic %s", name)
        finally:
            self._deleting.pop(name, None)

    def add_partitions(self, name: str, count: int, assignments: list[list[int]], *,
                       validate_only: bool = False) -> None:
        """Grow `name` to `count` partitions. More than INLINE_PARTITIONS new ones are made
        in the background as a large creation's are (`settled` waits for them): the count
        is decided durably first (a restart makes what is missing) and clients see the
        new partitions once all are hosted."""
        current = self.metadata.topics.get(name)
        if current is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        old = len(current.partitions)
        if name in self._creating or name in self._growing:
            raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"topic {name!r} is still being made ({old} partitions); "
                             "retry once that is done")
        added = plan_added_partitions(name, current.partitions, count, assignments,
                                      live=[self.broker_id],
                                      check_count=self._check_open_file_room)
        if validate_only:
            return
        config = self.store.configs.log_config_for(self.metadata.read_topic_config(name))
        grown = TopicAssignment(name, {**current.partitions, **added}, current.topic_id)
        try:
            self.metadata.set_assignment(grown)
        except OSError as e:
            raise _storage_error(f"cannot add partitions to topic {name!r}", e) from None
        if count - old > INLINE_PARTITIONS and self._loop() is not None:
            task = asyncio.get_running_loop().create_task(self._grow(name, old, count, config))
            self._growing[name] = (task, count - old)
            return
        try:
            for p in range(old, count):
                self._host(name, p)
        except (OSError, LogError) as e:
            raise self._undo_growth(name, old, count, e) from None
        self._grown(name, count)

    async def _grow(self, name: str, old: int, count: int, config: LogConfig) -> ErrorCode:
        try:
            if not await self._host_in_slices(name, range(old, count), config):
                return self._stopped(name)
        except (OSError, LogError) as e:
            if name in self._stopping:
                return self._stopped(name)
            self._undo_growth(name, old, count, e)
            return ErrorCode.KAFKA_STORAGE_ERROR
        finally:
            self._growing.pop(name, None)
            self._stopping.discard(name)
        self._grown(name, count)
        gc.freeze()  # as after a large creation
        return ErrorCode.NONE

    def _grown(self, name: str, count: int) -> None:
        topic_id = self.metadata.topics[name].topic_id
        assert topic_id is not None
        self.cache.put_topic(name, topic_id, count, offline=[
            p for t, p in self.store.offline if t == name])
        log.info("topic %s now has %d partitions", name, count)

    def _undo_growth(self, name: str, old: int, count: int, e: OSError | LogError
                     ) -> TopicError:
        """A full or failing disk: drop the partitions added so far, back to `old`."""
        for p in range(old, count):
            self._undo_host(name, p)
        current = self.metadata.topics.get(name)
        if current is not None:
            with contextlib.suppress(OSError):
                self.metadata.set_assignment(TopicAssignment(
                    name, {p: r for p, r in current.partitions.items() if p < old},
                    current.topic_id))
        return _storage_error(f"cannot add partitions to topic {name!r}", e)

    async def settled(self, created: Sequence[str], deleted: Sequence[str],
                      timeout_ms: int) -> dict[str, ErrorCode]:
        """Wait for the topics made or deleted in the background (the others were before
        the answer): REQUEST_TIMED_OUT for those not finished by the timeout (the work goes
        on), KAFKA_STORAGE_ERROR for a creation a disk error undid."""
        tasks: dict[str, asyncio.Task[Any]] = {
            n: t for n in created if (t := self._creating.get(n)) is not None}
        tasks.update((n, g[0]) for n in created if (g := self._growing.get(n)) is not None)
        tasks.update((n, d) for n in deleted if (d := self._deleting.get(n)) is not None)
        if not tasks:
            return {}
        await asyncio.wait(tasks.values(), timeout=max(0, timeout_ms) / 1000)
        late: dict[str, ErrorCode] = {}
        for name, task in tasks.items():
            if not task.done():
                late[name] = ErrorCode.REQUEST_TIMED_OUT
            elif task.cancelled():
                late[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif task.result() not in (None, ErrorCode.NONE):
                late[name] = task.result()
        return late

    # ---- configs ---------------------------------------------------------------------------
    def set_configs(self, name: str, configs: Mapping[str, str], *,
                    validate_only: bool = False) -> None:
        if name not in self.metadata.topics:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        check_config_changes(self.metadata.read_topic_config(name), configs)
        self._log_config(configs)
        if validate_only:
            return
        try:
            self.metadata.write_topic_config(name, configs)
        except OSError as e:
            raise _storage_error(f"cannot change the configs of topic {name!r}", e) from None
        self.store.update_topic_config(name, configs)
        log.info("topic %s configs are now %s", name, configs or "the broker defaults")
