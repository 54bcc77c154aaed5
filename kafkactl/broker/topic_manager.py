"""Topics on a standalone broker: create, delete, add partitions, per-topic configs.

The topic list (ids, partition counts, config overrides) is persisted in
`<first log dir>/topic-metadata.json` (written to a temp file, fsynced, renamed), so topics
and their overrides survive restarts; partition data lives in the LogManager's
`<topic>-<partition>` directories. Topic names follow Kafka's rules.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import resource
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafkactl.broker.metadata_cache import StandaloneMetadataCache
from kafkactl.broker.partition import Partition
from kafkactl.broker.purgatory import FetchPurgatory
from kafkactl.log.errors import LogError

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
METADATA_FILE = "topic-metadata.json"


class TopicError(Exception):
    """A topic operation that fails; `code_name` is the Kafka error name."""

    def __init__(self, code_name: str, message: str) -> None:
        super().__init__(message)
        self.code_name = code_name


FILES_PER_PARTITION = 3  # the active segment's .log, .index and .timeindex
RESERVED_FILES = 512  # connections, checkpoints, snapshots


def check_open_file_room(new_partitions: int) -> None:
    """Refuse (INVALID_PARTITIONS, before anything is made) partitions the process could
    not hold open: each keeps FILES_PER_PARTITION descriptors, and running out of them
    mid-request would stall the broker for as long as it takes to undo the work."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    try:
        open_now = len(os.listdir("/proc/self/fd"))
    except OSError:
        open_now = 0
    room = (soft - RESERVED_FILES - open_now) // FILES_PER_PARTITION
    if new_partitions > room:
        raise TopicError(
            "INVALID_PARTITIONS",
            f"{new_partitions} new partitions need about "
            f"{new_partitions * FILES_PER_PARTITION} open files; this broker has room for "
            f"{max(room, 0)} more partitions (open files limit {soft}: raise `ulimit -n` "
            f"or ask for fewer)")


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise TopicError("INVALID_TOPIC_EXCEPTION", "topic name is empty")
    if name in (".", ".."):
        raise TopicError("INVALID_TOPIC_EXCEPTION", f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError("INVALID_TOPIC_EXCEPTION",
                         f"topic name is {len(name)} characters; the limit is {MAX_NAME_LENGTH}")
    if not _LEGAL.match(name):
        raise TopicError("INVALID_TOPIC_EXCEPTION",
                         f"topic name {name!r} may only contain ASCII letters, digits, "
                         "'.', '_' and '-'")


@dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class TopicManager:
    def __init__(self, log_manager: Any, cache: StandaloneMetadataCache, purgatory: FetchPurgatory,
                 *, metadata_dir: Path, default_partitions: int, log_config_cls: Any,
                 default_log_config: Any, delete_enabled: bool = True) -> None:
        self.log_manager = log_manager
        self.cache = cache
        self.purgatory = purgatory
        self.metadata_path = metadata_dir / METADATA_FILE
        self.default_partitions = default_partitions
        self.log_config_cls = log_config_cls
        self.default_log_config = default_log_config
        self.delete_enabled = delete_enabled
        self.topics: dict[str, TopicState] = {}
        self.partitions: dict[tuple[str, int], Partition] = {}
        # topics whose deletion is decided (persisted) but whose log dirs may remain
        self.deleting: set[str] = set()

    # ---- startup ---------------------------------------------------------------------------
    def read_metadata(self) -> None:
        """Read the persisted topic list (before the LogManager opens logs)."""
        if not self.metadata_path.exists():
            return
        try:
            doc = json.loads(self.metadata_path.read_text())
            saved = doc.get("topics", {})
            self.deleting = {str(n) for n in doc.get("deleting", [])}
            for name, info in saved.items():
                self.topics[name] = TopicState(name, uuid.UUID(info["topic_id"]),
                                               int(info["partitions"]),
                                               dict(info.get("configs", {})))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise RuntimeError(f"{self.metadata_path} is unreadable ({e}); move it away "
                               "to rebuild the topic list from the log directories") from e

    def topic_log_config(self, topic: str) -> Any:
        """The LogManager's per-topic config callback."""
        state = self.topics.get(topic)
        if state is None:
            return self.default_log_config
        try:
            return self.log_config_for(state.configs)
        except ValueError:
            return self.default_log_config

    def load(self) -> None:
        """Open every partition: persisted topics plus logs found on disk."""
        for name in sorted(self.deleting):  # deletions a crash interrupted: finish them
            if name not in self.topics:
                n = self.log_manager.delete_stray_logs(name)
                log.info("finished deleting topic %s (%d partition dir(s) left by an "
                         "interrupted deletion)", name, n)
        self.deleting.clear()
        # Logs on disk that the metadata file does not know (older data dir): adopt them.
        for (topic, partition), _log in self._existing_logs().items():
            state = self.topics.get(topic)
            if state is None:
                state = self.topics[topic] = TopicState(topic, uuid.uuid4(), partition + 1)
            elif partition >= state.num_partitions:
                state.num_partitions = partition + 1
        for state in self.topics.values():
            config = self.topic_log_config(state.name)
            for p in range(state.num_partitions):
                self._open_partition(state.name, p, config)
            self.cache.put_topic(state.name, state.topic_id, state.num_partitions)
        self._persist()

    def _existing_logs(self) -> dict[tuple[str, int], Any]:
        logs = getattr(self.log_manager, "logs", {})
        out: dict[tuple[str, int], Any] = {}
        for key, lg in dict(logs).items():
            topic, partition = (key.topic, key.partition) if hasattr(key, "topic") else key
            out[(topic, int(partition))] = lg
        return out

    def _open_partition(self, topic: str, p: int, config: Any) -> Partition:
        lg = self.log_manager.get_log((topic, p))
        if lg is None:
            lg = self.log_manager.create_log(topic, p, config)
        else:
            self._apply_config(lg, config)
        part = Partition(topic, p, lg)
        part.load_producer_state()
        self.partitions[(topic, p)] = part
        return part

    # ---- queries ---------------------------------------------------------------------------
    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def log_config_for(self, overrides: dict[str, str]) -> Any:
        return self.default_log_config.with_overrides(overrides) if overrides \
            else self.default_log_config

    def validate_configs(self, configs: dict[str, str]) -> Any:
        try:
            return self.log_config_for(configs)
        except ValueError as e:
            raise TopicError("INVALID_CONFIG", str(e)) from e

    # ---- create / delete / partitions -----------------------------------------------------
    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str] | None = None,
                     *, validate_only: bool = False) -> TopicState:
        validate_topic_name(name)
        if name in self.topics:
            raise TopicError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
        if name in self.deleting:
            raise TopicError("TOPIC_ALREADY_EXISTS",
                             f"topic {name!r} is marked for deletion; retry after a restart")
        collision = self._collision(name)
        if collision:
            raise TopicError("INVALID_TOPIC_EXCEPTION",
                             f"topic {name!r} collides with existing topic {collision!r} "
                             "('.' and '_' are interchangeable in metric names)")
        if num_partitions < 1:
            raise TopicError("INVALID_PARTITIONS", "the number of partitions must be at least 1")
        configs = dict(configs or {})
        config = self.validate_configs(configs)
        check_open_file_room(num_partitions)
        state = TopicState(name, uuid.uuid4(), num_partitions, configs)
        if validate_only:
            return state
        try:
            for p in range(num_partitions):
                self._open_partition(name, p, config)
            self.topics[name] = state
            self._persist()
        except (OSError, LogError) as e:
            # A full or failing disk: undo the partitions made so far, so the topic is
            # either whole or absent (a retry can create it once space is freed).
            self.topics.pop(name, None)
            self._discard_partitions(name, num_partitions)
            log.error("cannot create topic %s: %s", name, e)
            raise TopicError("KAFKA_STORAGE_ERROR", f"cannot create topic {name!r}: "
                             f"{getattr(e, 'strerror', None) or e}") from None
        self.cache.put_topic(name, state.topic_id, num_partitions)
        log.info("created topic %s with %d partition(s)%s", name, num_partitions,
                 f" and configs {configs}" if configs else "")
        return state

    def _discard_partitions(self, name: str, num_partitions: int) -> None:
        for p in range(num_partitions):
            self.partitions.pop((name, p), None)
            with contextlib.suppress(OSError, LogError):
                if not self.log_manager.delete_log(name, p):
                    for d in self.log_manager.log_dirs:  # a dir made before the failure
                        with contextlib.suppress(OSError):
                            (d / f"{name}-{p}").rmdir()

    def _collision(self, name: str) -> str | None:
        norm = name.replace(".", "_")
        for other in self.topics:
            if other != name and other.replace(".", "_") == norm:
                return other
        return None

    def auto_create(self, name: str) -> TopicState:
        return self.create_topic(name, self.default_partitions)

    def delete_topic(self, name: str) -> TopicState:
        state = self.topics.get(name)
        if state is None:
            raise TopicError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        if not self.delete_enabled:
            raise TopicError("TOPIC_DELETION_DISABLED", "delete.topic.enable is false")
        del self.topics[name]
        self.cache.remove_topic(name)
        # Decided first, durably: a crash from here on finishes the deletion at the next
        # start (load) instead of adopting the remaining dirs as a topic again.
        self.deleting.add(name)
        self._persist()
        failed = False
        for p in range(state.num_partitions):
            part = self.partitions.pop((name, p), None)
            self.purgatory.wake((name, p))
            if part is not None:
                try:
                    self.log_manager.delete_log(name, p)
                except OSError as e:
                    failed = True
                    log.error("cannot delete the log dir of %s-%d: %s; the next start "
                              "deletes it", name, p, e.strerror or e)
        if not failed:
            self.deleting.discard(name)
            self._persist()
        log.info("deleted topic %s", name)
        return state

    def add_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        state = self.topics.get(name)
        if state is None:
            raise TopicError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        if count <= state.num_partitions:
            raise TopicError("INVALID_PARTITIONS",
                             f"topic {name!r} has {state.num_partitions} partitions; the new "
                             f"count {count} must be larger")
        check_open_file_room(count - state.num_partitions)
        if validate_only:
            return
        config = self.log_config_for(state.configs)
        for p in range(state.num_partitions, count):
            self._open_partition(name, p, config)
        state.num_partitions = count
        self.cache.put_topic(name, state.topic_id, count)
        self._persist()
        log.info("topic %s now has %d partitions", name, count)

    # ---- configs ---------------------------------------------------------------------------
    def set_configs(self, name: str, configs: dict[str, str], *,
                    validate_only: bool = False) -> None:
        state = self.topics.get(name)
        if state is None:
            raise TopicError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        config = self.validate_configs(configs)
        if validate_only:
            return
        state.configs = dict(configs)
        for p in range(state.num_partitions):
            part = self.partitions.get((name, p))
            if part is not None:
                self._apply_config(part.log, config)
        self._persist()
        log.info("topic %s configs are now %s", name, configs or "the broker defaults")

    def config_of(self, name: str) -> Any:
        state = self.topics[name]
        return self.log_config_for(state.configs)

    @staticmethod
    def _apply_config(lg: Any, config: Any) -> None:
        if hasattr(lg, "update_config"):
            lg.update_config(config)
        else:
            lg.config = config

    # ---- persistence -----------------------------------------------------------------------
    def _persist(self) -> None:
        data: dict[str, Any] = {"version": 1, "topics": {
            s.name: {"topic_id": str(s.topic_id), "partitions": s.num_partitions,
                     "configs": s.configs} for s in self.topics.values()}}
        if self.deleting:
            data["deleting"] = sorted(self.deleting)
        tmp = self.metadata_path.with_suffix(".json.tmp")
        self.metadata_path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.metadata_path)
        with contextlib.suppress(OSError):
            fd = os.open(self.metadata_path.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
