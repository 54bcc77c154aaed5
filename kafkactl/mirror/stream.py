"""MirrorStream: one consumer-group member copying its partitions into the target.

Each fetched chunk of a source partition becomes one SentChunk; every record goes to the
shared producer with (chunk, source offset) as its entry, and the producer's batch callback
acknowledges it (MirrorMaker._on_batch). Offsets are committed every commit interval, and
before partitions are revoked: the producer is flushed first, so a rebalance hands over
exactly what the target has. Partitions lost (the stream was expelled from the group, or
left it after max.poll.interval.ms without a poll) are forgotten without a commit: another
member may own them by now; assigned again, they resume from the group's commits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkactl.client.errors import (
    REJOIN_GROUP,
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    RecordTooLargeError,
    UnknownTopicError,
)
from kafkactl.client.fetcher import PartitionFetch
from kafkactl.client.group import CommitFailedError, GroupConsumer
from kafkactl.client.producer import (
    RECORD_OVERHEAD,
    PartitionNotFoundError,
    Producer,
    RecordSizeError,
)
from kafkactl.mirror.config import MirrorConfig, consumer_kwargs, stream_client_id
from kafkactl.mirror.progress import CopiedBatch, ProgressTracker, SentChunk
from kafkactl.mirror.retry import ExponentialBackoff, RetryNotices
from kafkactl.mirror.subscription import SourceTopics
from kafkactl.mirror.target_outage import TargetOutage, settle
from kafkactl.mirror.topics import TargetTopics
from kafkactl.protocol.errors import RETRIABLE_CODES, ErrorCode, KafkaError
from kafkactl.record.batch import RecordBatch, TimestampType
from kafkactl.record.codecs import decompress

log = logging.getLogger("kafkactl.mirror")

TopicPartition = tuple[str, int]
# The copy path sends each source batch as a target batch of its own, and the producer
# has at most a few batches of a partition in flight; so small source batches (a producer
# with a short linger at a modest rate) are re-batched by the record path instead, or they
# queue behind each other (p99 latency at 10k records/s under CPU load).
COPY_MIN_RECORDS = 64  # on average per batch
COPY_MIN_BYTES = 16384
TRANSIENT = (KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable, CommitFailedError,
             UnknownTopicError, OSError)


def refusal_text(error: BaseException, abort_on_send_failure: bool = True) -> str:
    """What the mirror says of a record its producer refused before sending it: the
    error, and for one too large (RecordSizeError) the settings that let it through."""
    text = str(error)
    if not isinstance(error, RecordSizeError):
        return text
    at_least = error.size + RECORD_OVERHEAD
    if error.setting == "buffer.memory":
        text += (f": raise the mirror's producer buffer.memory (--producer-property "
                 f"buffer.memory={at_least} or more)")
    else:
        text += (f": raise the mirror's producer max.request.size (--producer-property "
                 f"max.request.size={at_least} or more) and the target topic's "
                 "max.message.bytes as much")
    if abort_on_send_failure:
        text += ", or skip such records (--no-abort-on-send-failure)"
    return text


def is_transient(error: BaseException) -> bool:
    """An error the mirror waits out (a cluster restarting, a rebalance); not one that
    fenced the stream's group member (FENCED_INSTANCE_ID: another member took over its
    group.instance.id), which ends the mirror as it ends `kafkactl consume -G`."""
    if isinstance(error, TRANSIENT):
        return True
    return isinstance(error, KafkaError) and (error.code in RETRIABLE_CODES
                                              or error.code in REJOIN_GROUP)


def is_fenced(error: BaseException | None) -> bool:
    """The stream's group member was fenced: another member took over its
    group.instance.id. The partitions are that member's now: nothing more is committed."""
    return isinstance(error, KafkaError) and error.code == ErrorCode.FENCED_INSTANCE_ID


