"""TargetTopics: the target topic of each source topic, created when missing.

A missing target topic is created with the source topic's partition count and the target
cluster's defaults (replication factor and configs), or with the source topic's own configs
when asked. Records keep their source partition when the target topic has as many
partitions; otherwise the producer's partitioner places them by key.

The target's partition counts are looked at again every topic refresh (one Metadata request
for all the target topics, never on the copy path) and when a source topic grows: a target
the operator gave as many partitions as its source gets records in their source partition
again, and one that lost partitions (deleted, then created again by the target's
auto.create.topics.enable) stops the mirror at once, saying so (TargetTopicChanged), instead
of leaving the records of the vanished partitions stuck for delivery.timeout.ms.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from kafkactl.client.admin import AdminClient
from kafkactl.client.errors import KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable
from kafkactl.protocol.errors import ErrorCode, error_for

log = logging.getLogger("kafkactl.mirror")

# DescribeConfigs config_source of a topic config set on the topic itself.
DYNAMIC_TOPIC_CONFIG = 1
# Source topic configs never copied (MirrorMaker 2's DefaultConfigPropertyFilter): they
# describe the source cluster's replicas and clocks, not the data; min.insync.replicas=2 on
# a target with fewer replicas would refuse every acks=all write there.
NOT_COPIED = frozenset({
    "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms", "message.timestamp.type",
    "unclean.leader.election.enable", "min.insync.replicas",
})
AUTHORIZATION_FAILED = (ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
# the target not answering a look at its partition counts: looked at again later (the
# producer's outage notices say the target is down)
UNREACHABLE = (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable, OSError)


class TargetTopicChanged(RuntimeError):
    """A target topic lost partitions (or vanished) while the mirror wrote to it: it was
    deleted, and maybe created again. The mirror stops: records sent to the partitions
    that are gone cannot be delivered, and those copied before are gone from the target."""


@dataclass(frozen=True)
class TargetTopic:
    name: str
    partitions: int
    keep_partition: bool  # same partition count: record i of source partition p -> p


def by_key_warning(source_topic: str, source_partitions: int, target: str,
                   target_partitions: int, now: bool) -> str:
    """The warning of a target topic whose partition count differs from its source's."""
    return (f"source topic {source_topic} has {source_partitions} partitions"
            f"{' now' if now else ''}, its target {target} {target_partitions}: its records "
            f"are partitioned by key{' from now on' if now else ''} (add partitions to the "
            f"target with `kafkactl topics alter -t {target} --partitions "
            f"{source_partitions}` to keep partitions: the mirror notices it)")


