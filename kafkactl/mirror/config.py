"""MirrorConfig: what to mirror, from where to where, and how; checked before connecting.

Each side's security (`security.protocol`, `sasl.*`, `ssl.*`, librdkafka's or the Java
client's names) travels in its properties: the consumer's for the source cluster, the
producer's for the target, as in Kafka's MirrorMaker config files."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kafkactl.client.consumer import TopicFilter
from kafkactl.client.errors import ConfigError
from kafkactl.client.group.assignors import ASSIGNOR_NAMES
from kafkactl.client.producer import parse_compression, properties_to_kwargs
from kafkactl.client.security import (
    SECURITY_KEYS,
    ClientSecurity,
    SecurityConfigError,
    split_properties,
)

DEFAULT_GROUP = "kafkactl-mirror"
CLIENT_ID = "kafkactl-mirror"  # a stream's clients are CLIENT_ID-N (stream_client_id)
AUTO_STREAMS_MAX = 4

# Kafka consumer property -> GroupConsumer keyword argument (integers unless listed below).
CONSUMER_PROPERTY_NAMES: dict[str, str] = {
    "auto.offset.reset": "auto_offset_reset", "client.id": "client_id",
    "fetch.max.wait.ms": "fetch_max_wait_ms", "fetch.min.bytes": "fetch_min_bytes",
    "fetch.max.bytes": "fetch_max_bytes",
    "max.partition.fetch.bytes": "max_partition_fetch_bytes",
    "session.timeout.ms": "session_timeout_ms",
    "heartbeat.interval.ms": "heartbeat_interval_ms",
    "max.poll.interval.ms": "rebalance_timeout_ms",
    "request.timeout.ms": "request_timeout_ms", "isolation.level": "isolation_level",
    "partition.assignment.strategy": "assignors", "check.crcs": "check_crcs",
    "group.instance.id": "group_instance_id", "max.poll.records": "max_poll_records",
}
# integers that must be positive
_POSITIVE = {"max_poll_records"}
_TEXT = {"client_id", "group_instance_id"}
_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
_OFFSET_RESET = ("earliest", "latest", "none")
_BOOLEAN = {"true": True, "false": False}
# Options of the mirror, not of a consumer: give them as such.
_FIXED_CONSUMER = {"group.id", "bootstrap.servers"}
_FIXED_PRODUCER = {"acks": "all", "enable.idempotence": "true"}
# Kafka's MirrorMaker consumer properties the mirror reads itself (not GroupConsumer
# arguments): exclude.internal.topics (true by default: a --whitelist never selects an
# internal topic such as __consumer_offsets; false: it may, as Java's consumer subscribes to
# a pattern), and enable.auto.commit, which MirrorMaker sets to false: false is what the
# mirror does anyway (it commits a source offset once the target has acknowledged the
# records before it); true is refused, as it would commit records the target may not have.
MIRROR_CONSUMER_PROPERTIES = ("exclude.internal.topics", "enable.auto.commit")


class MirrorConfigError(ValueError):
    """A mirror setting that cannot work (bad regex, bad rename, bad property)."""


def client_security(props: Mapping[str, str], which: str) -> ClientSecurity:
    """The security properties among a side's properties (`security.protocol`,
    `sasl.*`, `ssl.*`) as the ClientSecurity its connections use."""
    try:
        return split_properties(props)[0]
    except SecurityConfigError as e:
        raise MirrorConfigError(f"{which} property {e}") from None


def _with_security(props: Mapping[str, str], which: str,
                   out: dict[str, Any]) -> dict[str, Any]:
    if any(k in SECURITY_KEYS for k in props):
        out["security"] = client_security(props, which)
    return out


def _boolean(key: str, value: str) -> bool:
    try:
        return _BOOLEAN[value.strip().lower()]
    except KeyError:
        raise MirrorConfigError(f"consumer property {key} must be true or false "
                                f"(got {value!r})") from None


def _assignors(key: str, value: str) -> tuple[str, ...]:
    """partition.assignment.strategy: librdkafka's names or Java's classes, as the group
    assignors of kafkactl.client.group (range, roundrobin)."""
    out: list[str] = []
    for name in (n.strip() for n in value.split(",")):
        if not name:
            continue
        known = ASSIGNOR_NAMES.get(name.lower())
        if known is None:
            raise MirrorConfigError(
                f"consumer property {key}: {name} is not an assignor kafkactl has (range or "
                "roundrobin, Java's org.apache.kafka.clients.consumer.RangeAssignor or "
                "RoundRobinAssignor)")
        if known not in out:
            out.append(known)
    if not out:
        raise MirrorConfigError(f"consumer property {key} needs range and/or roundrobin")
    return tuple(out)


def exclude_internal_topics(props: Mapping[str, str]) -> bool:
    """exclude.internal.topics (true unless given): whether internal topics stay out of
    what a --whitelist selects."""
    if "exclude.internal.topics" not in props:
        return True
    return _boolean("exclude.internal.topics", props["exclude.internal.topics"])


def _mirror_property(key: str, value: str) -> None:
    """Check one of MIRROR_CONSUMER_PROPERTIES."""
    if key == "exclude.internal.topics":
        _boolean(key, value)
    elif _boolean(key, value):  # enable.auto.commit
        raise MirrorConfigError(
            "consumer property enable.auto.commit=true could lose records: when to commit "
            "is set by the mirror itself (a source offset once the target has acknowledged "
            "the records before it); leave it out, or set it to false")


def _consumer_value(key: str, name: str, value: str) -> Any:
    """The GroupConsumer argument `name` of consumer property `key`."""
    if name in _TEXT:
        return value
    if name == "auto_offset_reset":
        reset = value.strip().lower()
        if reset not in _OFFSET_RESET:
            raise MirrorConfigError(f"consumer property {key} must be earliest, latest or "
                                    f"none (got {value!r})")
        return reset
    if name == "assignors":
        return _assignors(key, value)
    if name == "check_crcs":
        return value.strip().lower() in ("true", "1", "yes")
    if name == "isolation_level":
        level = _ISOLATION.get(value.strip().lower())
        if level is None:
            raise MirrorConfigError(f"consumer property {key} must be read_committed or "
                                    f"read_uncommitted (got {value!r})")
        return level
    try:
        number = int(value)
    except ValueError:
        raise MirrorConfigError(f"consumer property {key} needs an integer "
                                f"(got {value!r})") from None
    if name in _POSITIVE and number < 1:
        raise MirrorConfigError(f"consumer property {key} must be at least 1 "
                                f"(got {value!r})")
    return number


def consumer_kwargs(props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka consumer properties (`fetch.min.bytes=1024`, `security.protocol=SSL`) ->
    GroupConsumer arguments; MirrorMaker's exclude.internal.topics and
    enable.auto.commit=false are checked and left to the mirror (MIRROR_CONSUMER_PROPERTIES)."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in SECURITY_KEYS:
            continue
        if key in _FIXED_CONSUMER:
            raise MirrorConfigError(f"consumer property {key} is set by the mirror itself "
                                    "(use --group and --source)")
        if key in MIRROR_CONSUMER_PROPERTIES:
            _mirror_property(key, value)
            continue
        name = CONSUMER_PROPERTY_NAMES.get(key)
        if name is None:
            known = sorted([*CONSUMER_PROPERTY_NAMES, *MIRROR_CONSUMER_PROPERTIES])
            raise MirrorConfigError(f"unknown consumer property {key!r} (known: "
                                    f"{', '.join(known)})")
        out[name] = _consumer_value(key, name, value)
    return _with_security(props, "consumer", out)


def producer_kwargs(props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka producer properties -> Producer arguments; acks=all and idempotence stay on."""
    for key, fixed in _FIXED_PRODUCER.items():
        if key in props and props[key].strip().lower() not in (fixed, "-1" if fixed == "all"
                                                                 else fixed):
            raise MirrorConfigError(f"producer property {key}={props[key]} would lose "
                                    f"records: the mirror needs {key}={fixed}")
    # --exactly-once's: transactional.id is the prefix of each stream's id
    # (mirror/exactly_once.py), transaction.timeout.ms its producers' timeout
    txn_keys = ("transactional.id", "transaction.timeout.ms")
    try:
        out = properties_to_kwargs({k: v for k, v in props.items()
                                    if k not in SECURITY_KEYS and k not in txn_keys})
    except ConfigError as e:
        raise MirrorConfigError(str(e)) from None
    if "compression_type" in out:  # checked here, not when the producer starts (exit 1)
        try:
            parse_compression(out["compression_type"])
        except ConfigError as e:
            raise MirrorConfigError(f"producer property compression.type: {e}") from None
    if "transaction.timeout.ms" in props:
        try:
            out["transaction_timeout_ms"] = int(props["transaction.timeout.ms"])
        except ValueError:
            raise MirrorConfigError("producer property transaction.timeout.ms needs an "
                                    f"integer (got {props['transaction.timeout.ms']!r})") from None
    out["acks"] = "all"
    out["enable_idempotence"] = True
    return _with_security(props, "producer", out)