@dataclass(frozen=True)
class SendFailure:
    """A record the target refused for good."""

    topic: str
    partition: int
    offset: int
    target_topic: str
    error: str
    undelivered: bool = False  # not refused: the target could not be reached in time

    def message(self) -> str:
        what = "could not deliver" if self.undelivered else "the target refused"
        return (f"{what} the record at offset {self.offset} of "
                f"{self.topic}-{self.partition} (target topic {self.target_topic}): "
                f"{self.error}")


class MirrorStream:
    """One group member (a thread of a MirrorMaker)."""

    def __init__(self, index: int, config: MirrorConfig, producer: Producer,
                 topics: TargetTopics, source_topics: SourceTopics, lock: threading.Lock,
                 stop: threading.Event,
                 on_failure: Callable[[SendFailure], None],
                 on_skip: Callable[[str, int], None],
                 on_error: Callable[[BaseException], None]) -> None:
        self.index = index
        self.config = config
        self.producer = producer
        self.topics = topics
        self.source_topics = source_topics
        self.tracker = ProgressTracker(lock)
        self.stop = stop
        self.on_failure = on_failure
        self.on_skip = on_skip
        self.on_error = on_error
        self.subscribed: list[str] | None = None
        self.subscribed_layout: tuple[tuple[str, int], ...] | None = None
        self.consumer: GroupConsumer | None = None
        self.owned: set[TopicPartition] = set()
        self.thread = threading.Thread(target=self.run, name=f"mirror-stream-{index}",
                                       daemon=True)
        self._next_commit = 0.0
        self.fenced = False  # (is_fenced): nothing is committed any more
        self.outage: TargetOutage | None = None  # the target's reachability (the maker's)
        # how long a stop waits for the target's answers (0: records in flight cannot be
        # delivered, e.g. their target partitions are gone)
        self.settle_timeout = 30.0
        # where each owned partition with nothing copied since it was assigned stands (its
        # committed offset, or auto.offset.reset's): the status's lag of an idle partition
        self.start_offsets: dict[TopicPartition, int] = {}

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def run(self) -> None:
        try:
            self.consumer = self._new_consumer()
            # (backing off as Kafka's clients do, said once, then every 30 s)
            retries = RetryNotices(f"stream {self.index}",
                                   ExponentialBackoff(self.consumer.client.retry_backoff))
            while not self.stop.is_set():
                try:
                    self._step()
                except Exception as e:
                    if not is_transient(e):
                        raise
                    self.stop.wait(retries.failed(e))
                else:
                    retries.succeeded()
        except Exception as e:
            self.fenced = is_fenced(e)
            self.on_error(e)
        finally:
            self._shutdown()

    def _new_consumer(self) -> GroupConsumer:
        kwargs: dict[str, Any] = {"auto_offset_reset": "earliest"}
        kwargs.update(consumer_kwargs(self.config.consumer_properties))
        kwargs["client_id"] = self.client_id(self.config.consumer_properties)
        consumer = GroupConsumer(
            *self.config.topics, group_id=self.config.group,
            bootstrap_servers=self.config.source, pattern=self.config.whitelist,
            enable_auto_commit=False, on_assign=self._on_assign, on_revoke=self._on_revoke,
            on_lost=self._on_lost, **kwargs)
        consumer.subscribe(())  # nothing until SourceTopics says what matches
        return consumer

    def client_id(self, props: dict[str, str]) -> str:
        """This stream's client.id, given a side's properties (stream_client_id)."""
        return stream_client_id(props, self.config.stream_base + self.index,
                                self.config.num_streams)

    def _step(self) -> None:
        consumer = self.consumer
        assert consumer is not None
        if self.subscribed is None:  # no fetch to wait on yet: wait for the topics
            self.source_topics.known.wait(0.2)
        wanted, layout = self.source_topics.wanted, self.source_topics.layout
        if wanted is not None and (wanted != self.subscribed
                                   or layout != self.subscribed_layout):
            consumer.subscribe(wanted)  # rejoins: new topics, or partitions added
            self.subscribed, self.subscribed_layout = wanted, layout
        if len(self.tracker.partitions) < len(self.owned):
            self._note_start_offsets(consumer)
        fetches = consumer.poll_fetches(0.2)
        self._fetched(fetches)
        for pf in fetches:
            try:
                self._copy(pf)
            except PartitionNotFoundError:
                # the target topic lost partitions (deleted, created again): the stream
                # stops saying so (TargetTopicChanged), not with the producer's words
                self.topics.verify(pf.topic)
                raise
            if self.stop.is_set():
                break
        if time.monotonic() >= self._next_commit:
            self.commit()

    def _note_start_offsets(self, consumer: GroupConsumer) -> None:
        """The positions of the owned partitions nothing was copied from yet, noted before
        a poll (which moves a position as it fetches, before the records are copied)."""
        positions, known = consumer.positions, self.tracker.partitions
        self.start_offsets = {tp: positions[tp] for tp in self.owned
                              if tp in positions and tp not in known}

    def _fetched(self, fetches: list[PartitionFetch]) -> None:
        """What a poll returned, before any of it is copied (ExactlyOnceStream notes where
        each partition was read from)."""

    def _shutdown(self) -> None:
        """Finish the records in flight, commit what the target has, leave the group."""
        consumer = self.consumer
        if consumer is None:
            return
        try:
            # flushed, every batch has its answer: a partition stopped at a refused
            # record commits up to it (a restart resumes there); a fenced stream's
            # partitions are another member's: it commits nothing (the records it sent
            # since its last commit are copied again by that member, as after a kill)
            settled = settle(self.producer, self.settle_timeout, self.outage)
            if not self.fenced:
                self.commit(settled=settled)
        except Exception as e:  # the offsets stay where they were: duplicates, no loss
            log.warning("stream %d: final commit failed: %s", self.index, e)
        try:
            consumer.close()
        except Exception as e:
            log.warning("stream %d: leaving the group failed: %s", self.index, e)

    # ---- subscription and rebalances ----------------------------------------------------

    def _on_assign(self, tps: set[TopicPartition]) -> None:
        self.owned = set(tps)

    def _on_revoke(self, tps: set[TopicPartition]) -> None:
        """Before the partitions go to another member: flush, commit, forget them."""
        try:
            self.commit(tps, settled=self.producer.flush())
        except Exception as e:  # the next owner re-sends from the last commit
            log.warning("stream %d: commit before rebalance failed: %s", self.index, e)
        self.tracker.forget(tps)
        self.owned -= tps
        self.start_offsets = {}  # (noted again before the next poll)

    def _on_lost(self, tps: set[TopicPartition]) -> None:
        """The stream is no longer in the group: nothing of `tps` is committed (another
        member may have copied and committed them meanwhile); forget them."""
        self.tracker.forget(tps)
        self.owned -= tps
        self.start_offsets = {}

    def commit(self, tps: set[TopicPartition] | None = None, *, settled: bool = False) -> None:
        """Commit each partition's offset up to which the target acknowledged everything
        (`settled`: the producer was flushed, see ProgressTracker.committable)."""
        assert self.consumer is not None
        self._next_commit = time.monotonic() + self.config.commit_interval_ms / 1000
        offsets = self.tracker.committable(self.owned if tps is None else tps,
                                           settled=settled)
        if offsets:
            self.consumer.commit(offsets)
            self.tracker.mark_committed(offsets)

    # ---- copying ------------------------------------------------------------------------

    def _copy(self, pf: PartitionFetch) -> None:
        consumer = self.consumer
        assert consumer is not None
        tp = (pf.topic, pf.partition)
        source_topic = consumer.client.cluster.topics.get(pf.topic)
        n_source = len(source_topic.partitions) if source_topic is not None else 0
        try:
            target = self.topics.get(pf.topic, n_source or pf.partition + 1, recheck=False)
        except Exception:
            consumer.seek(tp, pf.fetch_offset)  # nothing of the chunk sent: fetched again
            raise
        partition = pf.partition if target.keep_partition else None
        chunk = self.tracker.open_chunk(tp, pf.fetch_offset, pf.next_offset())
        if partition is not None and self._copy_batches(pf, chunk, target.name):
            return
        send = self.producer.send
        name = target.name
        sent = 0
        for rec in pf.records_iter(consumer.check_crcs):
            key = None if rec.key is None else bytes(rec.key)
            value = None if rec.value is None else bytes(rec.value)
            headers = [(k, None if v is None else bytes(v)) for k, v in rec.headers]
            try:
                send(name, value, key, partition=partition, headers=headers,
                     timestamp_ms=rec.timestamp, entry=(chunk, rec.offset))
            except RecordTooLargeError as e:
                if self._refused(chunk, sent, rec.offset, name, e):
                    return
                continue
            except Exception:
                # Not sent (e.g. buffer.memory full while the target is down): fetch this
                # record again and let the loop retry.
                self.tracker.seal(chunk, sent, rec.offset)
                consumer.seek(tp, rec.offset)
                raise
            sent += 1
        self.tracker.seal(chunk, sent)

    def _copy_batches(self, pf: PartitionFetch, chunk: SentChunk, target: str) -> bool:
        """The fast path: every batch of the chunk copied byte for byte (records section)
        into the same target partition. False (nothing sent) when a batch needs records
        decoded: a partial first batch, or a last one max.poll.records cut, LogAppendTime,
        compaction gaps, magic 0/1; when the batches are small (see COPY_MIN_RECORDS); or
        when one is, uncompressed, too large for the producer to send as one batch (its
        records may each fit: the record path sends them, and names any that does not)."""
        batches = list(pf.batches())
        if batches and (sum(b.record_count for b in batches) < COPY_MIN_RECORDS * len(batches)
                        and len(pf.records) < COPY_MIN_BYTES * len(batches)):
            return False
        for b in batches:
            if (not isinstance(b, RecordBatch) or b.base_offset < pf.fetch_offset
                    or pf.cuts(b) or b.timestamp_type != TimestampType.CREATE_TIME
                    or b.last_offset_delta != b.record_count - 1
                    or b.size + 100 > self.producer.max_request_size):
                return False
        if self.consumer is not None and self.consumer.check_crcs:
            for b in batches:
                if not b.is_valid():
                    return False  # records_iter raises the CRC error with its offset
        sections = copy_sections(self.producer, batches)
        if sections is None:
            return False
        sent = 0
        for b, data in zip(batches, sections, strict=True):
            base = b.base_offset
            try:
                self.producer.send_records_section(
                    target, pf.partition, data, b.record_count, b.first_timestamp,
                    b.max_timestamp, entries=[CopiedBatch(chunk, base)] * b.record_count)
            except Exception:
                self.tracker.seal(chunk, sent, base)  # fetch from this batch again
                assert self.consumer is not None
                self.consumer.seek((pf.topic, pf.partition), base)
                raise
            sent += b.record_count
        self.tracker.seal(chunk, sent)
        return True

    def _refused(self, chunk: SentChunk, sent: int, offset: int, target: str,
                 error: BaseException) -> bool:
        """A record refused before sending; True when the stream stops at it."""
        topic, partition = chunk.partition.tp
        if self.config.abort_on_send_failure:
            self.tracker.seal(chunk, sent, offset)
            self.on_failure(SendFailure(topic, partition, offset, target,
                                        refusal_text(error)))
            return True
        log.warning("skipped offset %d of %s-%d: %s", offset, topic, partition,
                    refusal_text(error, False))
        self.on_skip(topic, 1)
        return False


def copy_sections(producer: Producer, batches: list[RecordBatch]) -> list[bytes] | None:
    """The records sections of `batches`, uncompressed, as the copy path sends them; None
    when one is larger than the producer sends (Producer.record_too_large), before any is
    sent: a batch compressed small may not fit uncompressed."""
    sections = []
    for b in batches:
        section = b.records_section()
        codec = b.attributes & 0x07
        data = decompress(codec, section) if codec else bytes(section)
        if producer.record_too_large(len(data), b.record_count) is not None:
            return None
        sections.append(data)
    return sections
