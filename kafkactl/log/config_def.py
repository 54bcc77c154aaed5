"""The topic config definitions (Kafka's LogConfig ConfigDef): one table used to validate
CreateTopics / AlterConfigs / IncrementalAlterConfigs and to describe topics.

Each key has a type, a default (as Kafka prints it), a validator and the ConfigType that
DescribeConfigs v3+ reports. Keys that :class:`~kafkactl.log.config.LogConfig` interprets
use its parser as their validator; the others (replication, remote storage, ...) are
validated and stored so that tools can set and read them, even though a single local
broker has nothing to do with them. A name not in this table is refused with Kafka's
"Unknown topic config name" (INVALID_CONFIG).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkactl.log.config import (
    _PARSERS,
    LONG_MAX,
    ConfigError,
    LogConfig,
    _bool,
    _int,
    invalid,
)
from kafkactl.log.message_format_version import message_format_version

# DescribeConfigs' ConfigType (KIP-525).
UNKNOWN, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(10)

Validator = Callable[[str, str], Any]


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: int
    default: str
    validator: Validator

    def validate(self, value: str) -> Any:
        return self.validator(self.name, value)


def _range(lo: int, hi: int, bits: int = 32, also: tuple[int, ...] = ()) -> Validator:
    def check(key: str, value: str) -> int:
        n = _int(key, value, -(1 << (bits - 1)), bits)
        if n not in also and not lo <= n <= hi:
            raise invalid(key, value, f"Value must be between {lo} and {hi}" +
                          "".join(f" or {a}" for a in also))
        return n

    return check


def _at_least(minimum: int, bits: int = 64) -> Validator:
    return lambda k, v: _int(k, v, minimum, bits)


_THROTTLED = re.compile(r"^(\*|(\s*\d+\s*:\s*\d+\s*)(,\s*\d+\s*:\s*\d+\s*)*)?$")


def _throttled_replicas(key: str, value: str) -> str:
    """Kafka's ThrottledReplicaListValidator: `*` or `partition:broker,...`."""
    if not _THROTTLED.match(str(value).strip()):
        raise invalid(key, value, "must be the literal '*' or a list of replicas in the "
                      "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return str(value).strip()




def _message_format_version(key: str, value: str) -> str:
    """The versions Kafka 3.x accepts (0.10.0.0, 2.8, 3.0-IV1, ...); stored, not acted on,
    as Kafka 3.x ignores it."""
    try:
        return message_format_version(str(value))
    except ValueError as e:
        raise invalid(key, value, str(e)) from None


def _defs() -> dict[str, TopicConfigDef]:
    d = LogConfig()
    props = d.to_properties()
    typed: dict[str, int] = {
        "cleanup.policy": LIST, "compression.type": STRING, "delete.retention.ms": LONG,
        "file.delete.delay.ms": LONG, "flush.messages": LONG, "flush.ms": LONG,
        "index.interval.bytes": INT, "max.compaction.lag.ms": LONG,
        "max.message.bytes": INT, "message.timestamp.difference.max.ms": LONG,
        "message.timestamp.type": STRING, "min.cleanable.dirty.ratio": DOUBLE,
        "min.compaction.lag.ms": LONG, "preallocate": BOOLEAN, "retention.bytes": LONG,
        "retention.ms": LONG, "segment.bytes": INT, "segment.index.bytes": INT,
        "segment.jitter.ms": LONG, "segment.ms": LONG,
    }
    table = {k: TopicConfigDef(k, typed.get(k, STRING), props[k], parse)
             for k, parse in _PARSERS.items()}
    others = [
        TopicConfigDef("compression.gzip.level", INT, "-1", _range(1, 9, also=(-1,))),
        TopicConfigDef("compression.lz4.level", INT, "9", _range(1, 17)),
        TopicConfigDef("compression.zstd.level", INT, "3", _range(-131072, 22)),
        TopicConfigDef("follower.replication.throttled.replicas", LIST, "",
                       _throttled_replicas),
        TopicConfigDef("leader.replication.throttled.replicas", LIST, "", _throttled_replicas),
        TopicConfigDef("local.retention.bytes", LONG, "-2", _at_least(-2)),
        TopicConfigDef("local.retention.ms", LONG, "-2", _at_least(-2)),
        TopicConfigDef("message.downconversion.enable", BOOLEAN, "true", _bool),
        TopicConfigDef("message.format.version", STRING, "3.0-IV1", _message_format_version),
        TopicConfigDef("message.timestamp.after.max.ms", LONG, str(LONG_MAX), _at_least(0)),
        TopicConfigDef("message.timestamp.before.max.ms", LONG, str(LONG_MAX), _at_least(0)),
        TopicConfigDef("min.insync.replicas", INT, "1", _at_least(1, 32)),
        TopicConfigDef("remote.storage.enable", BOOLEAN, "false", _bool),
        TopicConfigDef("unclean.leader.election.enable", BOOLEAN, "false", _bool),
    ]
    for o in others:
        table.setdefault(o.name, o)
    return dict(sorted(table.items()))


TOPIC_CONFIGS: dict[str, TopicConfigDef] = _defs()


def config_type(name: str) -> int:
    d = TOPIC_CONFIGS.get(name)
    return d.type if d else UNKNOWN


def is_list(name: str) -> bool:
    return config_type(name) == LIST


def validate_topic_configs(props: Mapping[str, str | None]) -> None:
    """Raise ConfigError (INVALID_CONFIG) naming the first unknown key or invalid value."""
    for key, value in props.items():
        d = TOPIC_CONFIGS.get(key)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {key}")
        if value is None:
            raise ConfigError(f"Null value not supported for topic config: {key}")
        d.validate(value)


def validate_topic_config_values(config: LogConfig) -> None:
    """The checks across keys of a topic's effective config (its overrides over the broker
    defaults), as Kafka's LogConfig.validateValues: ConfigError (INVALID_CONFIG) when
    min.compaction.lag.ms is above max.compaction.lag.ms."""
    low, high = config.min_compaction_lag_ms, config.max_compaction_lag_ms
    if low > high:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                          f"max.compaction.lag.ms ({high})")


def describe_values(config: LogConfig) -> dict[str, str]:
    """Every topic key -> its effective value (LogConfig's, else a stored override or the
    definition's default), in the table's order."""
    props = config.to_properties()
    return {k: props.get(k, d.default) for k, d in TOPIC_CONFIGS.items()}
