"""The data source's options, named as Spark's own Kafka connector names them.

Spark's connector ignores option names it does not know (a typo in `startingOfsets` silently
reads from the default); here every name is checked and an unknown one is refused with the
closest known one. (Spark hands a Python data source its option names lowercased: the
message names the known option in its documented spelling.) Plain Python: no pyspark
import, so the loader and the tests use it too.
"""

from __future__ import annotations

import difflib
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkactl.client.fetcher import EARLIEST, LATEST
from kafkactl.client.producer import PROPERTY_NAMES
from kafkactl.client.security import SECURITY_KEYS, ClientSecurity, SecurityConfigError
from kafkactl.protocol.errors import ErrorCode, KafkaError

TopicPartition = tuple[str, int]

# The client's security, `kafka.`-prefixed as Spark's connector passes Kafka properties on:
# kafka.security.protocol, kafka.sasl.mechanism, kafka.sasl.jaas.config, kafka.ssl.*...
SECURITY_OPTIONS = tuple(f"kafka.{k}" for k in sorted(SECURITY_KEYS))

# Kafka consumer properties (`kafka.`-prefixed) that kafkactl's fetches use: name -> how.
CONSUMER_PROPERTIES = {
    "client.id": "the client id of the driver's and the executors' connections",
    "fetch.max.wait.ms": "how long a Fetch waits for data",
    "fetch.min.bytes": "the bytes a Fetch waits for",
    "fetch.max.bytes": "the bytes one Fetch returns at most",
    "max.partition.fetch.bytes": "the bytes of one partition one Fetch returns at most",
    "isolation.level": "read_uncommitted (default) or read_committed",
    "request.timeout.ms": "how long a request waits for its answer",
    "retry.backoff.ms": "the pause before a retry",
    "metadata.max.age.ms": "how old cached metadata may get",
    "socket.connection.setup.timeout.ms": "how long a connection attempt waits",
    "check.crcs": "check each batch's CRC (true, the default) or not",
    "group.id": "the consumer group id (kafkactl's reads join no group: recorded only)",
}
# Java consumer properties that have no counterpart in kafkactl's reads (no group is
# joined, no record is deserialized): accepted so that a job's options carry over unchanged.
CONSUMER_NO_EFFECT = (
    "session.timeout.ms", "heartbeat.interval.ms", "max.poll.records", "max.poll.interval.ms",
    "receive.buffer.bytes", "send.buffer.bytes", "reconnect.backoff.ms",
    "reconnect.backoff.max.ms", "connections.max.idle.ms", "client.dns.lookup",
    "default.api.timeout.ms", "client.rack", "allow.auto.create.topics",
    "partition.assignment.strategy", "exclude.internal.topics", "metrics.recording.level",
    "metrics.num.samples", "metrics.sample.window.ms", "auto.commit.interval.ms",
)
# Refused as Spark's connector refuses them, with what to use instead.
CONSUMER_REFUSED = {
    "auto.offset.reset": "set the source option startingOffsets instead",
    "enable.auto.commit": "offsets are kept in the query's checkpoint, never committed",
    "key.deserializer": "keys are always binary: cast or decode the key column",
    "value.deserializer": "values are always binary: cast or decode the value column",
    "interceptor.classes": "kafkactl runs no consumer interceptors",
}
CONSUMER_OPTIONS = tuple(f"kafka.{k}" for k in (*CONSUMER_PROPERTIES, *CONSUMER_NO_EFFECT))

READ_OPTIONS = (
    "kafka.bootstrap.servers", "bootstrap", "subscribe", "subscribePattern", "assign",
    "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
    "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "failOnDataLoss", "minPartitions",
    "maxRecordsPerPartition", "includeHeaders", "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
) + CONSUMER_OPTIONS + SECURITY_OPTIONS
STREAM_OPTIONS = READ_OPTIONS + ("maxOffsetsPerTrigger", "minOffsetsPerTrigger",
                                 "maxTriggerDelay")
# The writer takes `topic` and Kafka producer properties prefixed `kafka.`, as Spark's does.
WRITE_OPTIONS = ("kafka.bootstrap.servers", "bootstrap", "topic", "includeHeaders",
                 "transactional", "transactionalIdPrefix",
                 "kafka.transaction.timeout.ms") + tuple(
    f"kafka.{p}" for p in sorted(PROPERTY_NAMES) if p != "bootstrap.servers") + SECURITY_OPTIONS

DATA_LOSS_HINT = "set failOnDataLoss=false to skip"


class OptionError(ValueError):
    """A data source option is unknown, missing or malformed."""


class DataLossError(Exception):
    """Requested offsets are no longer (or not yet) in the log and failOnDataLoss=true."""


