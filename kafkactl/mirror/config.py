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
from kafkactl.client.producer import properties_to_kwargs
from kafkactl.client.security import (
    SECURITY_KEYS,
    ClientSecurity,
    SecurityConfigError,
    split_properties,
)

DEFAULT_GROUP = "kafkactl-mirror"
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
_TEXT = {"auto_offset_reset", "client_id", "group_instance_id"}
_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
# Set by the mirror itself: the no-loss protocol needs them.
_FIXED_CONSUMER = {"enable.auto.commit", "group.id", "bootstrap.servers"}
_FIXED_PRODUCER = {"acks": "all", "enable.idempotence": "true"}


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


def consumer_kwargs(props: Mapping[str, str]) -> dict[str, Any]:
    """Kafka consumer properties (`fetch.min.bytes=1024`, `security.protocol=SSL`) ->
    GroupConsumer arguments."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in SECURITY_KEYS:
            continue
        if key in _FIXED_CONSUMER:
            raise MirrorConfigError(f"consumer property {key} is set by the mirror itself "
                                    "(use --group and --source)")
        name = CONSUMER_PROPERTY_NAMES.get(key)
        if name is None:
            raise MirrorConfigError(f"unknown consumer property {key!r} (known: "
                                    f"{', '.join(sorted(CONSUMER_PROPERTY_NAMES))})")
        if name in _TEXT:
            out[name] = value
        elif name == "assignors":
            out[name] = tuple(a.strip() for a in value.split(",") if a.strip())
        elif name == "check_crcs":
            out[name] = value.strip().lower() in ("true", "1", "yes")
        elif name == "isolation_level" and value in _ISOLATION:
            out[name] = _ISOLATION[value]
        else:
            try:
                out[name] = int(value)
            except ValueError:
                raise MirrorConfigError(f"consumer property {key} needs an integer "
                                        f"(got {value!r})") from None
            if name in _POSITIVE and out[name] < 1:
                raise MirrorConfigError(f"consumer property {key} must be at least 1 "
                                        f"(got {value!r})")
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
    if "transaction.timeout.ms" in props:
        try:
            out["transaction_timeout_ms"] = int(props["transaction.timeout.ms"])
        except ValueError:
            raise MirrorConfigError("producer property transaction.timeout.ms needs an "
                                    f"integer (got {props['transaction.timeout.ms']!r})") from None
    out["acks"] = "all"
    out["enable_idempotence"] = True
    return _with_security(props, "producer", out)


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

    def validate(self) -> None:
        if not self.topics and self.whitelist is None:
            raise MirrorConfigError("name the topics to mirror: --whitelist REGEX or --topic T")
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
        return TopicFilter(tuple(self.topics), self.whitelist, self.blacklist)

    def target_topic(self, source_topic: str) -> str:
        return self.renames.get(source_topic, source_topic)