class TargetTopics:
    """Thread-safe cache of target topics (every stream thread asks it)."""

    def __init__(self, target: AdminClient, source: AdminClient,
                 rename: Callable[[str], str], *, copy_configs: bool = False,
                 recheck_s: float = 5.0, target_label: str = "the target cluster",
                 principal: str = "NAME") -> None:
        self.target = target
        self.source = source
        self.rename = rename
        self.copy_configs = copy_configs
        self.recheck_s = recheck_s  # how often the target's partition counts are looked at
        self.target_label = target_label
        self.principal = principal  # the producer's, as the ACL advice names it
        self._lock = threading.Lock()
        self._topics: dict[str, TargetTopic] = {}
        self._sources: dict[str, int] = {}  # source topic -> its largest partition count seen
        self._next_check = time.monotonic() + recheck_s
        # the source topics asked for with `recheck` since the last look (those the topic
        # refresh still selects: a target topic deleted after its source was is no news)
        self._asked: set[str] = set()
        self.created: list[str] = []

    def get(self, source_topic: str, source_partitions: int, *,
            recheck: bool = True) -> TargetTopic:
        """The target of `source_topic`, made when missing. A source that gained
        partitions since (the target keeps its count) is copied by key from then on, as a
        mirror started now would copy it: source partition p -> p would name a partition
        the target does not have; once the target has as many partitions again, records
        keep their partition again. `recheck` (the topic refresh's call, not the copy
        path's): every `recheck_s` the target's partition counts are looked up (one
        request for all), which raises TargetTopicChanged for one that lost partitions."""
        if recheck:
            self._asked.add(source_topic)
        found = self._topics.get(source_topic)
        if found is not None and not (recheck and time.monotonic() >= self._next_check):
            if found.keep_partition:
                if source_partitions <= found.partitions:
                    return found
            elif source_partitions <= self._sources.get(source_topic, 0):
                return found
        with self._lock:
            found = self._topics.get(source_topic)
            if found is None:
                self._sources[source_topic] = source_partitions
                found = self._topics[source_topic] = self._ensure(source_topic,
                                                                  source_partitions)
                return found
            if source_partitions > self._sources.get(source_topic, 0):
                self._sources[source_topic] = source_partitions
            if recheck and time.monotonic() >= self._next_check:
                self._recheck_all()
                found = self._topics[source_topic]
            n = self._sources[source_topic]
            if found.keep_partition and n > found.partitions:
                # the source grew past its target: has the target grown too? (unknown: by
                # key, until the next look)
                found = self._update(source_topic, found,
                                     self._target_count(found.name, found.partitions))
            return found

    def verify(self, source_topic: str) -> None:
        """The producer said a partition of `source_topic`'s target does not exist: look
        the target up now (TargetTopicChanged when it lost partitions)."""
        with self._lock:
            found = self._topics.get(source_topic)
            if found is not None:
                self._update(source_topic, found, self._target_count(found.name, 0))

    def _recheck_all(self) -> None:
        """Every target topic's partition count, in one request (the caller holds the
        lock)."""
        self._next_check = time.monotonic() + self.recheck_s
        asked, self._asked = self._asked, set()
        checked = {t: found for t, found in self._topics.items() if t in asked}
        names = sorted({found.name for found in checked.values()})
        if not names:
            return
        try:
            cluster = self.target.client.refresh_metadata(names)
        except UNREACHABLE as e:
            log.debug("looking up the target topics: %s", e)
            return
        for source_topic, found in checked.items():
            tm = cluster.topics.get(found.name)
            if tm is None:
                continue
            if tm.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise self._deleted(found)
            if tm.error_code or not tm.partitions:
                continue  # (being created, not authorized...: looked at next time)
            self._update(source_topic, found, len(tm.partitions))

    def _target_count(self, name: str, unknown: int) -> int:
        """A target topic's partition count as the target cluster says now (`unknown`
        when it does not say: not answering, the topic being created...)."""
        try:
            tm = self.target.client.refresh_metadata([name]).topics.get(name)
        except UNREACHABLE as e:
            log.debug("looking up target topic %s: %s", name, e)
            return unknown
        if tm is not None and tm.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            raise self._deleted(TargetTopic(name, 0, False))
        if tm is None or tm.error_code or not tm.partitions:
            return unknown
        return len(tm.partitions)

    def _update(self, source_topic: str, found: TargetTopic, count: int) -> TargetTopic:
        """`found` with the target's partition count `count` (0: unknown, unchanged);
        TargetTopicChanged when the target has fewer partitions than before."""
        if count <= 0:
            return found
        if count < found.partitions:
            raise TargetTopicChanged(
                f"the target topic {found.name} has {count} partition(s) now, "
                f"{found.partitions} before: it was deleted and created again while the "
                f"mirror ran (by {self.target_label}'s auto.create.topics.enable, or by "
                "hand). The records copied into it before are gone from the target, and "
                f"those sent to its partitions {count}-{found.partitions - 1} cannot be "
                "delivered: the mirror stops (the source offsets are committed up to what "
                "the target acknowledged). Give it its partitions back (kafkactl topics "
                f"alter -t {found.name} --partitions {self._sources[source_topic]}) and "
                "restart the mirror; to copy the lost records again, reset the group's "
                "offsets first (kafkactl offsets reset)")
        n = self._sources[source_topic]
        keep = count >= n if found.keep_partition else count == n
        if count == found.partitions and keep == found.keep_partition:
            return found
        new = self._topics[source_topic] = TargetTopic(found.name, count, keep)
        if keep and not found.keep_partition:
            log.warning("target topic %s has %d partitions now, as its source %s: its "
                        "records keep their source partition again", found.name, count,
                        source_topic)
        elif not keep and found.keep_partition:
            log.warning("%s", by_key_warning(source_topic, n, found.name, count, True))
        return new

    def _deleted(self, found: TargetTopic) -> TargetTopicChanged:
        return TargetTopicChanged(
            f"the target topic {found.name} was deleted while the mirror ran: the records "
            "copied into it are gone from the target, and those in flight cannot be "
            "delivered; the mirror stops (the source offsets are committed up to what the "
            "target acknowledged). Restart it to create the topic again; to copy the lost "
            "records again, reset the group's offsets first (kafkactl offsets reset)")

    def _ensure(self, source_topic: str, source_partitions: int) -> TargetTopic:
        name = self.rename(source_topic)
        existing = self.target.client.refresh_metadata([name]).topics.get(name)
        code = existing.error_code if existing is not None else 0
        if code in AUTHORIZATION_FAILED:
            raise error_for(code)(
                f"not authorized to describe the target topic {name!r} in "
                f"{self.target_label} ({ErrorCode(code).name}): the mirror's producer "
                f"principal needs Describe and Write on topic {name} there (and Create, "
                "to let the mirror create it): `kafkactl acls add -b ... --allow-principal "
                f"User:{self.principal} --operation Describe --operation Write --topic "
                f"{name}`")
        if existing is None or not existing.partitions:
            configs = self._source_configs(source_topic) if self.copy_configs else {}
            errors = self.target.create_topics({name: (source_partitions, -1, configs)})
            err = errors.get(name)
            if err is not None and err.code in AUTHORIZATION_FAILED:
                raise error_for(err.code)(
                    f"not authorized to create the target topic {name!r} in "
                    f"{self.target_label} ({err.code.name}): create it there first (with "
                    f"{source_partitions} partitions, to keep partitions), or grant the "
                    "mirror's producer principal Create on it (`kafkactl acls add -b ... "
                    f"--allow-principal User:{self.principal} --operation Create --topic "
                    f"{name}`)")
            if err is not None and err.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise err
            if err is None:
                self.created.append(name)
                log.info("created target topic %s with %d partitions", name,
                         source_partitions)
            partitions = self._wait_for_partitions(name, source_partitions)
        else:
            partitions = len(existing.partitions)
        if partitions != source_partitions:
            log.warning("%s", by_key_warning(source_topic, source_partitions, name,
                                             partitions, False))
        return TargetTopic(name, partitions, partitions == source_partitions)

    def _wait_for_partitions(self, name: str, expected: int) -> int:
        topic = None
        deadline = time.monotonic() + 5.0
        while True:
            topic = self.target.list_topics().get(name)
            if topic is not None and topic.partitions and all(
                    p.leader >= 0 for p in topic.partitions.values()):
                return len(topic.partitions)
            if time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        return len(topic.partitions) if topic is not None and topic.partitions else expected

    def _source_configs(self, source_topic: str) -> dict[str, str]:
        entries = self.source.describe_configs(source_topic)
        return {k: e.value for k, e in entries.items()
                if e.value is not None and e.source == DYNAMIC_TOPIC_CONFIG
                and not e.read_only and not e.sensitive and k not in NOT_COPIED}

    def forget(self, source_topic: str) -> None:
        with self._lock:
            self._topics.pop(source_topic, None)
            self._sources.pop(source_topic, None)