class UnknownTopicError(OptionError):
    """A topic named in `subscribe` (or spark-load's --topic) does not exist."""

    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        names = ", ".join(topics)
        super().__init__(
            f"topic{'s' if len(topics) > 1 else ''} {names} "
            f"do{'' if len(topics) > 1 else 'es'} not exist (named in subscribe); "
            "create it first, or use subscribePattern to read whatever matches")


class UnauthorizedTopicError(KafkaError):
    """Topics (named in subscribe or assign, or spark-load's --topic) the credentials may
    not Describe: the broker answers TOPIC_AUTHORIZATION_FAILED for such a topic, whether
    it exists or not."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED

    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        super().__init__(
            f"topic{'s' if len(topics) > 1 else ''} {', '.join(topics)}: "
            "TOPIC_AUTHORIZATION_FAILED (these credentials may not Describe "
            f"{'them' if len(topics) > 1 else 'it'})")


def canonical_options(options: Mapping[str, str], known: tuple[str, ...]) -> dict[str, str]:
    """Case-insensitive option names -> their canonical spelling; unknown names refused,
    with the closest known name."""
    by_lower = {k.lower(): k for k in known}
    out: dict[str, str] = {}
    unknown = []
    for k, v in options.items():
        if k.lower() == "path" and not v:
            continue
        name = by_lower.get(k.lower())
        if name is None:
            refused = CONSUMER_REFUSED.get(k.lower().removeprefix("kafka."))
            if refused is not None and k.lower().startswith("kafka."):
                raise OptionError(f"option {k!r} is not supported: {refused}")
            unknown.append(k)
        else:
            out[name] = v
    if unknown:
        hints = []
        for u in unknown:
            close = difflib.get_close_matches(u.lower(), list(by_lower), n=1, cutoff=0.75)
            if close:
                hints.append(f"{u!r}: did you mean {by_lower[close[0]]}?")
        raise OptionError(
            f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"for format kafkactl ({'; '.join(hints) + '; ' if hints else ''}option names "
            f"are not case-sensitive: Spark passes them lowercased); known options: "
            f"{', '.join(known)}")
    return out


def parse_bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"option {name} must be true or false (got {value!r})")


def parse_positive_int(name: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be an integer (got {value!r})") from None
    if n <= 0:
        raise OptionError(f"option {name} must be > 0 (got {n})")
    return n


_DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                   "d": 86_400_000}


def parse_duration_ms(name: str, value: str) -> int:
    """Spark's time strings: `15m`, `30s`, `500ms`, `1h`; a bare number is milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", value.lower())
    if m is None or m.group(2) not in ("", *_DURATION_UNITS):
        raise OptionError(f"option {name} must be a duration like 15m, 30s or 500ms "
                          f"(got {value!r})")
    return int(m.group(1)) * _DURATION_UNITS.get(m.group(2) or "ms", 1)


def parse_partition_json(name: str, value: str, *, values: bool,
                         timestamps: bool = False) -> dict[TopicPartition, int]:
    """`{"t":{"0":23,"1":-2}}` (values=True) or `{"t":[0,1]}` (assign) -> {(t, p): offset}.
    With timestamps=True the values are milliseconds since the epoch (>= 0)."""
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} is not valid JSON ({e.msg}): {value!r}") from None
    shape = ('{"topic":{"0":1700000000000}}' if timestamps else
             '{"topic":{"0":23,"1":-2}}' if values else '{"topic":[0,1]}')
    if not isinstance(doc, dict):
        raise OptionError(f"option {name} must be a JSON object like {shape}")
    out: dict[TopicPartition, int] = {}
    for topic, parts in doc.items():
        items = (parts.items() if isinstance(parts, dict) else None) if values else (
            [(p, 0) for p in parts] if isinstance(parts, list) else None)
        if items is None:
            raise OptionError(f"option {name}: topic {topic!r} must map to "
                              f"{'an object of partition: offset' if values else 'a list'}"
                              f" (like {shape})")
        for p, off in items:
            try:
                pi = int(p)
            except (TypeError, ValueError):
                raise OptionError(f"option {name}: partition {p!r} of {topic!r} is not an "
                                  "integer") from None
            if not isinstance(off, int) or isinstance(off, bool) or off < (0 if timestamps
                                                                          else -2):
                raise OptionError(
                    f"option {name}: {'timestamp' if timestamps else 'offset'} {off!r} of "
                    f"{topic}-{pi} must be " + ("milliseconds since the epoch (>= 0)"
                                                if timestamps else
                                                "an integer >= 0, -2 (earliest) or -1 "
                                                "(latest)"))
            out[(topic, pi)] = off
    return out


