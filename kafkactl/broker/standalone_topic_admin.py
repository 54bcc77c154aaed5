"""The topic decisions of a one-broker cluster: this broker is the controller, the only
replica and the leader (epoch 0) of every partition.

The topic list (ids, partition counts, config overrides) is persisted in
`<first log dir>/topic-metadata.json` (written to a temp file, fsynced, renamed), so topics
and their overrides survive restarts; partition data lives in the LogManager's
`<topic>-<partition>` directories, hosted through the PartitionStore. Only what a single
broker adds to the common checks is here: the replication factor must be 1, every
assignment must name this broker, and the new partitions must fit in its open-files limit.

A large CreateTopics or DeleteTopics (over INLINE_PARTITIONS) is decided durably at once
and its partitions made or deleted in the background, while the broker answers other
requests; the answer waits for it (`settled`). A topic enters the metadata when whole and
leaves it at once when deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.metadata_cache import StandaloneMetadataCache
from kafkactl.broker.open_files import check_open_file_room
from kafkactl.broker.partition_store import PartitionStore
from kafkactl.broker.topic_admin import (
    NO_NUM_PARTITIONS,
    NO_REPLICATION_FACTOR,
    ReplicaAssignment,
    T,
    TopicError,
    TopicState,
    check_assignments,
    check_config_changes,
    requested_overrides,
    validate_topic_name,
)
from kafkactl.log.config import LogConfig
from kafkactl.log.errors import LogError
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


class TopicMetadataFile:
    """topic-metadata.json: the topics, and those whose deletion is decided (persisted)
    but whose log dirs may remain."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.topics: dict[str, TopicState] = {}
        self.deleting: set[str] = set()

    def read(self) -> None:
        """Read the persisted topic list (before the LogManager opens logs); RuntimeError
        says what to do with an unreadable file."""
        if not self.path.exists():
            return
        try:
            doc = json.loads(self.path.read_text())
            saved = doc.get("topics", {})
            self.deleting = {str(n) for n in doc.get("deleting", [])}
            for name, info in saved.items():
                self.topics[name] = TopicState(name, uuid.UUID(info["topic_id"]),
                                               int(info["partitions"]),
                                               dict(info.get("configs", {})))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"{self.path} is unreadable ({e}); move it away "
                               "to rebuild the topic list from the log directories") from e

    def write(self) -> None:
        data: dict[str, Any] = {"version": 1, "topics": {
            s.name: {"topic_id": str(s.topic_id), "partitions": s.num_partitions,
                     "configs": s.configs} for s in self.topics.values()}}
        if self.deleting:
            data["deleting"] = sorted(self.deleting)
        tmp = self.path.with_suffix(".json.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        with contextlib.suppress(OSError):
            fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


class StandaloneTopicAdmin:
    """TopicAdmin of a one-broker cluster (see the module docstring)."""

    def __init__(self, store: PartitionStore, cache: StandaloneMetadataCache,
                 metadata: TopicMetadataFile, *, config: BrokerConfig, broker_id: int,
                 default_partitions: int, delete_enabled: bool = True) -> None:
        self.store = store
        self.cache = cache
        self.metadata = metadata
        self.config = config
        self.broker_id = broker_id
        self.default_partitions = default_partitions
        self.delete_enabled = delete_enabled
        self._creating: dict[str, asyncio.Task[ErrorCode]] = {}
        # CreatePartitions made in the background: the task, and how many it adds
        self._growing: dict[str, tuple[asyncio.Task[ErrorCode], int]] = {}
        self._stopping: set[str] = set()  # creations and growths to stop at their next step
        self._deleting: dict[str, asyncio.Task[None]] = {}
        self._stopping_all = False  # shutdown

    async def call(self, method: Callable[..., T], *args: Any, timeout_s: float,
                   **kwargs: Any) -> T:
        """On the event loop (no ZooKeeper; large work goes on in the background)."""
        return method(*args, **kwargs)

    @property
    def topics(self) -> dict[str, TopicState]:
        return self.metadata.topics

    def topic(self, name: str) -> TopicState | None:
        return self.metadata.topics.get(name)

    # ---- startup ---------------------------------------------------------------------------
    def load(self) -> None:
        """Host every partition: persisted topics plus logs found on disk."""
        topics, deleting = self.metadata.topics, self.metadata.deleting
        for name in sorted(deleting):  # deletions a crash interrupted: finish them
            if name not in topics:
                n = self.store.delete_stray_logs(name)
                log.info("finished deleting topic %s (%d partition dir(s) left by an "
                         "interrupted deletion)", name, n)
        deleting.clear()
        # Logs on disk that the metadata file does not know (older data dir): adopt them.
        for topic, partition in self.store.logs_on_disk():
            state = topics.get(topic)
            if state is None:
                state = topics[topic] = TopicState(topic, uuid.uuid4(), partition + 1)
            elif partition >= state.num_partitions:
                state.num_partitions = partition + 1
        for state in topics.values():
            self.store.set_topic_overrides(state.name, state.configs)
            config = self.store.configs.for_topic(state.name)
            for p in range(state.num_partitions):
                self.store.make_partition(state.name, p, config)
            self.cache.put_topic(state.name, state.topic_id, state.num_partitions)
        self.metadata.write()

    # ---- create ----------------------------------------------------------------------------
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: list[ReplicaAssignment],
                     configs: Sequence[tuple[str, str | None]], *,
                     validate_only: bool = False) -> TopicState:
        check_assignments(num_partitions, replication_factor, assignments)
        if assignments:
            self._check_this_broker([brokers for _index, brokers in assignments])
            num_partitions, replication_factor = len(assignments), 1
        if num_partitions == NO_NUM_PARTITIONS:
            num_partitions = self.config.get_int("num.partitions")
        if replication_factor == NO_REPLICATION_FACTOR:
            replication_factor = self.config.get_int("default.replication.factor")
        if replication_factor != 1:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"replication factor {replication_factor} is larger than the 1 "
                             "available broker")
        overrides = requested_overrides(configs)
        return self._create(name, num_partitions, overrides, validate_only=validate_only)

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
        existing = self.metadata.topics.get(name)
        if existing is not None:  # made, or being made (_creating), by another request
            return existing
        partitions = self.default_partitions if num_partitions is None else num_partitions
        try:
            return self._create(name, partitions, dict(configs or {}))
        except TopicError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                raise TopicError(ErrorCode.LEADER_NOT_AVAILABLE, str(e)) from None
            raise

    def _check_this_broker(self, assignments: list[list[int]]) -> None:
        for brokers in assignments:
            if brokers != [self.broker_id]:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"this cluster has one broker, id {self.broker_id}")

    def _create(self, name: str, num_partitions: int, configs: dict[str, str], *,
                validate_only: bool = False) -> TopicState:
        validate_topic_name(name)
        if name in self.metadata.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if name in self._deleting:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {name!r} is being deleted; retry once that is done")
        if name in self.metadata.deleting:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                             f"topic {name!r} is marked for deletion; retry after a restart")
        collision = self._collision(name)
        if collision:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"topic {name!r} collides with existing topic {collision!r} "
                             "('.' and '_' are interchangeable in metric names)")
        if num_partitions < 1:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             "the number of partitions must be at least 1")
        config = self._log_config(configs)
        # the creations under way open their files later: count them as open already
        check_open_file_room(num_partitions + self._opening_later())
        state = TopicState(name, uuid.uuid4(), num_partitions, configs)
        if validate_only:
            return state
        if num_partitions > INLINE_PARTITIONS and self._loop() is not None:
            self._start_creation(state, config)
            return state
        try:
            for p in range(num_partitions):
                self.store.make_partition(name, p, config)
            self.metadata.topics[name] = state
            self.metadata.write()
        except (OSError, LogError) as e:
            raise self._undo_creation(state, e) from None
        self._announce(state)
        return state

    def _opening_later(self) -> int:
        """Partitions the creations and growths under way have yet to open."""
        return sum(self.metadata.topics[n].num_partitions for n in self._creating
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
        if self.metadata.topics.pop(name, None) is not None:
            with contextlib.suppress(OSError):
                self.metadata.write()
        for p in range(state.num_partitions):
            self.store.discard_partition(name, p)
        self.store.forget_topic(name)
        return _storage_error(f"cannot create topic {name!r}", e)

    def _announce(self, state: TopicState) -> None:
        self.store.set_topic_overrides(state.name, state.configs)
        self.cache.put_topic(state.name, state.topic_id, state.num_partitions)
        log.info("created topic %s with %d partition(s)%s", state.name, state.num_partitions,
                 f" and configs {state.configs}" if state.configs else "")

    # ---- creation in slices (large topics) ---------------------------------------------------
    def _start_creation(self, state: TopicState, config: LogConfig) -> None:
        """Decide durably (topic-metadata.json: a restart makes whatever is missing), then
        make the partitions: their files on a worker thread, CREATE_CHUNK at a time, and
        the Partition objects on the event loop in slices of at most CREATE_SLICE_S, so the
        broker keeps answering other requests; the topic enters the metadata when whole."""
        self.metadata.topics[state.name] = state
        try:
            self.metadata.write()
        except OSError as e:
            raise self._undo_creation(state, e) from None
        self.store.set_topic_overrides(state.name, state.configs)
        task = asyncio.get_running_loop().create_task(self._make_partitions(state, config))
        self._creating[state.name] = task

    async def _host_in_slices(self, name: str, partitions: range, config: LogConfig) -> bool:
        """Make and host `partitions`: their files on a worker thread (a slow mkdir or
        open on a busy disk blocks it, not the event loop), CREATE_CHUNK at a time; the
        Partition objects on the event loop in slices of at most CREATE_SLICE_S. False
        when told to stop (`_stopping`) between two steps; raises OSError or LogError."""
        deadline = time.monotonic() + CREATE_SLICE_S
        for first in range(partitions.start, partitions.stop, CREATE_CHUNK):
            chunk = range(first, min(first + CREATE_CHUNK, partitions.stop))
            await asyncio.to_thread(self.store.prepare_logs, name, chunk, config)
            for p in chunk:
                if name in self._stopping:
                    return False
                self.store.make_partition(name, p, config)
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
        if name in self.metadata.deleting:
            self.metadata.deleting.discard(name)
            with contextlib.suppress(OSError):
                self.metadata.write()
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

    def _collision(self, name: str) -> str | None:
        norm = name.replace(".", "_")
        for other in self.metadata.topics:
            if other != name and other.replace(".", "_") == norm:
                return other
        return None

    def _log_config(self, configs: Mapping[str, str]) -> LogConfig:
        try:
            return self.store.configs.log_config_for(configs)
        except ValueError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from e

    # ---- delete / partitions ---------------------------------------------------------------
    def delete_topic(self, name: str) -> TopicState:
        state = self.metadata.topics.get(name)
        if state is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        if not self.delete_enabled:
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false")
        creating = name in self._creating or name in self._growing
        if creating:  # it stops at its next step and deletes the logs it made meanwhile
            self._stopping.add(name)
        del self.metadata.topics[name]
        self.cache.remove_topic(name)
        # Decided first, durably: a crash from here on finishes the deletion at the next
        # start (load) instead of adopting the remaining dirs as a topic again.
        self.metadata.deleting.add(name)
        self.metadata.write()
        if state.num_partitions > INLINE_PARTITIONS and self._loop() is not None:
            task = asyncio.get_running_loop().create_task(
                self._remove_partitions(name, state.num_partitions, finish=not creating))
            self._deleting[name] = task
            return state
        failed = False
        for p in range(state.num_partitions):
            try:
                self.store.remove_partition(name, p)
            except OSError as e:
                failed = True
                log.error("cannot delete the log dir of %s-%d: %s; the next start "
                          "deletes it", name, p, e.strerror or e)
        self.store.forget_topic(name)
        if not failed and not creating:
            self._finish_deletion(name)
        log.info("deleted topic %s", name)
        return state

    def _finish_deletion(self, name: str) -> None:
        self.metadata.deleting.discard(name)
        self.metadata.write()

    async def _remove_partitions(self, name: str, count: int, *, finish: bool) -> None:
        """A large deletion: stop hosting each chunk of partitions (event loop), delete
        their logs (close, rename, fsync: a worker thread). Shutdown stops it between
        chunks; the next start finishes it (the topic is marked as being deleted)."""
        failed = False
        try:
            for first in range(0, count, CREATE_CHUNK):
                if self._stopping_all:
                    return
                chunk = range(first, min(first + CREATE_CHUNK, count))
                self.store.stop_hosting(name, chunk)
                for p, e in await asyncio.to_thread(self.store.delete_logs, name, chunk):
                    failed = True
                    log.error("cannot delete the log dir of %s-%d: %s; the next start "
                              "deletes it", name, p, e.strerror or e)
            self.store.forget_topic(name)
            if not failed and finish:
                with contextlib.suppress(OSError):
                    self._finish_deletion(name)
            log.info("deleted topic %s", name)
        finally:
            self._deleting.pop(name, None)

    def add_partitions(self, name: str, count: int, assignments: list[list[int]], *,
                       validate_only: bool = False) -> None:
        """Grow `name` to `count` partitions. More than INLINE_PARTITIONS new ones are made
        in the background as a large creation's are (`settled` waits for them): the count
        is decided durably first (a restart makes what is missing) and clients see the
        new partitions once all are hosted."""
        self._check_this_broker(assignments)
        state = self.metadata.topics.get(name)
        if state is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        if name in self._creating or name in self._growing:
            raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"topic {name!r} is still being made ({state.num_partitions} "
                             "partitions); retry once that is done")
        old = state.num_partitions
        if count <= old:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"topic {name!r} has {old} partitions; the new count {count} "
                             "must be larger")
        check_open_file_room(count - old + self._opening_later())
        if validate_only:
            return
        config = self.store.configs.log_config_for(state.configs)
        state.num_partitions = count
        if count - old > INLINE_PARTITIONS and self._loop() is not None:
            try:
                self.metadata.write()
            except OSError as e:
                raise self._undo_growth(state, old, e) from None
            task = asyncio.get_running_loop().create_task(self._grow(state, old, config))
            self._growing[name] = (task, count - old)
            return
        try:
            for p in range(old, count):
                self.store.make_partition(name, p, config)
            self.metadata.write()
        except (OSError, LogError) as e:
            raise self._undo_growth(state, old, e) from None
        self._grown(state)

    async def _grow(self, state: TopicState, old: int, config: LogConfig) -> ErrorCode:
        name = state.name
        try:
            if not await self._host_in_slices(name, range(old, state.num_partitions), config):
                return self._stopped(name)
        except (OSError, LogError) as e:
            if name in self._stopping:
                return self._stopped(name)
            self._undo_growth(state, old, e)
            return ErrorCode.KAFKA_STORAGE_ERROR
        finally:
            self._growing.pop(name, None)
            self._stopping.discard(name)
        self._grown(state)
        gc.freeze()  # as after a large creation
        return ErrorCode.NONE

    def _grown(self, state: TopicState) -> None:
        self.cache.put_topic(state.name, state.topic_id, state.num_partitions)
        log.info("topic %s now has %d partitions", state.name, state.num_partitions)

    def _undo_growth(self, state: TopicState, old: int, e: OSError | LogError) -> TopicError:
        """A full or failing disk: drop the partitions added so far, back to `old`."""
        name = state.name
        for p in range(old, state.num_partitions):
            self.store.discard_partition(name, p)
        state.num_partitions = old
        with contextlib.suppress(OSError):
            self.metadata.write()
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
        state = self.metadata.topics.get(name)
        if state is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"topic {name!r} does not exist")
        check_config_changes(state.configs, configs)
        self._log_config(configs)
        if validate_only:
            return
        state.configs = dict(configs)
        self.store.update_topic_config(name, configs)
        self.metadata.write()
        log.info("topic %s configs are now %s", name, configs or "the broker defaults")
