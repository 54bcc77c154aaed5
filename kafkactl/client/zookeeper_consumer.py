"""ZookeeperConsumer: the seed's high-level consumer, coordinated through ZooKeeper.

It follows seed 002's consumer registration algorithm: register
/consumers/[group]/ids/[consumer_id], watch the group's ids, the broker registry and (for a
topic filter) the topic registry, and on any change rebalance with the seed's algorithm
(kafkactl.cluster.consumer_registry.range_assignment): commit what it consumed, release its
owner nodes, compute its share, and claim each partition's owner node (retrying until the
previous owner has released it). Records are fetched from the partition leaders with the
ordinary Consumer; brokers are discovered in /brokers/ids unless bootstrap servers are given.

Offsets live in /consumers/[group]/offsets (offsets.storage=zookeeper), in the broker's
offset manager (offsets.storage=kafka), or both (dual.commit.enabled, the migration step:
positions then start from the larger of the two). A ZooKeeper offset is read as Kafka's
consumer read it and `kafkactl offsets migrate` reads it (consumer_registry.parse_offset):
no znode is no offset (auto.offset.reset), a negative one too (warned), and text that is no
Long.parseLong number is an error naming the znode (Kafka's consumer failed on it). The
chroot must exist and hold /brokers: a mistyped one is an error, never created.

The rebalance runs in the polling thread (on every poll, as the group consumer's does), and
what it commits is the consumer's `consumed` offsets: what the caller has been handed (or,
for kafkactl consume, has written), never what was only fetched.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kafkactl.client.consumer import Consumer
from kafkactl.client.errors import ClientError
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.zookeeper_discovery import discover_bootstrap
from kafkactl.cluster import consumer_registry as registry
from kafkactl.cluster import zk_paths
from kafkactl.cluster import zookeeper as zkconn
from kafkactl.cluster.broker_registry import registered_topics
from kafkactl.protocol.errors import KafkaError
from kafkactl.protocol.internal_topics import is_internal

if TYPE_CHECKING:
    from kafkactl.client.group.group_admin import GroupAdmin

log = logging.getLogger("kafkactl.consumer")

TopicPartition = tuple[str, int]
RebalanceCallback = Callable[[set[TopicPartition]], None]
OFFSETS_STORAGE = ("zookeeper", "kafka")


class ConsumerRebalanceFailedError(ClientError):
    """The partitions could not be claimed within rebalance.max.retries attempts."""


class MalformedOffsetError(ClientError):
    """An offsets znode holds no number Long.parseLong reads (`1_000`, ` 7`, `7\\n`, empty):
    Kafka's ZooKeeper consumer failed on it too, rather than guess or reset."""