@dataclass
class ReadOptions:
    """Validated reader options (picklable: they travel to the executors)."""

    bootstrap: str
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: int | dict[TopicPartition, int] = EARLIEST   # EARLIEST, LATEST or per partition
    ending: int | dict[TopicPartition, int] = LATEST
    starting_timestamp: int | None = None   # one timestamp for every partition
    ending_timestamp: int | None = None
    starting_by_timestamp: dict[TopicPartition, int] | None = None   # per partition
    ending_by_timestamp: dict[TopicPartition, int] | None = None
    # no record at or after a starting timestamp: "error" (Spark's default) or "latest"
    starting_timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    poll_timeout_ms: int = 120000
    group_id: str | None = None
    raw: dict[str, str] = field(default_factory=dict)
    # security properties as text (an SSLContext does not pickle); built where they are used
    security_properties: dict[str, str] = field(default_factory=dict)
    # kafka.* consumer properties (un-prefixed) kafkactl's fetches use
    consumer_properties: dict[str, str] = field(default_factory=dict)

    def client_security(self) -> ClientSecurity:
        return security_from(self.security_properties)

    @property
    def check_crcs(self) -> bool:
        return self.consumer_properties.get("check.crcs", "true").lower() != "false"

    def consumer(self, client_id: str, **overrides: Any) -> Any:
        """A SimpleConsumer with these options' connection and fetch settings."""
        from kafkactl.client.consumer import SimpleConsumer
        from kafkactl.client.kafka_client import KafkaClient

        props = self.consumer_properties
        ints = {k: int(v) for k, v in props.items() if k.endswith((".ms", ".bytes"))}
        client = KafkaClient(
            self.bootstrap, client_id=props.get("client.id", client_id),
            request_timeout_ms=ints.get("request.timeout.ms", 30000),
            connect_timeout_ms=ints.get("socket.connection.setup.timeout.ms", 10000),
            retry_backoff_ms=ints.get("retry.backoff.ms", 100),
            metadata_max_age_ms=ints.get("metadata.max.age.ms", 300000),
            security=self.client_security())
        kwargs: dict[str, Any] = {
            "max_wait_ms": ints.get("fetch.max.wait.ms", 500),
            "min_bytes": ints.get("fetch.min.bytes", 1),
            "max_bytes": ints.get("fetch.max.bytes", 52428800),
            "max_partition_bytes": ints.get("max.partition.fetch.bytes", 1048576),
            "isolation_level": int(props.get("isolation.level") == "read_committed"),
        }
        kwargs.update(overrides)
        return SimpleConsumer(client=client, **kwargs)


def security_from(props: dict[str, str]) -> ClientSecurity:
    """The ClientSecurity of un-prefixed security properties; OptionError names a bad one."""
    try:
        return ClientSecurity.from_properties(props)
    except SecurityConfigError as e:
        raise OptionError(f"option kafka.{e}") from None


def consumer_properties(opts: Mapping[str, str]) -> dict[str, str]:
    """The kafkactl-used kafka.* consumer properties of canonical options, checked."""
    out = {k[len("kafka."):]: v.strip() for k, v in opts.items()
           if k.startswith("kafka.") and k[len("kafka."):] in CONSUMER_PROPERTIES}
    for k, v in out.items():
        if k.endswith((".ms", ".bytes")):
            try:
                if int(v) < 0:
                    raise ValueError
            except ValueError:
                raise OptionError(f"option kafka.{k} must be an integer >= 0 "
                                  f"(got {v!r})") from None
        elif k == "isolation.level" and v not in ("read_uncommitted", "read_committed"):
            raise OptionError("option kafka.isolation.level must be read_uncommitted or "
                              f"read_committed (got {v!r})")
        elif k == "check.crcs":
            parse_bool("kafka.check.crcs", v)
        elif k in ("client.id", "group.id") and not v:
            raise OptionError(f"option kafka.{k} must not be empty")
    return out


def _offsets(name: str, value: str | None, default: int) -> int | dict[TopicPartition, int]:
    if value is None:
        return default
    v = value.strip()
    if v.lower() == "earliest":
        return EARLIEST
    if v.lower() == "latest":
        return LATEST
    return parse_partition_json(name, v, values=True)


def _timestamp(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        ts = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be milliseconds since the epoch "
                          f"(got {value!r})") from None
    if ts < 0:
        raise OptionError(f"option {name} must be >= 0 (got {ts})")
    return ts


