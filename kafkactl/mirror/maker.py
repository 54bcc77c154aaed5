"""MirrorMaker: N MirrorStreams (group members) feeding one idempotent acks=all producer.

    maker = MirrorMaker(MirrorConfig(source="a:9092", target="b:9092", whitelist="orders.*"))
    maker.start()          # connects; raises if a cluster cannot be reached
    maker.wait(timeout)    # True once stopped (stop(), a failure, or an error)
    maker.stop(); maker.close()

The status (`status()`) counts per source topic the records the target acknowledged and the
ones skipped, and the lag: records in the source the target does not have yet.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kafkactl.client.admin import AdminClient
from kafkactl.client.consumer import TopicFilter
from kafkactl.client.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    UnknownTopicError,
)
from kafkactl.client.producer import Producer
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.mirror.config import MirrorConfig, MirrorConfigError, producer_kwargs
from kafkactl.mirror.progress import Entry, acknowledge, first_record, refuse
from kafkactl.mirror.status import MirrorStatus, RateMeter, TopicStatus
from kafkactl.mirror.stream import MirrorStream, SendFailure, is_transient
from kafkactl.mirror.subscription import SourceTopics
from kafkactl.mirror.target_outage import TargetOutage
from kafkactl.mirror.topics import TargetTopicChanged, TargetTopics
from kafkactl.protocol.errors import ErrorCode, KafkaError, error_for

log = logging.getLogger("kafkactl.mirror")

__all__ = ["ClusterUnreachable", "MirrorLoopError", "MirrorMaker", "SendFailure"]


class MirrorLoopError(MirrorConfigError):
    """The source and the target are one cluster, and a topic mirrored would be read back:
    copied onto itself, or into a topic the mirror also reads."""


class OneClusterFilter(TopicFilter):
    """The topic selection (`inner`) of a mirror whose source and target are one cluster:
    a topic is mirrored only under another name (--rename), and the topics it is renamed
    to are the mirror's output, never read back (MirrorMaker 2 never loops either: its
    remote topics are named after the source cluster, and it skips the ones of its
    target)."""

    def __init__(self, inner: TopicFilter, renames: dict[str, str]) -> None:
        super().__init__(inner.topics, inner.pattern, inner.exclude, inner.include_internal)
        self.inner = inner
        self.renames = dict(renames)
        self._outputs = set(renames.values())
        self._told: set[str] = set()

    def matches(self, topic: str, internal: bool = False) -> bool:
        if topic in self._outputs or not self.inner.matches(topic, internal):
            return False
        if self.renames.get(topic, topic) == topic:
            if topic not in self._told:  # (a new topic the whitelist matches)
                self._told.add(topic)
                log.warning("not mirroring topic %s: the source and the target are one "
                            "cluster, and it has no --rename (it would be copied onto "
                            "itself)", topic)
            return False
        return True


def same_cluster(source: AdminClient, target: AdminClient) -> str | None:
    """The cluster id (or the brokers) when `source` and `target` reach one cluster
    (whatever the bootstrap addresses they were given), else None."""
    s, t = source.client.cluster, target.client.cluster
    if s.cluster_id and t.cluster_id:
        return f"cluster id {s.cluster_id}" if s.cluster_id == t.cluster_id else None
    s_brokers = {(b.host, b.port) for b in s.brokers.values()}
    shared = s_brokers & {(b.host, b.port) for b in t.brokers.values()}
    return ("brokers " + ", ".join(f"{h}:{p}" for h, p in sorted(shared))) if shared else None


def producer_id_refused(error: BaseException) -> bool:
    """The target refused the mirror's producer an id (InitProducerId:
    CLUSTER_AUTHORIZATION_FAILED)."""
    return (isinstance(error, KafkaError)
            and error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            and "InitProducerId" in str(error))


class ClusterUnreachable(ConnectionError):
    """No broker of the source or target cluster answered at start."""

    def __init__(self, which: str, bootstrap: str, cause: str) -> None:
        super().__init__(f"cannot reach the {which} cluster at {bootstrap}: no broker "
                         f"answered ({cause})")
        self.which = which


class MirrorMaker:
    def __init__(self, config: MirrorConfig) -> None:
        config.validate()
        self.config = config
        self.lock = threading.Lock()  # the trackers' and counters' lock
        self.stopping = threading.Event()
        self.stopped = threading.Event()
        self.failure: SendFailure | None = None
        self.error: BaseException | None = None
        self.mirrored: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        self.streams: list[MirrorStream] = []
        self.producer: Producer | None = None
        self.topics: TargetTopics | None = None
        self.source_topics: SourceTopics | None = None
        self._admins: list[AdminClient] = []
        self._rates = RateMeter()
        self._state = "starting"
        self.outage: TargetOutage | None = None
        # the producer is being closed: a batch failing now was not delivered before the
        # stop (its offsets stay uncommitted), not refused
        self._closing = False
        self.undelivered = 0
        self._abandon = False  # (TargetTopicChanged) a stop does not wait for the target

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Connect to both clusters (NoBrokersAvailable names the one that did not answer),
        then start the streams."""
        source = self._connect("source")
        target = self._connect("target")
        one_cluster = self._check_no_loop(source, target)
        self._check_named_topics(source)
        self.topics = TargetTopics(target, source, self.config.target_topic,
                                   copy_configs=self.config.copy_topic_configs,
                                   recheck_s=self.config.topic_refresh_ms / 1000,
                                   target_label=f"the target cluster {self.config.target}",
                                   principal=self.config.producer_properties.get(
                                       "sasl.username") or "NAME")
        topic_filter = self.config.topic_filter()
        if one_cluster:
            topic_filter = OneClusterFilter(topic_filter, self.config.renames)
        self.source_topics = SourceTopics(
            self._connect("source"), topic_filter,
            self.topics, self.config.topic_refresh_ms / 1000, self.stopping, is_transient,
            self._on_error)
        # linger 1 ms: re-batched small source batches wait less (p50 10 -> 7 ms, p99 19 ->
        # 14 ms at 10k records/s); copied batches are sent at once whatever the linger.
        if self.config.exactly_once:
            from kafkactl.mirror.exactly_once import ExactlyOnceStream

            for i in range(self.config.num_streams):  # each with a transactional producer
                self.streams.append(ExactlyOnceStream(
                    i, self.config, None, self.topics, self.source_topics, self.lock,
                    self.stopping, self._on_failure, self._on_skip, self._on_error,
                    on_committed=self._on_committed))
        else:
            kwargs: dict[str, Any] = {"client_id": "kafkactl-mirror", "linger_ms": 1,
                                      "batch_size": 262144}
            kwargs.update(producer_kwargs(self.config.producer_properties))
            self.producer = Producer(self.config.target, **kwargs)
            self.producer.add_batch_callback(self._on_batch)
            self.outage = TargetOutage(self.producer)
            for i in range(self.config.num_streams):
                self.streams.append(MirrorStream(
                    i, self.config, self.producer, self.topics, self.source_topics,
                    self.lock, self.stopping, self._on_failure, self._on_skip,
                    self._on_error))
                self.streams[-1].outage = self.outage
        self._state = "running"
        self.source_topics.start()
        for stream in self.streams:
            stream.start()
        threading.Thread(target=self._watch, name="mirror-watch", daemon=True).start()

    def check(self) -> None:
        """What start() checks first (both clusters answer, the named topics exist), then
        disconnect: a parent of worker processes does this before starting them."""
        try:
            source = self._connect("source")
            target = self._connect("target")
            self._check_no_loop(source, target)
            self._check_named_topics(source)
        finally:
            for admin in self._admins:
                admin.close()
            self._admins.clear()

    def _connect(self, which: str) -> AdminClient:
        """An admin client of the source or the target cluster, with that side's security."""
        if which == "source":
            bootstrap, security = self.config.source, self.config.source_security()
        else:
            bootstrap, security = self.config.target, self.config.target_security()
        admin = AdminClient(bootstrap, client_id="kafkactl-mirror-admin", security=security)
        try:
            admin.client.refresh_metadata([], timeout=admin.client.connect_timeout)
        except (NoBrokersAvailable, KafkaTimeoutError) as e:
            admin.close()
            raise ClusterUnreachable(which, bootstrap, _first_cause(e)) from None
        self._admins.append(admin)
        return admin

    def _check_named_topics(self, source: AdminClient) -> None:
        """The topics named (--topic) exist in the source, and the mirror may read them
        (a topic the principal may not Describe is left out of a listing of all topics:
        asked for by name, the broker says TOPIC_AUTHORIZATION_FAILED)."""
        if not self.config.topics:
            return
        names = list(dict.fromkeys(self.config.topics))
        found = source.client.refresh_metadata(names).topics
        denied = [t for t in names if t in found
                  and found[t].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        if denied:
            who = self.config.consumer_properties.get("sasl.username")
            raise error_for(ErrorCode.TOPIC_AUTHORIZATION_FAILED)(
                f"not authorized to describe topic {', '.join(map(repr, denied))} in the "
                f"source cluster {self.config.source} (TOPIC_AUTHORIZATION_FAILED): the "
                "mirror's consumer principal needs Describe and Read on it, and Read on "
                f"group {self.config.group} (kafkactl acls add -b {self.config.source} "
                "--allow-principal "
                f"User:{who or 'NAME'} --operation Describe --operation Read --topic "
                f"{denied[0]})")
        missing = [t for t in names if t not in found
                   or found[t].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        if missing and self.config.whitelist is None:
            raise UnknownTopicError(f"topic {', '.join(map(repr, missing))} does not exist in the "
                           f"source cluster {self.config.source}")

    def _check_no_loop(self, source: AdminClient, target: AdminClient) -> bool:
        """True when the source and the target are one cluster (compared by cluster id,
        not by address); MirrorLoopError when a topic mirrored would be read back: copied
        onto itself, or named (--topic) though another topic is renamed to it."""
        which = same_cluster(source, target)
        if which is None:
            return False
        config = self.config
        outputs = {dst: src for src, dst in config.renames.items()}
        problem, remedy = None, ""
        for t in config.topics:
            if t in outputs and outputs[t] != t:
                problem = (f"topic {t} is where it copies topic {outputs[t]} (--rename "
                           f"{outputs[t]}:{t}), so it would read its own copies back")
                remedy = f"do not name topic {t} with --topic, or "
                break
        if problem is None:
            topic_filter = config.topic_filter()
            selected = list(dict.fromkeys(config.topics)) + [
                t for t, tm in source.list_topics().items()
                if tm.partitions and t not in config.topics and t not in outputs
                and topic_filter.matches(t, tm.is_internal)]
            onto = [t for t in selected if config.target_topic(t) == t]
            if onto:
                problem = (f"topic {', '.join(onto)} would be copied onto itself, its "
                           "copies read back and copied again without end")
                remedy = (f"give each topic mirrored another name in it (e.g. --rename "
                          f"{onto[0]}:{onto[0]}.copy; the topics renamed to are never read), "
                          "or ")
        if problem is None:
            return True
        raise MirrorLoopError(
            f"--source and --target are the same cluster ({which}): {problem}. "
            f"{remedy[:1].upper()}{remedy[1:]}mirror into another cluster")

    def _watch(self) -> None:
        for stream in self.streams:
            stream.thread.join()
        self.stopping.set()
        self._state = "failed" if self.failure or self.error else "stopped"
        self.stopped.set()

    def stop(self) -> None:
        """Finish the records in flight, commit, leave the group (SIGTERM)."""
        if not self.stopping.is_set():
            self._state = "stopping"
        self.stopping.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.stopped.wait(timeout)

    def close(self) -> None:
        self.stop()
        if self.streams:
            self.stopped.wait(60.0)
        if self.producer is not None:
            self._closing = True
            down = self._abandon or (self.outage is not None and self.outage.unreachable())
            self.producer.close(0.0 if down else 10.0)
        for admin in self._admins:
            admin.close()

    # ---- callbacks ----------------------------------------------------------------------

    def _on_batch(self, batch: ProducerBatch, base_offset: int,
                  error: BaseException | None) -> None:
        """The producer's verdict on one target batch (its sender thread)."""
        entries: list[Entry] = batch.entries
        if not entries:
            return
        if error is not None and self._closing:
            with self.lock:
                self.undelivered += len(entries)
            return
        if error is not None and self.config.abort_on_send_failure:
            with self.lock:  # the source offsets stop there (committed up to it at the stop)
                refuse(entries, batch.first_index)
            chunk, offset = first_record(entries, batch.first_index)
            topic, partition = chunk.partition.tp
            text = (self._producer_id_advice() if producer_id_refused(error)
                    else f"{type(error).__name__}: {error}")
            self._on_failure(SendFailure(
                topic, partition, offset, batch.topic, text,
                undelivered=isinstance(error, (KafkaTimeoutError, KafkaConnectionError))))
            return
        counts = self.skipped if error is not None else self.mirrored
        with self.lock:
            for chunk, n in acknowledge(entries).items():
                topic = chunk.partition.tp[0]
                counts[topic] = counts.get(topic, 0) + n
        if error is not None:
            chunk, offset = first_record(entries, batch.first_index)
            log.warning("skipped %d record(s) from offset %d of %s-%d: %s", len(entries),
                        offset, *chunk.partition.tp, error)

    def _on_committed(self, counts: dict[str, int]) -> None:
        """An exactly-once stream committed a transaction with these records per topic."""
        with self.lock:
            for topic, n in counts.items():
                self.mirrored[topic] = self.mirrored.get(topic, 0) + n

    def _on_failure(self, failure: SendFailure) -> None:
        if self.failure is None:
            self.failure = failure  # the caller reports it (status, exit message)
        self.stopping.set()

    def _on_skip(self, topic: str, n: int) -> None:
        with self.lock:
            self.skipped[topic] = self.skipped.get(topic, 0) + n

    def _on_error(self, error: BaseException) -> None:
        if producer_id_refused(error):
            error = error_for(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)(
                self._producer_id_advice())
        if isinstance(error, TargetTopicChanged):
            # the records in flight to the partitions that are gone are never answered: a
            # stop does not wait for them (their source offsets stay uncommitted)
            self._abandon = True
            for stream in self.streams:
                stream.settle_timeout = 0.0
        if self.error is None:
            self.error = error
        self.stopping.set()

    def _producer_id_advice(self) -> str:
        """What to do when the target refused the producer an id: the mirror needs an
        idempotent producer, so the ACL, not enable.idempotence=false."""
        who = self.config.producer_properties.get("sasl.username")
        return (f"the target cluster {self.config.target} refused the mirror's producer "
                "an id (InitProducerId: CLUSTER_AUTHORIZATION_FAILED): the mirror writes "
                "with an idempotent producer (it loses nothing on retries, so "
                "enable.idempotence stays true), which needs Write on the target topics, or "
                "IdempotentWrite on the target cluster, for the producer's principal: "
                f"kafkactl acls add -b {self.config.target} --allow-principal "
                f"User:{who or 'NAME'} --operation Write --topic TOPIC (or --operation "
                "IdempotentWrite --cluster)")

    # ---- status -------------------------------------------------------------------------

    def status(self) -> MirrorStatus:
        out = MirrorStatus(self._state, self.config.source, self.config.target,
                           self.config.group, updated_ms=int(time.time() * 1000))
        acked: dict[tuple[str, int], int] = {}
        high: dict[tuple[str, int], int] = {}
        owned: set[tuple[str, int]] = set()
        for stream in self.streams:
            # a partition nothing was copied from since it was assigned (an idle one after
            # a rebalance): the target has everything before where it started
            acked.update(stream.start_offsets)
            acked.update(stream.tracker.acked_offsets())
            owned |= stream.owned
            consumer = stream.consumer
            if consumer is not None:
                high.update(dict(consumer.high_watermarks))
        with self.lock:
            mirrored, skipped = dict(self.mirrored), dict(self.skipped)
        names = set(mirrored) | set(skipped) | {t for t, _ in owned}
        for topic in sorted(names):
            ts = TopicStatus(topic, self.config.target_topic(topic),
                             partitions=sum(1 for t, _ in owned if t == topic),
                             mirrored=mirrored.get(topic, 0), skipped=skipped.get(topic, 0))
            ts.records_per_sec = round(self._rates.update(topic, ts.mirrored), 1)
            lags = [high[tp] - acked[tp] for tp in owned
                    if tp[0] == topic and tp in high and tp in acked]
            ts.lag = sum(max(0, lag) for lag in lags) if lags else None
            out.topics[topic] = ts
        out.mirrored = sum(mirrored.values())
        out.skipped = sum(skipped.values())
        out.records_per_sec = round(sum(t.records_per_sec for t in out.topics.values()), 1)
        lags = [t.lag for t in out.topics.values() if t.lag is not None]
        out.lag = sum(lags) if lags else None
        if self.source_topics is not None:
            retries = self.source_topics.retries
            with retries.lock:
                out.source_lookup_failures = retries.attempts
                out.source_lookup_error = retries.last_error
        if self.failure is not None:
            out.error = self.failure.message()
        elif self.error is not None:
            out.error = str(self.error)
        elif self.undelivered:
            where = self.outage.where() if self.outage is not None else "the target"
            out.error = (f"stopped with {self.undelivered} record(s) not delivered to the "
                         f"target ({where} did not answer); their source offsets are not "
                         "committed: the next run copies them")
        return out


def _first_cause(error: BaseException) -> str:
    """The connection error itself, without the client's advice on -b/--bootstrap-server."""
    text = str(error)
    start, end = text.find(" ("), text.rfind(")")
    return text[start + 2:end] if 0 <= start < end else text