def stream_client_id(props: Mapping[str, str], stream: int, streams: int) -> str:
    """The client.id of stream number `stream`'s clients (its consumer; its producer too
    with --exactly-once) in a process of `streams` streams, given a side's properties: the
    client.id given there, suffixed with the stream's number when the process has several
    (`ID-0`, `ID-1`, ...), else CLIENT_ID-N. Each stream's own, as Kafka's MirrorMaker
    named each stream's consumer GROUP-0, GROUP-1, ... and Connect each task's clients:
    brokers tell clients apart by it in their logs, quotas and group descriptions (a
    worker process, one stream, gets properties with its suffix already: workers.py)."""
    given = props.get("client.id")
    return given if given and streams == 1 else suffixed_client_id(props, stream)


def suffixed_client_id(props: Mapping[str, str], stream: int) -> str:
    """The client.id given in a side's properties (else CLIENT_ID), `-stream` appended."""
    return f"{props.get('client.id') or CLIENT_ID}-{stream}"


def parse_renames(items: Iterable[str]) -> dict[str, str]:
    """`SRC:DST` items -> {source topic: target topic}."""
    out: dict[str, str] = {}
    for item in items:
        src, sep, dst = item.partition(":")
        if not sep or not src or not dst:
            raise MirrorConfigError(f"--rename {item!r} must look like SOURCE:TARGET")
        if src in out and out[src] != dst:
            raise MirrorConfigError(f"--rename gives topic {src!r} two targets")
        out[src] = dst
    return out