class _ZkSource:
    def __init__(self, consumer: ZookeeperConsumer) -> None:
        self.consumer = consumer

    def assignment(self, client: KafkaClient) -> set[TopicPartition]:
        return set(self.consumer.owned)

    def committed(self, client: KafkaClient,
                  tps: set[TopicPartition]) -> dict[TopicPartition, int]:
        return self.consumer.committed(tps)

    def on_poll(self, client: KafkaClient) -> None:
        self.consumer.maybe_rebalance()

    def born_since_start(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return []  # the seed's consumer keeps auto.offset.reset for every partition

    def close(self, client: KafkaClient) -> None:
        return None


class ZookeeperConsumer(Consumer):
    def __init__(self, *topics: str, group_id: str, zookeeper: str,
                 pattern: str | None = None, blacklist: bool = False,
                 bootstrap_servers: str | None = None, streams: int = 1,
                 offsets_storage: str = "zookeeper", dual_commit: bool = False,
                 enable_auto_commit: bool = True, auto_commit_interval_ms: int = 1000,
                 auto_offset_reset: str = "latest", zookeeper_session_timeout_ms: int = 6000,
                 zookeeper_connection_timeout_ms: int = 6000,
                 rebalance_backoff_ms: int = 2000, rebalance_max_retries: int = 10,
                 consumer_id: str | None = None, zookeeper_option: str = "zookeeper.connect",
                 on_assign: RebalanceCallback | None = None,
                 on_revoke: RebalanceCallback | None = None, **kwargs: Any) -> None:
        if bool(topics) == bool(pattern):
            raise ValueError("give either topics or a pattern")
        if offsets_storage not in OFFSETS_STORAGE:
            raise ValueError("offsets.storage must be zookeeper or kafka")
        if streams < 1:
            raise ValueError("streams must be >= 1")
        self.group_id = group_id
        self.connect_string = zookeeper
        # a chroot that does not exist or holds no Kafka cluster (no /brokers) is an error: a
        # mistyped one, created and registered in, would consume nothing and say nothing
        self.zk = registry.connect_existing(
            zookeeper, require=zk_paths.BROKERS, what=zookeeper_option,
            timeout_s=zookeeper_connection_timeout_ms / 1000,
            session_timeout_s=zookeeper_session_timeout_ms / 1000)
        try:
            bootstrap = bootstrap_servers or discover_bootstrap(self.zk, zookeeper)
            super().__init__(bootstrap_servers=bootstrap, auto_offset_reset=auto_offset_reset,
                             **kwargs)
        except BaseException:
            zkconn.close(self.zk)
            raise
        self.source = _ZkSource(self)
        self.offsets_storage = offsets_storage
        self.dual_commit = dual_commit
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.rebalance_backoff = rebalance_backoff_ms / 1000
        self.rebalance_max_retries = rebalance_max_retries
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.static_topics = tuple(topics)
        kind = "static" if topics else ("black_list" if blacklist else "white_list")
        subscription = {t: streams for t in topics} if topics else {str(pattern): streams}
        self.member = registry.Member(consumer_id or registry.new_consumer_id(group_id),
                                      subscription, kind)
        self.consumer_id = self.member.consumer_id
        self.owned: dict[TopicPartition, str] = {}  # partition -> our owning thread id
        self._admin: GroupAdmin | None = None
        self._changed = threading.Event()
        self._changed.set()  # the first poll rebalances
        self._closed = False
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        try:
            registry.register(self.zk, group_id, self.member)
            self._watch()
        except BaseException:
            self.close()
            raise

    # ---- watches (kazoo's thread: only flag the change) -------------------------------------
    def _watch(self) -> None:
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch

        def changed(*_: Any) -> bool:
            if self._closed:
                return False  # stop watching
            self._changed.set()
            self.client.wakeup()
            return True

        self.zk.ensure_path(zk_paths.BROKER_IDS)
        self.zk.ensure_path(zk_paths.BROKER_TOPICS)
        ChildrenWatch(self.zk, zk_paths.consumer_ids(self.group_id), changed)
        ChildrenWatch(self.zk, zk_paths.BROKER_IDS, changed)
        if self.static_topics:
            for t in self.static_topics:  # partitions added to a subscribed topic
                DataWatch(self.zk, zk_paths.topic(t), lambda *_: changed())
        else:
            ChildrenWatch(self.zk, zk_paths.BROKER_TOPICS, changed)

    # ---- rebalancing ------------------------------------------------------------------------
    def assignment(self) -> set[TopicPartition]:
        if not self.owned and self._changed.is_set():
            self.maybe_rebalance()
        return set(self.owned)

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | None = None,
                  exclude: str | None = None, partitions: Iterable[int] | None = None) -> None:
        return None  # the subscription is registered in ZooKeeper at construction

    def maybe_rebalance(self) -> None:
        if self._closed:
            return
        if self._changed.is_set():
            self._changed.clear()
            self._rebalance()
        elif self.enable_auto_commit and time.monotonic() >= self._next_auto_commit:
            with contextlib.suppress(ClientError, KafkaError, OSError):
                self.commit()

    def _partitions(self) -> dict[str, list[int]]:
        topics = registered_topics(self.zk)
        return {t: sorted(parts) for t, parts in topics.items()
                if (t in self.static_topics if self.static_topics
                    else not is_internal(t) and self.member.matches(t))}

    def _rebalance(self) -> None:
        """The seed's steps 1-9: compute our share, release what we own, claim the share
        (waiting for previous owners to release theirs)."""
        for attempt in range(1, self.rebalance_max_retries + 1):
            plan = registry.range_assignment(
                self._partitions(), registry.members(self.zk, self.group_id)
            ).get(self.consumer_id, {})
            if plan == self.owned and all(
                    registry.owner_of(self.zk, self.group_id, tp) == th
                    for tp, th in plan.items()):
                return  # nothing moved for us
            self._release()
            if self._claim(plan):
                self.owned = dict(plan)
                for tp in list(self.positions):
                    if tp not in self.owned:
                        del self.positions[tp]
                for tp in list(self.consumed):
                    if tp not in self.owned:
                        del self.consumed[tp]
                log.info("consumer %s of group %s owns %s", self.consumer_id, self.group_id,
                         sorted(self.owned))
                if self.on_assign is not None:
                    self.on_assign(set(self.owned))
                return
            log.info("rebalance attempt %d of %d for group %s: partitions still owned by "
                     "others; retrying", attempt, self.rebalance_max_retries, self.group_id)
            self._changed.clear()
        raise ConsumerRebalanceFailedError(
            f"consumer {self.consumer_id} could not claim its partitions of group "
            f"{self.group_id!r} after {self.rebalance_max_retries} attempts")

    def _release(self) -> None:
        if not self.owned:
            return
        if self.enable_auto_commit:
            with contextlib.suppress(ClientError, KafkaError, OSError):
                self.commit()
        self._drop_in_flight()
        revoked = set(self.owned)
        for tp, thread in self.owned.items():
            registry.release(self.zk, self.group_id, tp, thread)
        self.owned = {}
        self.positions.clear()
        self._deferred.clear()
        self.consumed.clear()
        if self.on_revoke is not None:
            self.on_revoke(revoked)

    def _claim(self, plan: dict[TopicPartition, str]) -> bool:
        """Claim every partition of `plan`, each retried until rebalance.backoff.ms; on
        failure release what was claimed."""
        claimed: list[TopicPartition] = []
        deadline = time.monotonic() + self.rebalance_backoff
        pending = sorted(plan)
        while pending:
            still = []
            for tp in pending:
                if registry.claim(self.zk, self.group_id, tp, plan[tp]):
                    claimed.append(tp)
                else:
                    still.append(tp)
            pending = still
            if pending:
                if time.monotonic() >= deadline:
                    for tp in claimed:
                        registry.release(self.zk, self.group_id, tp, plan[tp])
                    return False
                time.sleep(0.05)
        return True

    def rebalance_pending(self) -> bool:
        return self._changed.is_set() and not self._closed

    # ---- offsets ----------------------------------------------------------------------------
    def admin(self) -> GroupAdmin:
        from kafkactl.client.group.group_admin import GroupAdmin

        if self._admin is None:
            self._admin = GroupAdmin(self.client)
        return self._admin

    def committed(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Where consumption resumes: ZooKeeper's offsets, the broker's, or with dual commit
        during a migration the larger of the two (-1: none)."""
        tps = list(tps)
        out = {tp: -1 for tp in tps}
        if self.offsets_storage == "zookeeper" or self.dual_commit:
            for tp, stored in registry.read_offsets(self.zk, self.group_id, tps).items():
                if stored.malformed:  # Kafka's consumer failed on it (NumberFormatException)
                    raise MalformedOffsetError(
                        f"malformed offset in znode {stored.path} (ZooKeeper at "
                        f"{self.connect_string}): {stored.error}; fix the znode or delete "
                        "it (then auto.offset.reset applies)")
                if stored.offset is not None:
                    out[tp] = stored.offset
                else:  # negative: no position, as Kafka's consumer reset it
                    log.warning("ignoring offset %s of %s-%d in ZooKeeper (%s): %s; "
                                "auto.offset.reset applies", stored.raw, tp[0], tp[1],
                                stored.path, stored.error)
        if self.offsets_storage == "kafka":
            for tp, off in self.admin().fetch_offsets(self.group_id, tps).items():
                if tp in out and off > out[tp]:
                    out[tp] = off
        return out

    def commit(self, offsets: dict[TopicPartition, int] | None = None) -> None:
        """Commit `offsets` (default: the consumed offset of every owned partition)."""
        if offsets is None:
            if self.before_commit is not None:
                self.before_commit()
            offsets = {tp: off for tp, off in self.consumed.items() if tp in self.owned}
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval
        if not offsets:
            return
        if self.offsets_storage == "kafka":
            errors = self.admin().commit_offsets(self.group_id, offsets)
            bad = {tp: code for tp, code in errors.items() if code}
            if bad:
                raise ClientError(f"OffsetCommit for group {self.group_id!r} failed: {bad}")
        if self.offsets_storage == "zookeeper" or self.dual_commit:
            registry.write_offsets(self.zk, self.group_id, offsets)

    # ---- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        try:
            with contextlib.suppress(ClientError, KafkaError, OSError):
                self._release()
        finally:
            self._closed = True
            with contextlib.suppress(Exception):
                zkconn.close(self.zk)
            super().close()
