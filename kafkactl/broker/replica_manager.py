"""Produce and fetch coordination across partitions (Kafka's ReplicaManager).

Produce: validate each partition's records (log/validator.py), up-convert magic 0/1, apply the
topic's compression.type, append through the Partition (idempotence checks, offsets stamped
in place), and wake delayed fetches. Fetch: read slices (file regions, never bytes) for
many partitions within the request's byte limits; the long poll lives in handlers/fetch.py.

A disk error in an append (a full disk) is that partition's KAFKA_STORAGE_ERROR: nothing
was appended, the client retries, and the log manager's `storage_errors` reports it once
per log dir rather than a traceback per request (see kafkactl/log/manager.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafkactl.broker.metadata_cache import MetadataCache
from kafkactl.broker.partition import Partition
from kafkactl.broker.partition_store import PartitionStore
from kafkactl.broker.purgatory import DeleteRecordsPurgatory, FetchPurgatory, ProducePurgatory
from kafkactl.broker.topic_admin import TopicAdmin
from kafkactl.log.errors import KafkaStorageError, LogError
from kafkactl.log.manager import StorageErrorLog
from kafkactl.log.producer_state import ProducerStateError
from kafkactl.log.validator import (
    BatchValidationError,
    find_magic,
    rebuild_batches,
    target_codec,
    validate_batches,
    validate_produced,
)
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.codecs import Compression

if TYPE_CHECKING:
    from kafkactl.broker.fetch_session import CachedPartition
    from kafkactl.broker.isr_changer import IsrChanger
    from kafkactl.broker.metrics import BrokerMetrics
    from kafkactl.broker.replication_quota import ReplicationQuota

log = logging.getLogger(__name__)

DEFAULT_FETCH_MAX_BYTES = 55 * 1024 * 1024  # Kafka's fetch.max.bytes
# a Fetch's or ListOffsets' replica_id that may read followers (Kafka's
# DEBUGGING_REPLICA_ID: replica verification, debugging tools)
DEBUGGING_CONSUMER_ID = -2
MARKER_BYTES = 78  # one transaction marker's batch (a control record)


def _check_rebuilt_sizes(batches: list[Any], max_message_bytes: int, topic: str,
                         partition: int) -> None:
    """max.message.bytes again on the batches the broker re-encoded (the topic's
    compression.type differs from the producer's codec): Kafka's UnifiedLog.append checks
    each batch when `messageSizeMaybeChanged` and refuses the whole append."""
    for b in batches:
        if b.size > max_message_bytes:
            codec = "uncompressed" if b.compression == Compression.NONE else \
                Compression(b.compression).name.lower()
            raise BatchValidationError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"Message batch size is {b.size} bytes after recompression to {codec} in "
                f"append to partition {topic}-{partition}, which exceeds the maximum "
                f"configured size of {max_message_bytes} (max.message.bytes).")


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()  # (index in batch, message), v8+
    # acks=all: the offset the high watermark must reach first (-1: acknowledged now)
    required_high_watermark: int = -1
    appended_records: int = 0  # records appended (0: none, or a retried batch's offsets)


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = None  # FileRegion | bytes | None
    size: int = 0
    # read_committed: (producer id, first offset) of the aborted transactions in the range
    aborted_transactions: list[tuple[int, int]] | None = None


class ReplicaManager:
    def __init__(self, partitions: PartitionStore, topic_admin: TopicAdmin,
                 purgatory: FetchPurgatory, cache: MetadataCache, *, auto_create: bool) -> None:
        self.partitions = partitions
        self.topic_admin = topic_admin
        self.cache = cache
        self.purgatory = purgatory
        self.produce_purgatory = ProducePurgatory()
        self.delete_records_purgatory = DeleteRecordsPurgatory()
        self.isr_changes: IsrChanger | None = None  # a cluster: AlterPartition requests
        # a cluster: leader.replication.throttled.rate over the throttled replicas
        self.leader_quota: ReplicationQuota | None = None
        self.auto_create = auto_create
        # fetch.max.bytes (KIP-541): the most a Fetch response carries, whatever it asks
        self.fetch_max_bytes = DEFAULT_FETCH_MAX_BYTES
        # the log manager's disk-error reporter (shared with its background work)
        self.storage_errors: StorageErrorLog = partitions.log_manager.storage_errors
        # (topic, partition) -> the offset of the corrupt batch last logged
        self._corrupt_reported: dict[tuple[str, int], int] = {}
        # metrics.listen: counts each append and read here (BrokerMetrics.attach sets it)
        self.metrics: BrokerMetrics | None = None

    @property
    def isr_expands(self) -> int:
        """ISR expansions the controller accepted (IsrExpandsPerSec)."""
        return self.isr_changes.expands if self.isr_changes is not None else 0

    @property
    def isr_shrinks(self) -> int:
        """ISR shrinks the controller accepted (IsrShrinksPerSec)."""
        return self.isr_changes.shrinks if self.isr_changes is not None else 0

    def partition_or_create(self, topic: str, partition: int) -> Partition | None:
        part = self.partitions.get_partition(topic, partition)
        if part is None and self.auto_create and self.topic_admin.topic(topic) is None:
            try:
                self.topic_admin.auto_create(topic)
            except Exception as e:  # invalid name etc.: the caller reports unknown topic
                log.debug("not auto-creating %r: %s", topic, e)
                return None
            part = self.partitions.get_partition(topic, partition)
        return part

    # ---- produce ---------------------------------------------------------------------------
    def leader_partition(self, topic: str, partition: int) -> tuple[Partition | None, ErrorCode]:
        """(the partition, NONE) when this broker leads it; otherwise (None, the error for
        a client): NOT_LEADER_OR_FOLLOWER when the cluster has the partition elsewhere (or
        here as a follower), UNKNOWN_TOPIC_OR_PARTITION when nobody has it."""
        part = self.partitions.get_partition(topic, partition)
        if part is not None and part.is_leader:
            return part, ErrorCode.NONE
        if part is None and (topic, partition) in self.partitions.offline:
            return None, ErrorCode.KAFKA_STORAGE_ERROR  # its log dir is offline here
        if part is not None or self.cache.partition(topic, partition) is not None:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def local_partition(self, topic: str, partition: int, *, leader_only: bool
                        ) -> tuple[Partition | None, ErrorCode]:
        """leader_partition; without `leader_only` (Kafka's fetchOnlyFromLeader false: a
        request from DEBUGGING_REPLICA_ID -2) also a follower's replica hosted here."""
        part, code = self.leader_partition(topic, partition)
        if part is None and not leader_only:
            local = self.partitions.get_partition(topic, partition)
            if local is not None:
                return local, ErrorCode.NONE
        return part, code

    def append(self, topic: str, partition: int, records: memoryview | None, *,
               produce_version: int, acks: int = 1) -> ProduceResult:
        """Append a produce's records to a partition this broker leads: a client's (the
        produce handler) or a coordinator's (offsets, transaction state). Counted in the
        metrics here, whoever appends, as Kafka's appendToLocalLog counts."""
        result = self._append(topic, partition, records, produce_version=produce_version,
                              acks=acks)
        if self.metrics is not None:
            self.metrics.produce_result(topic, records, result)
        return result

    def count_append(self, topic: str, size: int, records: int) -> None:
        """An append as leader made without `append` (a transaction marker), counted."""
        if self.metrics is not None:
            self.metrics.appended(topic, size, records, ErrorCode.NONE)

    def _append(self, topic: str, partition: int, records: memoryview | None, *,
                produce_version: int, acks: int) -> ProduceResult:
        part = self.partition_or_create(topic, partition)
        if part is None or not part.is_leader:
            _, code = self.leader_partition(topic, partition)
            where = {ErrorCode.NOT_LEADER_OR_FOLLOWER: "is not led by this broker",
                     ErrorCode.KAFKA_STORAGE_ERROR: "is in an offline log dir"}.get(
                         code, "is unknown")
            return ProduceResult(code, message=f"topic-partition {topic}-{partition} {where}")
        if records is None:
            return ProduceResult(ErrorCode.INVALID_RECORD, message="records are null")
        config = part.log.config
        # as Kafka: also for a partition of one replica (min.insync.replicas=2 on RF=1
        # refuses every acks=all write rather than promise a copy that does not exist)
        if acks == -1 and len(part.isr) < config.min_insync_replicas:
            return ProduceResult(
                ErrorCode.NOT_ENOUGH_REPLICAS, log_start_offset=part.log_start_offset,
                message=f"{topic}-{partition} has {len(part.isr)} in-sync replica(s) "
                        f"{part.isr}; min.insync.replicas is {config.min_insync_replicas}")
        now_ms = int(time.time() * 1000)
        buf = records if isinstance(records, memoryview) else memoryview(records)
        try:
            if find_magic(buf) < 2:
                if produce_version >= 3:
                    raise BatchValidationError(ErrorCode.INVALID_RECORD,
                                               "Produce v3+ must carry magic-2 batches")
                buf = self._up_convert(buf)
            if buf.readonly:
                buf = memoryview(bytearray(buf))
            batches = validate_produced(buf, config, now_ms=now_ms,
                                        produce_version=produce_version,
                                        topic_partition=f"{topic}-{partition}")
            rebuilt = rebuild_batches(buf, batches, target_codec(config.compression_type))
            if rebuilt is not None:
                buf = rebuilt
                batches = validate_batches(
                    buf, max_message_bytes=2**31 - 1, timestamp_type="CreateTime",
                    max_timestamp_difference_ms=2**63 - 1, now_ms=now_ms,
                    produce_version=max(produce_version, 7), single_batch=False)
                _check_rebuilt_sizes(batches, config.max_message_bytes, topic, partition)
            lat = now_ms if config.message_timestamp_type == "LogAppendTime" else None
            result = part.append_as_leader(buf, batches, log_append_time=lat)
        except (BatchValidationError, ProducerStateError) as e:
            log.debug("rejected produce to %s-%d: %s", topic, partition, e)
            return ProduceResult(e.code, log_start_offset=part.log_start_offset, message=str(e),
                                 record_errors=tuple(getattr(e, "record_errors", ())))
        except KafkaStorageError as e:
            self.storage_errors.failed(e.log_dir, str(e))
            return ProduceResult(ErrorCode.KAFKA_STORAGE_ERROR,
                                 log_start_offset=part.log_start_offset, message=str(e))
        except LogError as e:
            log.warning("produce to %s-%d failed: %s", topic, partition, e)
            return ProduceResult(ErrorCode(e.code), log_start_offset=part.log_start_offset,
                                 message=str(e))
        if self.storage_errors.failing:
            self.storage_errors.succeeded(part.log.dir.parent, f"append to {topic}-{partition}")
        if result.appended_bytes:
            self.purgatory.notify_append((topic, partition), result.appended_bytes,
                                         consumers=not part.replicated,
                                         end_offset=result.last_offset + 1)
            if part.maybe_advance_high_watermark():  # an ISR of one: committed at once
                self.high_watermark_moved(part)
        required = result.last_offset + 1
        appended = required - result.first_offset if result.appended_bytes else 0
        if acks == -1 and part.high_watermark < required:
            return ProduceResult(ErrorCode.NONE, result.first_offset, result.log_append_time,
                                 part.log_start_offset, required_high_watermark=required,
                                 appended_records=appended)
        return ProduceResult(ErrorCode.NONE, result.first_offset, result.log_append_time,
                             part.log_start_offset, appended_records=appended)

    @staticmethod
    def _up_convert(buf: memoryview) -> memoryview:
        from kafkactl.record.convert import up_convert
        from kafkactl.record.errors import RecordError

        try:
            return memoryview(bytearray(up_convert(buf, assign_offsets=True)))
        except RecordError as e:
            raise BatchValidationError(ErrorCode.CORRUPT_MESSAGE,
                                       f"bad magic 0/1 message set: {e}") from e

    def append_control_batch(self, part: Partition, producer_id: int, producer_epoch: int,
                             coordinator_epoch: int, commit: bool) -> int:
        """Partition.append_control_batch, then wake what waits on the partition (the LSO
        moved for read_committed fetches; followers fetch the marker). Raises
        ProducerStateError (fenced) or KafkaStorageError as the partition does."""
        offset = part.append_control_batch(producer_id, producer_epoch, coordinator_epoch,
                                           commit)
        self.count_append(part.topic, MARKER_BYTES, 1)
        self.purgatory.notify_append((part.topic, part.partition), 1,
                                     consumers=not part.replicated, end_offset=offset + 1)
        if part.maybe_advance_high_watermark():
            self.high_watermark_moved(part)
        return offset

    def high_watermark_moved(self, part: Partition) -> None:
        """Committed records: acks=all produces and consumers' long polls learn of them."""
        key = (part.topic, part.partition)
        enough = not part.replicated or \
            len(part.isr) >= part.log.config.min_insync_replicas
        self.produce_purgatory.high_watermark(key, part.high_watermark, enough_replicas=enough)
        self.purgatory.high_watermark_moved(key, part.high_watermark)

    # ---- fetch -----------------------------------------------------------------------------
    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
             min_one_batch: bool, current_leader_epoch: int = -1,
             replica_id: int = -1, read_committed: bool = False,
             log_start_offset: int = -1, hard_max_bytes_limit: bool = False) -> FetchResult:
        """One partition of a fetch. `hard_max_bytes_limit` (Fetch v0-2): a first batch cut
        by `max_bytes` is sent as the fragment (the client reports it too large); v3+
        (Kafka's checkFetchDataInfo) sends an empty record set instead, so the consumer
        fetches the partition again, first in line, and gets the whole batch (KIP-74)."""
        result = self._read(topic, partition, offset, max_bytes, min_one_batch=min_one_batch,
                            current_leader_epoch=current_leader_epoch, replica_id=replica_id,
                            read_committed=read_committed, log_start_offset=log_start_offset,
                            hard_max_bytes_limit=hard_max_bytes_limit)
        if self.metrics is not None:
            code = result.error
            # failed as Kafka's readFromLocalLog counts it: not for a partition not here,
            # a stale epoch, an offset out of range or a storage error
            self.metrics.fetched(topic, code == ErrorCode.CORRUPT_MESSAGE,
                                 code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return result

    def _read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
              min_one_batch: bool, current_leader_epoch: int, replica_id: int,
              read_committed: bool, log_start_offset: int,
              hard_max_bytes_limit: bool) -> FetchResult:
        from kafkactl.log.errors import CorruptRecordError, OffsetOutOfRange

        part, code = self.leader_partition(topic, partition)
        if part is None and replica_id == DEBUGGING_CONSUMER_ID:
            # Kafka's ReplicaVerificationTool reads any replica's committed records
            part = self.partitions.get_partition(topic, partition)
        if part is None:
            return FetchResult(code)
        if current_leader_epoch > part.leader_epoch:
            return FetchResult(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if 0 <= current_leader_epoch < part.leader_epoch:
            return FetchResult(ErrorCode.FENCED_LEADER_EPOCH)
        follower = replica_id >= 0
        if follower:
            self._follower_fetched(part, replica_id, offset, log_start_offset)
        hw = part.high_watermark
        lso = part.last_stable_offset
        lso_ = part.log_start_offset
        read_committed = read_committed and not follower
        if offset == (part.log_end_offset if follower else lso if read_committed else hw):
            return FetchResult(ErrorCode.NONE, hw, lso, lso_, None, 0,
                               [] if read_committed else None)
        try:
            fs = part.read(offset, max_bytes, min_one_batch=min_one_batch,
                           committed_only=not follower, read_committed=read_committed)
        except OffsetOutOfRange:
            return FetchResult(ErrorCode.OFFSET_OUT_OF_RANGE, hw, lso, lso_)
        except CorruptRecordError as e:  # torn bytes on disk: never served, said once
            if self._corrupt_reported.get((topic, partition)) != e.offset:
                self._corrupt_reported[(topic, partition)] = e.offset
                log.error("cannot serve fetch of %s-%d at offset %d: %s", topic, partition,
                          offset, e)
            return FetchResult(ErrorCode.CORRUPT_MESSAGE, hw, lso, lso_)
        except OSError as e:  # a failing disk (EIO): this partition only
            log.error("cannot read %s-%d at offset %d: %s", topic, partition, offset, e)
            return FetchResult(ErrorCode.KAFKA_STORAGE_ERROR, hw, lso, lso_)
        if fs.first_entry_incomplete and not hard_max_bytes_limit:
            return FetchResult(ErrorCode.NONE, hw, lso, lso_, None, 0,
                               [] if read_committed else None)
        aborted = None
        if read_committed:
            aborted = part.aborted_transactions(fs.first_offset, part.log.fetch_upper_bound(
                fs.first_offset, fs.position + fs.length, lso)) if fs.length else []
        return FetchResult(ErrorCode.NONE, hw, lso, lso_, fs, int(fs.length), aborted)

    def _follower_fetched(self, part: Partition, replica_id: int, fetch_offset: int,
                          log_start_offset: int) -> None:
        """A follower's fetch says where its log ends and starts: the high watermark may
        move, a follower caught up to it may rejoin the ISR, and a waiting DeleteRecords
        may see its low watermark reached."""
        now = time.time() * 1000
        if part.update_follower(replica_id, fetch_offset, part.log_end_offset, now,
                                log_start_offset):
            self.high_watermark_moved(part)
        if self.delete_records_purgatory.waiting:  # one test while no DeleteRecords waits
            self.low_watermark_moved(part)
        # this follower alone may join (Kafka's maybeExpandIsr(followerReplica)); the
        # usual fetch, from a follower in the ISR, stops at the first test
        if replica_id not in part.isr and self.isr_changes is not None and \
                part.needs_expand_isr(replica_id):
            self.isr_changes.submit(part, sorted([*part.isr, replica_id]))

    def follower_session_scan(self, cached: Iterable[CachedPartition], replica_id: int
                              ) -> list[CachedPartition]:
        """An incremental fetch's fast path over a follower's session
        (kafkactl/broker/fetch_session.py): the partitions that must be read the usual way
        (`read`, which also does the follower's bookkeeping). The others are settled here:
        the follower is in the ISR, caught up to the log end, at the position and log start
        it last told, the high watermark and log start offset are the ones it was last
        sent, so its answer would carry nothing; only its caught-up time moves (Kafka's
        updateFollowerFetchState with the same offsets changes nothing else), and the
        partition counts as read in the metrics."""
        if self.delete_records_purgatory.waiting:  # its low watermark check: the usual way
            return list(cached)
        hosted = self.partitions.partitions
        now = time.time() * 1000
        rest: list[CachedPartition] = []
        settled: dict[str, int] = {}
        for cp in cached:
            part = hosted.get(cp.key)
            if part is None or not part.is_leader or cp.high_watermark < 0:
                rest.append(cp)
                continue
            log_ = part.log
            end = log_.log_end_offset
            epoch = cp.current_leader_epoch
            if cp.fetch_offset != end or log_.log_start_offset != cp.log_start_offset or \
                    (epoch >= 0 and epoch != part.leader_epoch):
                rest.append(cp)
                continue
            state = part.followers.get(replica_id)
            if state is None or state.log_end_offset != end or \
                    state.log_start_offset != cp.fetcher_log_start or \
                    replica_id not in part.isr or part.high_watermark != cp.high_watermark:
                rest.append(cp)
                continue
            state.last_caught_up_ms = now
            settled[cp.topic] = settled.get(cp.topic, 0) + 1
        if self.metrics is not None:
            for topic, n in settled.items():
                self.metrics.fetched(topic, False, True, n)
        return rest

    def low_watermark(self, part: Partition) -> int:
        """The partition's low watermark: the smallest log start offset over its replicas
        on live brokers (Kafka's Partition.lowWatermarkIfLeader)."""
        if not part.followers:
            return part.log_start_offset
        return part.low_watermark({b.node_id for b in self.cache.brokers()})

    def low_watermark_moved(self, part: Partition) -> None:
        """Waiting DeleteRecords on `part` whose offset the low watermark reached answer."""
        key = (part.topic, part.partition)
        if part.is_leader and self.delete_records_purgatory.watching(key):
            self.delete_records_purgatory.low_watermark(key, self.low_watermark(part))

    def leader_throttled(self, topic: str, partition: int, replica_id: int) -> bool:
        """Send follower `replica_id` nothing of (topic, partition) now: it is out of the
        ISR, the partition's replica here is throttled and the leader quota is exceeded."""
        quota = self.leader_quota
        if quota is None or quota.bound() is None:
            return False
        part = self.partitions.get_partition(topic, partition)
        return part is not None and quota.should_throttle(topic, partition,
                                                          replica_id in part.isr)

    def replicated(self, topic: str, partition: int, size: int) -> None:
        """`size` bytes of (topic, partition) go to a follower: counted by the quota and
        the metrics (ReplicationBytesOutPerSec)."""
        if self.leader_quota is not None:
            self.leader_quota.record(topic, partition, size)
        if self.metrics is not None:
            self.metrics.replication_bytes_out += size

    def shrink_isrs(self, max_lag_ms: float) -> None:
        """Drop from the ISR the followers not caught up for `max_lag_ms` (Kafka's
        replica.lag.time.max.ms), through the controller."""
        if self.isr_changes is None:
            return
        now = time.time() * 1000
        for part in list(self.partitions.partitions.values()):
            if not part.is_leader or not part.replicated or part.isr_change_pending:
                continue
            lagging = part.isr_to_remove(now, max_lag_ms)
            if lagging:
                log.info("%s: followers %s are behind for more than %d ms; leaving the ISR",
                         part, lagging, max_lag_ms)
                self.isr_changes.submit(part, [r for r in part.isr if r not in lagging])