def parse_num_streams(text: str) -> int:
    """`--num-streams`: a count, or `auto` (one per CPU, at most AUTO_STREAMS_MAX)."""
    if text.strip().lower() == "auto":
        return max(1, min(os.cpu_count() or 1, AUTO_STREAMS_MAX))
    try:
        n = int(text)
    except ValueError:
        raise MirrorConfigError(f"--num-streams must be a number or auto (got {text!r})") from None
    if n < 1:
        raise MirrorConfigError("--num-streams must be at least 1")
    return n


# a `{m,n}` quantifier (whose comma stays), or a comma (an alternative, as MirrorMaker's)
_QUANTIFIER_OR_COMMA = re.compile(r"\{\d*,\d*\}|,")


def topic_regex(raw: str) -> str:
    """A --whitelist/--blacklist as Kafka's MirrorMaker read one (kafka.utils.TopicFilter):
    trimmed, spaces dropped, a comma as `|` (`orders,payments` is `orders|payments`), and
    the quotes around it that a properties file may bring stripped. The comma of a `{m,n}`
    quantifier stays one: no topic name has a comma, a space or a quote, so this changes
    the meaning of no regex that could match one."""
    regex = raw.strip().replace(" ", "")
    regex = _QUANTIFIER_OR_COMMA.sub(lambda m: "|" if m.group() == "," else m.group(), regex)
    return re.sub(r"""["']+$""", "", re.sub(r"""^["']+""", "", regex))


