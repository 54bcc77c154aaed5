"""The partitions this broker hosts: their logs, Partition objects and log configs.

This is the receiving end of what a controller decides. `make_partition(topic, p, config,
leader_epoch)` is "you now host partition p of topic t at leader epoch e" (Kafka's
LeaderAndIsr, `ReplicaManager.becomeLeaderOrFollower`); `remove_partition` is StopReplica
with deletion. Which partitions exist, and with which replicas, is the TopicAdmin's
business (kafkactl.broker.topic_admin); the store never decides it.

`TopicLogConfigs` is the log config of each topic: the broker's defaults (changed at run
time by dynamic broker configs) with the topic's overrides. The LogManager asks it for a
topic's config when it opens the logs on disk at start-up.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kafkactl.broker.metrics import remove_topic_metrics
from kafkactl.broker.partition import Partition
from kafkactl.broker.purgatory import FetchPurgatory
from kafkactl.log.checkpoint import CheckpointError, read_checkpoint, write_checkpoint
from kafkactl.log.config import LogConfig
from kafkactl.log.errors import LogDirOfflineError, LogError
from kafkactl.log.manager import LogManager

if TYPE_CHECKING:
    from kafkactl.broker.dynamic_config import DynamicBrokerConfig

TopicPartition = tuple[str, int]
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
log = logging.getLogger(__name__)


class TopicLogConfigs:
    """The broker's default LogConfig and each topic's overrides of it."""

    def __init__(self, defaults: LogConfig,
                 overrides: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.defaults = defaults
        self.overrides: dict[str, dict[str, str]] = {
            name: dict(o) for name, o in (overrides or {}).items()}

    def log_config_for(self, overrides: Mapping[str, str]) -> LogConfig:
        """The defaults with `overrides` applied; ValueError names a bad value."""
        return self.defaults.with_overrides(overrides) if overrides else self.defaults

    def config_of(self, topic: str) -> LogConfig:
        """The effective config of a known topic (KeyError if unknown)."""
        return self.log_config_for(self.overrides[topic])

    def for_topic(self, topic: str) -> LogConfig:
        """The LogManager's per-topic callback: the defaults for an unknown topic or
        overrides that no longer build."""
        overrides = self.overrides.get(topic)
        if overrides is None:
            return self.defaults
        try:
            return self.log_config_for(overrides)
        except ValueError:
            return self.defaults


class PartitionStore:
    """The partitions hosted here, by (topic, partition), over the LogManager's logs."""

    def __init__(self, log_manager: LogManager, configs: TopicLogConfigs,
                 purgatory: FetchPurgatory) -> None:
        self.log_manager = log_manager
        self.configs = configs
        self.purgatory = purgatory
        self.partitions: dict[TopicPartition, Partition] = {}
        # replicas to host whose log may be in an offline log dir (KAFKA_STORAGE_ERROR)
        self.offline: set[TopicPartition] = set()
        self.checkpointed_high_watermarks = self._read_high_watermarks()
        # one writer of the checkpoint files at a time, and never an older capture over a
        # newer one (captures are numbered on the loop)
        self._hw_lock = threading.Lock()
        self._hw_captured = 0
        self._hw_written = 0
        # the dynamic broker configs whose log defaults this store applies (it registers
        # itself): how a cluster's config-change listener reaches them
        self.dynamic_config: DynamicBrokerConfig | None = None
        # ZooKeeper mode: each topic's config as last read or written there, by the znode's
        # mzxid, so that an older read never replaces a newer one (`zk_topic_config`)
        self._zk_topic_configs: dict[str, tuple[int, dict[str, str]]] = {}

    # ---- queries ---------------------------------------------------------------------------
    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def logs_on_disk(self) -> list[TopicPartition]:
        """Every (topic, partition) whose log the LogManager found or made."""
        return list(self.log_manager.logs)

    def topic_config(self, topic: str) -> LogConfig:
        """The effective log config of a hosted topic (KeyError if unknown)."""
        return self.configs.config_of(topic)

    # ---- what a controller tells this broker -------------------------------------------------
    def make_partition(self, topic: str, partition: int, config: LogConfig,
                       leader_epoch: int = 0, *, is_new: bool = True) -> Partition:
        """Host (topic, partition): open its log (made if absent) with `config`, load its
        producer state. Raises OSError or LogError when the disk fails, or when a replica
        that is not new has no log and a log dir is offline (it may be there)."""
        lg = self.log_manager.get_log((topic, partition))
        if lg is None:
            try:
                lg = self.log_manager.create_log(topic, partition, config, is_new=is_new)
            except LogDirOfflineError:
                self.offline.add((topic, partition))
                raise
        else:
            lg.config = config
        part = Partition(topic, partition, lg, leader_epoch=leader_epoch,
                         high_watermark=self.checkpointed_high_watermarks.get(
                             (topic, partition)))
        part.load_producer_state()
        self.partitions[(topic, partition)] = part
        self.offline.discard((topic, partition))
        return part

    def prepare_logs(self, topic: str, partitions: Iterable[int], config: LogConfig) -> None:
        """Make the logs of `partitions` (directories, segment and index files) without
        hosting them: thread-safe, so a worker thread can do the disk work of a large
        creation; `make_partition` then finds each log made. Raises OSError or LogError."""
        for p in partitions:
            self.log_manager.create_log(topic, p, config)

    def remove_partition(self, topic: str, partition: int) -> None:
        """Stop hosting (topic, partition) and delete its log; fetches waiting on it
        return. Raises OSError if the log dir cannot be renamed for deletion."""
        part = self.partitions.pop((topic, partition), None)
        self.offline.discard((topic, partition))
        self.purgatory.wake((topic, partition))
        # a partition of the same name made again in this run starts without the deleted
        # log's high watermark (the checkpoint file drops it too: LogManager.delete_log)
        self.checkpointed_high_watermarks.pop((topic, partition), None)
        if part is not None:
            self.log_manager.delete_log(topic, partition)

    def stop_hosting(self, topic: str, partitions: Iterable[int]) -> None:
        """Stop hosting `partitions` (their logs stay: `delete_logs`); fetches waiting on
        them return."""
        for p in partitions:
            self.partitions.pop((topic, p), None)
            self.offline.discard((topic, p))
            self.purgatory.wake((topic, p))

    def take_offline(self, topic: str, partition: int) -> None:
        """Stop hosting (topic, partition), whose log dir went offline: from now on it
        answers KAFKA_STORAGE_ERROR (`offline`); fetches waiting on it return."""
        self.partitions.pop((topic, partition), None)
        self.offline.add((topic, partition))
        self.purgatory.wake((topic, partition))

    def delete_logs(self, topic: str, partitions: Iterable[int]) -> list[tuple[int, OSError]]:
        """Delete the logs of partitions no longer hosted (thread-safe: a worker thread
        does the disk work of a large deletion); the partitions whose dir could not be
        renamed, with the error."""
        failed: list[tuple[int, OSError]] = []
        for p in partitions:
            self.checkpointed_high_watermarks.pop((topic, p), None)  # (remove_partition)
            try:
                self.log_manager.delete_log(topic, p)
            except OSError as e:
                failed.append((p, e))
        return failed

    def discard_partition(self, topic: str, partition: int) -> None:
        """Undo a `make_partition` that a disk error interrupted, ignoring further errors."""
        self.partitions.pop((topic, partition), None)
        with contextlib.suppress(OSError, LogError):
            if not self.log_manager.delete_log(topic, partition):
                for d in self.log_manager.online_dirs:  # a dir made before the failure
                    with contextlib.suppress(OSError):
                        (d / f"{topic}-{partition}").rmdir()

    def delete_stray_logs(self, topic: str) -> int:
        """Delete the logs of a topic no longer hosted; the number deleted."""
        return self.log_manager.delete_stray_logs(topic)

    # ---- high watermarks (replication-offset-checkpoint) -------------------------------------
    def _read_high_watermarks(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for d in self.log_manager.online_dirs:
            try:
                out.update(read_checkpoint(d / HIGH_WATERMARK_CHECKPOINT))
            except CheckpointError as e:  # lost: replicas start low and catch up
                log.warning("%s; high watermarks restart from the log start", e)
        return out

    def checkpoint_high_watermarks(self) -> None:
        """Each log dir's replicated partitions' high watermarks, written atomically
        (here and now: shutdown)."""
        self._write_high_watermarks(*self._capture_high_watermarks())

    async def checkpoint_high_watermarks_off_loop(
            self, run: Callable[..., Awaitable[object]]) -> None:
        """The same, captured now (one consistent point on the loop) and written (fsync,
        rename, directory fsync) by `run` (the log-io executor)."""
        await run(self._write_high_watermarks, *self._capture_high_watermarks())

    def _capture_high_watermarks(self) -> tuple[int, dict[Path, dict[TopicPartition, int]]]:
        by_dir: dict[Path, dict[TopicPartition, int]] = {}
        for key, part in list(self.partitions.items()):
            if part.replicated:
                by_dir.setdefault(Path(part.log.dir).parent, {})[key] = part.high_watermark
        self._hw_captured += 1
        return self._hw_captured, by_dir

    def _write_high_watermarks(self, capture: int,
                               by_dir: dict[Path, dict[TopicPartition, int]]) -> None:
        with self._hw_lock:
            if capture <= self._hw_written:
                return  # a newer capture is already on disk
            for d in self.log_manager.online_dirs:
                entries = by_dir.get(d, {})
                if entries or (d / HIGH_WATERMARK_CHECKPOINT).exists():
                    write_checkpoint(d / HIGH_WATERMARK_CHECKPOINT, entries)
            self._hw_written = capture

    # ---- configs ---------------------------------------------------------------------------
    def set_topic_overrides(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Record a topic's overrides without touching its logs (a new topic)."""
        self.configs.overrides[topic] = dict(overrides)

    def forget_topic(self, topic: str) -> None:
        self.configs.overrides.pop(topic, None)
        remove_topic_metrics(self, topic)  # no local partition left: Kafka drops its meters

    def zk_topic_config(self, topic: str, overrides: Mapping[str, str] | None,
                        zxid: int) -> dict[str, str] | None:
        """Record a topic's config as ZooKeeper had it at `zxid` (None: no config znode,
        the topic is deleted); the newest recorded. Reads and writes of several threads
        and brokers reach the event loop in any order: the newest wins."""
        known = self._zk_topic_configs.get(topic)
        if known is not None and known[0] > zxid:
            return dict(known[1])
        if overrides is None:
            self._zk_topic_configs.pop(topic, None)
            return None
        self._zk_topic_configs[topic] = (zxid, dict(overrides))
        return dict(overrides)

    def update_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """New overrides of a topic, applied to its hosted logs (ValueError: bad value)."""
        config = self.configs.log_config_for(overrides)
        self.configs.overrides[topic] = dict(overrides)
        for (name, _p), part in self.partitions.items():
            if name == topic:
                part.log.config = config

    def update_default_config(self, defaults: LogConfig) -> None:
        """New broker defaults (dynamic broker configs), re-applied to every hosted log
        with its topic's overrides (ValueError: overrides that no longer build)."""
        self.configs.defaults = defaults
        self.log_manager.default_config = defaults
        by_topic: dict[str, LogConfig] = {}
        for (name, _p), part in self.partitions.items():
            if name not in by_topic:
                by_topic[name] = self.configs.log_config_for(self.configs.overrides.get(name, {}))
            part.log.config = by_topic[name]
