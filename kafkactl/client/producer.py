"""Producer: the seed's producer API on a Kafka-style accumulator + sender thread.

    with Producer("127.0.0.1:9092", acks="all", compression_type="lz4") as p:
        fut = p.send("orders", b"value", key=b"k", headers=[("trace", b"1")])
        print(fut.result().offset)

`send()` is asynchronous (returns a future; `on_delivery(metadata, error)` is called from the
sender thread) unless the producer is created with `sync=True`, which waits for each record.
Idempotence is on by default (InitProducerId + per-partition sequences), so retries after a
lost connection or a broker restart neither reorder nor duplicate records.

With a transactional_id (KIP-98) the records of a transaction become visible to
read_committed consumers all together when it commits, or never:

    p = Producer("127.0.0.1:9092", transactional_id="loader-1")
    p.init_transactions()
    p.begin_transaction()
    p.send("orders", b"...")
    p.send_offsets_to_transaction({("in", 0): 42}, GroupMetadata("g", gen, member))
    p.commit_transaction()        # or abort_transaction()
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from kafkactl.client.accumulator import RecordAccumulator
from kafkactl.client.errors import (
    ClosedBeforeDelivery,
    ConfigError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
)
from kafkactl.client.future import FutureRecordMetadata, RecordMetadata
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.client.partitioner import (
    Partitioner,
    group_records,
    murmur2_groups,
    murmur2_scatter,
)
from kafkactl.client.producer_batch import ProducerBatch, run_batch_callbacks
from kafkactl.client.security import ClientSecurity, split_properties
from kafkactl.client.sender import Sender
from kafkactl.record.builder import encode_headers
from kafkactl.record.codecs import Compression

if TYPE_CHECKING:  # imported by a transactional producer only
    from kafkactl.client.transaction_manager import GroupMetadata, TransactionManager

BatchCallback = Callable[[ProducerBatch, int, BaseException | None], None]
DeliveryCallback = Callable[[RecordMetadata | None, BaseException | None], None]

COMPRESSION_NAMES = {"none": Compression.NONE, "gzip": Compression.GZIP,
                     "snappy": Compression.SNAPPY, "lz4": Compression.LZ4,
                     "zstd": Compression.ZSTD}

# Kafka property name -> keyword argument of Producer.__init__.
PROPERTY_NAMES = {
    "bootstrap.servers": "bootstrap_servers", "client.id": "client_id", "acks": "acks",
    "compression.type": "compression_type", "batch.size": "batch_size",
    "linger.ms": "linger_ms", "buffer.memory": "buffer_memory",
    "max.block.ms": "max_block_ms", "enable.idempotence": "enable_idempotence",
    "retries": "retries", "retry.backoff.ms": "retry_backoff_ms",
    "request.timeout.ms": "request_timeout_ms", "delivery.timeout.ms": "delivery_timeout_ms",
    "max.request.size": "max_request_size",
    "max.in.flight.requests.per.connection": "max_in_flight", "partitioner": "partitioner",
    "partitioner.class": "partitioner", "metadata.max.age.ms": "metadata_max_age_ms",
}
# transactional.id and transaction.timeout.ms are not among them: a transactional producer
# is asked for explicitly (Producer(transactional_id=..., transaction_timeout_ms=...);
# kafkactl produce --transactional-id or -X; mirror --exactly-once), since every send must
# then be inside begin/commit_transaction
_INT_OPTS = {"batch_size", "linger_ms", "buffer_memory", "max_block_ms", "retries",
             "retry_backoff_ms", "request_timeout_ms", "delivery_timeout_ms",
             "max_request_size", "max_in_flight", "metadata_max_age_ms"}

# What a record's size (its key's and value's bytes) is counted with against
# max.request.size and buffer.memory: the batch's and the record's framing
RECORD_OVERHEAD = 100


class RecordSizeError(RecordTooLargeError):
    """A record (or, on the copy path, a batch of `records` records) of `size` bytes that
    the producer refuses before sending: larger than `setting` (max.request.size or
    buffer.memory, as Java's producer checks them), whose value is `limit`."""

    def __init__(self, size: int, setting: str, limit: int, records: int = 1) -> None:
        what = (f"a record of {size} bytes" if records == 1
                else f"a batch of {records} records ({size} bytes)")
        super().__init__(f"{what} is larger than {setting} ({limit})")
        self.size = size
        self.setting = setting
        self.limit = limit
        self.records = records


class PartitionNotFoundError(ValueError):
    """A record sent to a partition its topic does not have (as the metadata says after
    a refresh): the topic has `count` partitions."""

    def __init__(self, topic: str, partition: int, count: int) -> None:
        super().__init__(f"topic {topic!r} has partitions 0..{count - 1}; "
                         f"partition {partition} does not exist")
        self.topic = topic
        self.partition = partition
        self.count = count


def parse_acks(acks: str | int) -> int:
    s = str(acks).strip().lower()
    if s in ("all", "-1"):
        return -1
    if s in ("0", "1"):
        return int(s)
    raise ConfigError(f"acks must be 0, 1 or all (got {acks!r})")


def parse_compression(name: str | int | None) -> Compression:
    if name is None:
        return Compression.NONE
    if isinstance(name, int):
        return Compression(name)
    try:
        return COMPRESSION_NAMES[name.strip().lower()]
    except KeyError:
        raise ConfigError(f"compression must be one of {', '.join(COMPRESSION_NAMES)} "
                          f"(got {name!r})") from None


def properties_to_kwargs(props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka producer properties (`linger.ms=5`) -> Producer keyword arguments."""
    out: dict[str, Any] = {}
    for k, v in props.items():
        name = PROPERTY_NAMES.get(k)
        if name is None:
            raise ConfigError(f"unknown producer property {k!r} (known: "
                              f"{', '.join(sorted(PROPERTY_NAMES))})")
        if name in _INT_OPTS:
            try:
                out[name] = int(v)
            except ValueError:
                raise ConfigError(f"property {k} needs an integer (got {v!r})") from None
        elif name == "enable_idempotence":
            out[name] = str(v).lower() in ("true", "1", "yes")
        else:
            out[name] = v
    return out


def idempotence(given: bool | None, acks: int, retries: int, max_in_flight: int) -> bool:
    """Whether the producer is idempotent, by Kafka's rules (3.2+): on by default, and off
    by default when acks, retries or max.in.flight.requests.per.connection do not allow it
    (retries=0: a batch refused for good leaves a gap in the sequence, and every later
    batch of the partition would fail OUT_OF_ORDER_SEQUENCE_NUMBER); set explicitly with
    one of those, ConfigError with Kafka's message."""
    conflicts = [why for bad, why in (
        (retries == 0, "Must set retries to non-zero when using the idempotent producer."),
        (acks != -1, "Must set acks to all in order to use the idempotent producer. "
                     "Otherwise we cannot guarantee idempotence."),
        (max_in_flight > 5, "Must set max.in.flight.requests.per.connection to at most 5 "
                            "when using the idempotent producer.")) if bad]
    if given is None:
        return not conflicts
    if given and conflicts:
        raise ConfigError(conflicts[0])
    return given


class Producer:
    def __init__(self, bootstrap_servers: str | Sequence[str] | None = None, *,
                 client_id: str = "kafkactl-producer", acks: str | int = "all",
                 compression_type: str | int | None = "none", batch_size: int = 16384,
                 linger_ms: int = 5, buffer_memory: int = 32 * 1024 * 1024,
                 max_block_ms: int = 60000, enable_idempotence: bool | None = None,
                 retries: int = 2147483647, retry_backoff_ms: int = 100,
                 request_timeout_ms: int = 30000, delivery_timeout_ms: int = 120000,
                 max_request_size: int = 1048576, max_in_flight: int = 5,
                 partitioner: str = "murmur2", metadata_max_age_ms: int = 300000,
                 sync: bool = False, security: ClientSecurity | None = None,
                 transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60000) -> None:
        if batch_size <= 0 or linger_ms < 0 or buffer_memory < batch_size:
            raise ConfigError("batch.size must be > 0, linger.ms >= 0 and buffer.memory >= "
                              "batch.size")
        self.acks = parse_acks(acks)
        enable_idempotence = idempotence(  # (a transactional producer asks for it)
            True if transactional_id is not None and enable_idempotence is None
            else enable_idempotence, self.acks, retries, max_in_flight)
        self.transactions: TransactionManager | None = None
        if transactional_id is not None:
            # Kafka's rules for a transactional producer: idempotent, acks=all
            if not enable_idempotence or self.acks != -1:
                raise ConfigError("a transactional producer (transactional.id) needs "
                                  "enable.idempotence=true and acks=all")
            if max_in_flight > 5:
                raise ConfigError("a transactional producer needs "
                                  "max.in.flight.requests.per.connection <= 5")
            from kafkactl.client.transaction_manager import TransactionManager

            self.transactions = TransactionManager(
                bootstrap_servers, transactional_id,
                transaction_timeout_ms=transaction_timeout_ms, client_id=client_id,
                request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms,
                security=security)
        self.compression = parse_compression(compression_type)
        self.sync = sync
        self.max_block = max_block_ms / 1000.0
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.partitioner = Partitioner(partitioner)
        self.client = KafkaClient(bootstrap_servers, client_id=client_id,
                                  request_timeout_ms=request_timeout_ms,
                                  retry_backoff_ms=retry_backoff_ms,
                                  metadata_max_age_ms=metadata_max_age_ms,
                                  security=security)
        # A batch leaves room for a record's overhead below both limits: a record too large
        # for them never fits a batch that has records already, so the bulk paths check
        # only a record that would begin a batch (record_too_large), not every record
        self.accumulator = RecordAccumulator(
            batch_size=max(1, min(batch_size, max_request_size - RECORD_OVERHEAD,
                                  buffer_memory - RECORD_OVERHEAD)),
            linger_ms=linger_ms, buffer_memory=buffer_memory, max_block_ms=max_block_ms)
        self.sender = Sender(
            self.client, self.accumulator, acks=self.acks, compression=self.compression,
            idempotent=enable_idempotence, retries=retries, retry_backoff_ms=retry_backoff_ms,
            delivery_timeout_ms=delivery_timeout_ms, request_timeout_ms=request_timeout_ms,
            max_request_size=max_request_size, max_in_flight=max_in_flight,
            transactions=self.transactions)
        self.accumulator._on_full_batch = self.sender.wakeup
        self.accumulator.on_new_batch = self._on_new_batch
        # topic -> (metadata version, partition count): read again when the metadata
        # changed (a topic that grew gets records in its new partitions, as Java's
        # producer partitions with the current metadata on every send)
        self._partition_counts: dict[str, tuple[int, int]] = {}
        # topic -> (metadata version, the partitions with a leader when only some have one)
        self._available: dict[str, tuple[int, list[int] | None]] = {}
        self._closed = False
        # the batch callbacks, run by _dispatch (the one callback of every batch): each
        # batch's once, whether the sender completes it or _take_over does (a sender stuck
        # in a call to a broker that does not answer, when the producer is stopped)
        self._batch_callbacks: list[BatchCallback] = []
        self._completion_lock = threading.Lock()
        self._completed: set[ProducerBatch] = set()  # (pruned: see _dispatch)
        self._taken_over: set[ProducerBatch] = set()
        self.sender.start()

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **overrides: Any) -> Producer:
        security, props = split_properties(props)
        kwargs = properties_to_kwargs(props)
        kwargs["security"] = security
        kwargs.update(overrides)
        return cls(**kwargs)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata ----------------------------------------------------------------------------

    def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of `topic`, waiting (max.block.ms) for metadata; auto-creates."""
        parts = self.client.cluster.partitions_for(topic)
        if parts is not None:
            self._partition_counts[topic] = (self.client.cluster.version, len(parts))
            return parts
        self._await_metadata(topic, lambda: self.client.cluster.partitions_for(topic)
                             is not None)
        cluster = self.client.cluster
        parts = cluster.partitions_for(topic)
        if parts is None:
            raise KafkaTimeoutError(
                f"no metadata for topic {topic!r} within {self.max_block:g} s")
        self._partition_counts[topic] = (cluster.version, len(parts))
        return parts

    def _await_metadata(self, topic: str, ready: Callable[[], bool]) -> bool:
        """Ask the sender for `topic`'s metadata and wait, up to max.block.ms, until
        `ready()`: False when it did not come; the topic's error (the broker's answer for
        it) is raised."""
        self.sender.request_topic(topic)
        deadline = time.monotonic() + self.max_block
        cond = self.sender.metadata_cond
        with cond:
            while not ready():
                err = self.sender.topic_errors.get(topic)
                if err is not None:
                    raise err
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                cond.wait(min(remaining, 0.2))
        return True

    def _known_count(self, topic: str) -> int | None:
        """`topic`'s partition count in the current metadata (cheap when it has not
        changed since the last look); None when it is not known yet."""
        cached = self._partition_counts.get(topic)
        cluster = self.client.cluster
        if cached is not None and cached[0] == cluster.version:
            return cached[1]
        parts = cluster.partitions_for(topic)
        if parts is None:  # (forgotten for now: the count known before holds)
            return cached[1] if cached is not None else None
        self._partition_counts[topic] = (cluster.version, len(parts))
        return len(parts)

    def _num_partitions(self, topic: str) -> int:
        n = self._known_count(topic)
        if n is None:
            n = len(self.partitions_for(topic))
        return n

    def _available_partitions(self, topic: str, n: int) -> list[int] | None:
        """The partitions of `topic` that have a leader, when only some of its `n` do
        (records without a key go to those, as Kafka's partitioners send them to the
        available partitions); None when all do, or none (then any partition: its records
        wait for a leader). Keyed records never ask: a key keeps its partition."""
        cluster = self.client.cluster
        version = cluster.version
        cached = self._available.get(topic)
        if cached is not None and cached[0] == version:
            return cached[1]
        avail = [p for p in cluster.available_partitions(topic) if p < n]
        out = avail if avail and len(avail) < n else None
        self._available[topic] = (version, out)
        return out

    def _on_new_batch(self, topic: str, partition: int) -> None:
        n = self._known_count(topic)
        if n and self.partitioner.is_sticky:
            self.partitioner.on_new_batch(topic, partition, n,
                                          self._available_partitions(topic, n))

    def _check_partition(self, topic: str, partition: int) -> None:
        """An explicit partition must exist, on every send (as the Java producer checks):
        past the known count the metadata is asked again (the topic may have grown since,
        or been deleted and created again with fewer partitions): PartitionNotFoundError
        when it still does not have it."""
        n = self._known_count(topic)
        if n is not None and 0 <= partition < n:
            return
        n = self._fresh_count(topic) if partition >= 0 else len(self.partitions_for(topic))
        if not 0 <= partition < n:
            raise PartitionNotFoundError(topic, partition, n)

    def _fresh_count(self, topic: str) -> int:
        """`topic`'s partition count after a metadata refresh that asked for it (waiting
        up to max.block.ms for one; the count known before when none came)."""
        cluster = self.client.cluster
        if cluster.partitions_for(topic) is None:
            return len(self.partitions_for(topic))
        seen = cluster.updated_at
        self._await_metadata(topic, lambda: self.client.cluster.updated_at != seen)
        cluster = self.client.cluster
        parts = cluster.partitions_for(topic)
        if parts is None:
            return len(self.partitions_for(topic))
        self._partition_counts[topic] = (cluster.version, len(parts))
        return len(parts)

    # -- sending ---------------------------------------------------------------------------------

    def _ready(self, call: str) -> None:
        """What every send path checks first: the producer is open, in a transaction when
        it is transactional, and its sender has not failed for good."""
        if self._closed:
            raise ProducerClosedError(f"{call} on a closed producer")
        if self.transactions is not None:
            self._check_in_transaction()
        if self.sender.fatal_error is not None:
            raise self.sender.fatal_error

    def record_too_large(self, size: int, records: int = 1) -> RecordSizeError | None:
        """The error refusing a record whose key and value take `size` bytes, or None
        when it may be sent: as Java's producer, one larger than max.request.size or than
        buffer.memory (with RECORD_OVERHEAD) is never sent. Every send path checks it
        (send() raises it; the bulk paths count the record failed)."""
        if size + RECORD_OVERHEAD > self.max_request_size:
            return RecordSizeError(size, "max.request.size", self.max_request_size, records)
        if size + RECORD_OVERHEAD > self.buffer_memory:
            return RecordSizeError(size, "buffer.memory", self.buffer_memory, records)
        return None

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
             partition: int | None = None,
             headers: Sequence[tuple[str, bytes | None]] | None = None,
             timestamp_ms: int | None = None, on_delivery: DeliveryCallback | None = None,
             entry: Any = None) -> FutureRecordMetadata:
        self._ready("send()")
        size = (len(key) if key else 0) + (len(value) if value else 0)
        too_large = self.record_too_large(size)
        if too_large is not None:
            raise too_large
        if partition is None:
            n = self._num_partitions(topic)
            partitioner = self.partitioner
            partition = partitioner.partition(
                topic, key, n, self._available_partitions(topic, n)
                if key is None or partitioner.name in ("roundrobin", "random") else None)
        else:
            self._check_partition(topic, partition)
        if timestamp_ms is None:  # the time it is sent, as Kafka's KafkaProducer.doSend
            timestamp_ms = int(time.time() * 1000)
        fut = FutureRecordMetadata(timestamp_ms)
        if on_delivery is not None:
            fut.add_done_callback(lambda f: on_delivery(
                None if f.exception() else f.result(), f.exception()))
        self.accumulator.append(topic, partition, timestamp_ms, key, value, headers or (),
                                entry, fut)
        if self.sync:
            self.sender.wakeup()
            self.flush()
            fut.result()
        return fut

    def send_values(self, topic: str, values: Sequence[bytes | None], *,
                    partition: int | None = None, keep_entries: bool = False) -> None:
        """Bulk fast path: null-key, header-less values (None: a null value, a tombstone),
        timestamped now. Delivery is reported through add_batch_callback (per batch), not
        per-record futures; so is a record too large to send (record_too_large), failed
        at once in a batch of its own."""
        self._ready("send_values()")
        # (the accumulator and the partitioner pass values through to the batch's encoder,
        # which takes None: their annotations say bytes)
        values = cast(Sequence[bytes], values)
        check = self.record_too_large
        if partition is None:
            n = self._num_partitions(topic)
            if self.partitioner._user is not None:
                # user code, record by record: what it returned before it failed is sent
                for v in values:
                    p = self.partitioner.partition(topic, None, n)
                    self.accumulator.append_values(topic, p, (v,), keep_entries, check)
                return
            available = self._available_partitions(topic, n)
            if self.partitioner.name in ("roundrobin", "random"):
                for p, part in self.partitioner.spread(topic, values, n, available):
                    self.accumulator.append_values(topic, p, part, keep_entries, check)
                if self.sync:
                    self.flush()
                return
            partition = self.partitioner.sticky_partition(topic, n, available)
        else:
            self._check_partition(topic, partition)
        self.accumulator.append_values(topic, partition, values, keep_entries, check)
        if self.sync:
            self.flush()

    def send_key_values(self, topic: str, keys: Sequence[bytes | None],
                        values: Sequence[bytes | None], *, partition: int | None = None,
                        entries: Sequence[Any] | None = None) -> None:
        """Bulk path for keyed records without headers, timestamped now (a None key or
        value: null): each key goes to the partition `send` would choose (null keys: the
        sticky partition), in order per partition. Delivery is reported through
        add_batch_callback, not futures (a record too large to send too, as send_values
        reports it)."""
        self._ready("send_key_values()")
        values = cast(Sequence[bytes], values)  # passed through to the encoder, as above
        if partition is None:
            n = self._num_partitions(topic)
            if n > 1:
                self._send_key_values_partitioned(topic, keys, values, n, entries)
                return
            partition = 0
        else:
            self._check_partition(topic, partition)
        self.accumulator.append_key_values(topic, partition, keys, values, entries,
                                           self.record_too_large)
        if self.sync:
            self.flush()

    def _send_key_values_partitioned(self, topic: str, keys: Sequence[bytes | None],
                                     values: Sequence[bytes], n: int,
                                     entries: Sequence[Any] | None) -> None:
        partitioner = self.partitioner
        available = self._available_partitions(topic, n)
        if partitioner.name == "murmur2":
            # the default partitioner: grouped in one go (compiled), null keys sticky
            groups = murmur2_groups(keys, values, entries, n,
                                    partitioner.sticky_partition(topic, n, available))
        else:
            groups = group_records(keys, values, entries,
                                   lambda k: partitioner.partition(topic, k, n, available),
                                   deterministic=partitioner.is_deterministic)
        for p, (ks, vs, es) in groups.items():
            self.accumulator.append_key_values(topic, p, ks, vs, es, self.record_too_large)
        if self.sync:
            self.flush()

    def send_lines(self, topic: str, data: bytes, start: int, end: int, delimiter: bytes,
                   key_separator: bytes | None = None, *, partition: int | None = None,
                   headers: Sequence[tuple[str, bytes | None]] = ()) -> int:
        """Bulk path for lines still in their input buffer: the lines of data[start:end],
        each followed by `delimiter`, as send_values sends them (null keys) or, with a
        key_separator, as send_key_values sends `key SEP value` (a line without SEP: a null
        key and the whole line). Encoded from the buffer with no object per line where the
        records go to one partition (record.columns.encode_lines); returns how many lines
        there were. `headers` go with every record. Delivery is reported through
        add_batch_callback (a line too large to send too, as send_values reports it)."""
        self._ready("send_lines()")
        section = encode_headers(headers)  # b"\x00" (no headers) when there are none
        check = self.record_too_large
        if partition is None:
            n = self._num_partitions(topic)
            partitioner = self.partitioner
            spread = (n > 1 if key_separator is not None else
                      partitioner.name in ("roundrobin", "random")
                      or partitioner._user is not None)
            if spread and key_separator is not None and partitioner.name == "murmur2":
                # keyed lines of the default partitioner: each partition's lines copied to
                # a buffer of their own, then encoded from it as one partition's are
                count = 0
                for p, lines in enumerate(murmur2_scatter(
                        data, start, end, delimiter, key_separator, n,
                        partitioner.sticky_partition(
                            topic, n, self._available_partitions(topic, n)))):
                    if lines:
                        count += self.accumulator.append_lines(
                            topic, p, lines, 0, len(lines), delimiter, key_separator,
                            section, check)
                if self.sync:
                    self.flush()
                return count
            if spread:  # a partition per record: the per-record paths choose it
                from kafkactl.client.line_producer import split_keys

                records = data[start:end].split(delimiter)
                records.pop()
                keys, values = (split_keys(records, key_separator)
                                if key_separator is not None else ([None] * len(records),
                                                                   records))
                if headers:
                    for key, value in zip(keys, values, strict=True):
                        # (counted failed, as on the other bulk paths: send() raises)
                        error = check((len(key) if key else 0) + (len(value) if value else 0))
                        if error is not None:
                            self.accumulator.refuse(topic, -1, error)
                            continue
                        self.send(topic, value, key, headers=headers)
                elif key_separator is None:
                    self.send_values(topic, records)
                else:
                    self.send_key_values(topic, keys, values)
                return len(records)
            partition = (0 if key_separator is not None
                         else self.partitioner.sticky_partition(
                             topic, n, self._available_partitions(topic, n)))
        else:
            self._check_partition(topic, partition)
        count = self.accumulator.append_lines(topic, partition, data, start, end, delimiter,
                                              key_separator, section, check)
        if self.sync:
            self.flush()
        return count

    def send_records_section(self, topic: str, partition: int, section: bytes,
                             record_count: int, base_timestamp: int, max_timestamp: int, *,
                             entries: Sequence[Any] | None = None) -> None:
        """Copy path (kafkactl mirror): the uncompressed records section of a consumed v2
        batch, whose records keep their keys, values, headers and timestamps, sent as one
        batch without decoding a record. Delivery is reported through add_batch_callback
        (`entries[i]` is kept with record i). A section larger than record_too_large
        allows raises its RecordSizeError, nothing sent."""
        self._ready("send_records_section()")
        too_large = self.record_too_large(len(section), record_count)
        if too_large is not None:  # (RecordSizeError: a record, or a batch of N records)
            raise too_large
        self._check_partition(topic, partition)
        self.accumulator.append_records_section(topic, partition, section, record_count,
                                                base_timestamp, max_timestamp, entries)
        if self.sync:
            self.flush()

    # -- transactions (KIP-98, KIP-447) --------------------------------------------------

    def _check_in_transaction(self) -> None:
        from kafkactl.client.transaction_manager import TransactionError

        txn = self.transactions
        assert txn is not None
        if txn.fatal is not None:
            raise txn.fatal
        if not txn.in_transaction:
            raise TransactionError("a transactional producer sends inside a transaction: "
                                   "begin_transaction() first")

    def _txn(self) -> TransactionManager:
        if self.transactions is None:
            from kafkactl.client.transaction_manager import TransactionError

            raise TransactionError("the producer has no transactional.id")
        return self.transactions

    def init_transactions(self) -> None:
        """Register the transactional.id with its coordinator: an older producer of the id
        is fenced and its open transaction aborted; then transactions can begin."""
        txn = self._txn()
        pid, epoch = txn.init()
        self.sender.state.producer_id, self.sender.state.epoch = pid, epoch
        self.sender.state.next_sequence.clear()

    def begin_transaction(self) -> None:
        self._txn().begin()

    def send_offsets_to_transaction(self, offsets: Mapping[tuple[str, int], int],
                                    group: GroupMetadata | str) -> None:
        """Commit a consumer group's offsets (the next offset to read per partition) in the
        transaction (consume-transform-produce, KIP-447): with the member's GroupMetadata a
        member of an older generation (a zombie) cannot commit."""
        self._txn().send_offsets(offsets, group)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush the transaction's records, then commit it (EndTxn). A record or offset
        that failed makes it TransactionAbortableError: abort_transaction() then."""
        txn = self._txn()
        if not self.flush(timeout):
            raise KafkaTimeoutError("the transaction's records were not all acknowledged "
                                    "in time; abort it")
        txn.end(commit=True)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the ongoing transaction: records not yet sent are dropped (their
        callbacks see the error), the sent ones are never visible to read_committed
        consumers. The producer can begin a new transaction afterwards (its epoch is
        bumped, KIP-360)."""
        txn = self._txn()
        if txn.fatal is not None:
            raise txn.fatal
        from kafkactl.client.transaction_manager import TransactionError

        txn.fail(TransactionError("the transaction was aborted"))
        self.sender.wakeup()
        self.flush(timeout)  # what is in flight completes; what is queued fails
        txn.end(commit=False)
        self.init_transactions()

    def add_batch_callback(self, callback: BatchCallback) -> None:
        """Call `callback(batch, base_offset, error)` for every completed batch, once (from
        the sender thread; from abort()'s or close()'s when they take the batches of a
        stuck sender over): the cheap way to count acknowledgements in bulk."""
        with self._completion_lock:
            if not self._batch_callbacks:
                self.accumulator.batch_callbacks.append(self._dispatch)
            self._batch_callbacks.append(callback)

    def _dispatch(self, batch: ProducerBatch, base_offset: int,
                  error: BaseException | None) -> None:
        """The batch callbacks of a completed batch, unless it was completed already (a
        batch _take_over failed, which the stuck sender completes when its call returns)."""
        acc = self.accumulator
        with self._completion_lock:
            if batch in self._taken_over:
                return
            self._completed.add(batch)
            if len(self._completed) > 1024:  # (only those still incomplete can be taken)
                with acc.lock:
                    self._completed = {b for b in self._completed if b in acc.incomplete}
            run_batch_callbacks(self._batch_callbacks, batch, base_offset, error)

    def flush(self, timeout: float | None = None) -> bool:
        """Send everything buffered and wait for the outcome; False on timeout."""
        return self.accumulator.flush(timeout, self.sender.wakeup)

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to `timeout`) and stop; records still unsent then fail."""
        if self._closed:
            return
        self._closed = True
        self.flush(timeout)
        self._stop_sender(10.0)

    def abort(self, timeout: float = 10.0) -> None:
        """Stop without waiting for the brokers: undelivered batches fail (their callbacks
        run) before it returns. The sender is given `timeout` s to stop; one stuck longer
        in a call to a broker that does not answer (up to request.timeout.ms) is left
        behind, a daemon thread, and the batches it has not completed are failed here
        (ClosedBeforeDelivery: a batch in flight may have been written, as with Java's
        producer closed with a timeout)."""
        self._closed = True
        self._stop_sender(timeout)

    def _stop_sender(self, timeout: float) -> None:
        # (the connections the stop closes under requests in flight are no outage to tell)
        self.sender.on_connection_error = None
        self.sender.running = False
        self.sender.force_close = True
        self.sender.wakeup()
        self.sender.join(timeout)
        self._take_over(ClosedBeforeDelivery("the producer was closed before delivery"))
        if self.transactions is not None:
            self.transactions.close()

    def _take_over(self, error: BaseException) -> None:
        """Fail every batch the sender has not completed (none once it has stopped: its
        last act is failing them), each once (_dispatch), and release flush()'s waiters."""
        acc = self.accumulator
        with acc.lock:
            left = sorted(acc.incomplete, key=lambda b: b.order)
            acc.batches.clear()
        if not left:
            return
        with self._completion_lock:
            left = [b for b in left if b not in self._completed]
            self._taken_over.update(left)
            callbacks = list(self._batch_callbacks)
        for batch in left:
            # (the futures too: a future completes once, so the sender's later completion
            # of the batch changes nothing)
            for _index, fut in list(batch.futures):
                fut.set_exception(error)
            for cb in callbacks:
                try:
                    cb(batch, -1, error)
                except Exception:  # one callback raising leaves the others to run
                    import logging

                    logging.getLogger(__name__).exception(
                        "a batch callback raised for %s-%d", batch.topic, batch.partition)
            acc.done(batch)