def check_regex(pattern: str | None, option: str) -> None:
    if pattern is None:
        return
    try:
        re.compile(pattern)
    except re.error as e:
        raise MirrorConfigError(f"{option} {pattern!r} is not a valid regular expression: "
                                f"{e}") from None


@dataclass
class MirrorConfig:
    """Everything a MirrorMaker needs; `validate()` checks it without connecting."""

    source: str
    target: str
    topics: tuple[str, ...] = ()
    whitelist: str | None = None
    blacklist: str | None = None
    group: str = DEFAULT_GROUP
    num_streams: int = 1
    consumer_properties: dict[str, str] = field(default_factory=dict)
    producer_properties: dict[str, str] = field(default_factory=dict)
    abort_on_send_failure: bool = True
    renames: dict[str, str] = field(default_factory=dict)
    copy_topic_configs: bool = False
    topic_refresh_ms: int = 5000
    commit_interval_ms: int = 1000
    # KIP-447 consume-transform-produce: each stream copies in transactions that commit
    # its consumed offsets (mirror/exactly_once.py)
    exactly_once: bool = False
    stream_base: int = 0  # this process's first stream number (worker processes)

    def __post_init__(self) -> None:
        # MirrorMaker's --whitelist 'orders,payments' (topic_regex): the regexes as used
        if self.whitelist is not None:
            self.whitelist = topic_regex(self.whitelist)
        if self.blacklist is not None:
            self.blacklist = topic_regex(self.blacklist)

    def validate(self) -> None:
        if not self.topics and self.whitelist is None:
            raise MirrorConfigError("name the topics to mirror: --whitelist REGEX or --topic T")
        if self.whitelist == "":
            raise MirrorConfigError("--whitelist must not be empty (it would match no topic)")
        check_regex(self.whitelist, "--whitelist")
        check_regex(self.blacklist, "--blacklist")
        if self.num_streams < 1:
            raise MirrorConfigError("--num-streams must be at least 1")
        if not self.group:
            raise MirrorConfigError("--group must not be empty")
        if self.topic_refresh_ms <= 0 or self.commit_interval_ms <= 0:
            raise MirrorConfigError("the refresh and commit intervals must be positive")
        consumer_kwargs(self.consumer_properties)
        producer_kwargs(self.producer_properties)
        if "transactional.id" in self.producer_properties and not self.exactly_once:
            raise MirrorConfigError("producer property transactional.id goes with "
                                    "--exactly-once (it is the prefix of each stream's id)")

    def source_security(self) -> ClientSecurity:
        """How to connect to the source: the consumer properties' security ones."""
        return client_security(self.consumer_properties, "consumer")

    def target_security(self) -> ClientSecurity:
        """How to connect to the target: the producer properties' security ones."""
        return client_security(self.producer_properties, "producer")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MirrorConfig:
        fields = dict(data)
        fields["topics"] = tuple(fields.get("topics", ()))
        return cls(**fields)

    def topic_filter(self) -> TopicFilter:
        """--topic names, or --whitelist minus --blacklist; internal topics only by name,
        unless consumer property exclude.internal.topics=false lets --whitelist select
        them (as Java's consumer subscribed to MirrorMaker's pattern)."""
        return TopicFilter(tuple(self.topics), self.whitelist, self.blacklist,
                           include_internal=not exclude_internal_topics(
                               self.consumer_properties))

    def target_topic(self, source_topic: str) -> str:
        return self.renames.get(source_topic, source_topic)