def _subscription(ro: ReadOptions, opts: Mapping[str, str]) -> None:
    given = [k for k in ("subscribe", "subscribePattern", "assign") if opts.get(k)]
    if len(given) != 1:
        raise OptionError("exactly one of the options subscribe, subscribePattern, assign "
                          f"must be given (got {', '.join(given) or 'none'})")
    if "subscribe" in opts:
        ro.subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not ro.subscribe:
            raise OptionError("option subscribe needs topic names: 'a,b'")
    elif "subscribePattern" in opts:
        ro.pattern = opts["subscribePattern"]
        try:
            re.compile(ro.pattern)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a valid regex: {e}") from None
    else:
        ro.assign = tuple(sorted(parse_partition_json("assign", opts["assign"], values=False)))


def _positions(ro: ReadOptions, opts: Mapping[str, str], streaming: bool) -> None:
    """startingOffsets/endingOffsets and their by-timestamp forms."""
    ro.starting = _offsets("startingOffsets", opts.get("startingOffsets"),
                           LATEST if streaming else EARLIEST)
    ro.ending = _offsets("endingOffsets", opts.get("endingOffsets"), LATEST)
    for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
        if streaming and name in opts:
            raise OptionError(f"option {name} is for batch queries only")
    if not streaming:
        if ro.starting == LATEST or (isinstance(ro.starting, dict)
                                     and LATEST in ro.starting.values()):
            raise OptionError("startingOffsets latest (-1) is not allowed in a batch query")
        if ro.ending == EARLIEST or (isinstance(ro.ending, dict)
                                     and EARLIEST in ro.ending.values()):
            raise OptionError("endingOffsets earliest (-2) is not allowed in a batch query")
    ro.starting_timestamp = _timestamp("startingTimestamp", opts.get("startingTimestamp"))
    ro.ending_timestamp = _timestamp("endingTimestamp", opts.get("endingTimestamp"))
    for name in ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp"):
        if name in opts:
            parsed = parse_partition_json(name, opts[name], values=True, timestamps=True)
            if name.startswith("starting"):
                ro.starting_by_timestamp = parsed
            else:
                ro.ending_by_timestamp = parsed
    strategy = opts.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option startingOffsetsByTimestampStrategy must be error or latest "
                          f"(got {strategy!r})")
    ro.starting_timestamp_strategy = strategy


def _limits(ro: ReadOptions, opts: Mapping[str, str]) -> None:
    for name, attr in (("minPartitions", "min_partitions"),
                       ("maxRecordsPerPartition", "max_records_per_partition"),
                       ("maxOffsetsPerTrigger", "max_offsets_per_trigger"),
                       ("minOffsetsPerTrigger", "min_offsets_per_trigger"),
                       ("kafkaConsumer.pollTimeoutMs", "poll_timeout_ms")):
        if name in opts:
            setattr(ro, attr, parse_positive_int(name, opts[name]))
    for name in ("fetchOffset.numRetries", "fetchOffset.retryIntervalMs"):
        if name in opts:
            parse_positive_int(name, opts[name])  # accepted: ListOffsets retries anyway
    if "maxTriggerDelay" in opts:
        ro.max_trigger_delay_ms = parse_duration_ms("maxTriggerDelay", opts["maxTriggerDelay"])
    if (ro.min_offsets_per_trigger and ro.max_offsets_per_trigger
            and ro.min_offsets_per_trigger > ro.max_offsets_per_trigger):
        raise OptionError(f"option minOffsetsPerTrigger ({ro.min_offsets_per_trigger}) is "
                          f"greater than maxOffsetsPerTrigger ({ro.max_offsets_per_trigger})")


def parse_read_options(options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
    opts = canonical_options(options, STREAM_OPTIONS if streaming else READ_OPTIONS)
    bootstrap = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap")
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers (or bootstrap) is required, "
                          "e.g. .option('kafka.bootstrap.servers', '127.0.0.1:9092')")
    ro = ReadOptions(bootstrap=bootstrap, raw=opts, security_properties={
        k[len("kafka."):]: v for k, v in opts.items() if k in SECURITY_OPTIONS},
        consumer_properties=consumer_properties(opts))
    ro.client_security()  # a bad one fails on the driver
    _subscription(ro, opts)
    _positions(ro, opts, streaming)
    _limits(ro, opts)
    if "failOnDataLoss" in opts:
        ro.fail_on_data_loss = parse_bool("failOnDataLoss", opts["failOnDataLoss"])
    if "includeHeaders" in opts:
        ro.include_headers = parse_bool("includeHeaders", opts["includeHeaders"])
    # Spark: kafka.group.id wins over groupIdPrefix; else a unique id per query
    if "groupIdPrefix" in opts and not opts["groupIdPrefix"].strip():
        raise OptionError("option groupIdPrefix must not be empty")
    ro.group_id = ro.consumer_properties.get("group.id") or (
        f"{opts.get('groupIdPrefix', 'spark-kafka-source')}-kafkactl-{time.time_ns():x}")
    return ro
