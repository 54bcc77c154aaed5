"""LogConfig: the topic-level log settings, with Kafka's defaults and broker synonyms.

Topic keys (`segment.bytes`, `retention.ms`, ...) are the names used by
`kafka-configs`/`--config`; the broker's server.properties names them `log.segment.bytes`,
`log.retention.hours` and so on. `LogConfig.from_properties` accepts both: a topic key
wins over its broker synonym, and among the broker synonyms with units the finest unit
wins (`log.retention.ms` > `log.retention.minutes` > `log.retention.hours`), as in Kafka.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kafkactl.log.errors import ConfigError

LONG_MAX = 2**63 - 1
DAY_MS = 24 * 3600 * 1000

# Broker key -> (topic key, multiplier to milliseconds or 1). Listed finest unit first:
# the first key present wins.
BROKER_SYNONYMS: dict[str, list[tuple[str, int]]] = {
    "segment.bytes": [("log.segment.bytes", 1)],
    "segment.ms": [("log.roll.ms", 1), ("log.roll.hours", 3600 * 1000)],
    "segment.jitter.ms": [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3600 * 1000)],
    "segment.index.bytes": [("log.index.size.max.bytes", 1)],
    "index.interval.bytes": [("log.index.interval.bytes", 1)],
    "flush.messages": [("log.flush.interval.messages", 1)],
    "flush.ms": [("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)],
    "retention.ms": [
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60 * 1000),
        ("log.retention.hours", 3600 * 1000),
    ],
    "retention.bytes": [("log.retention.bytes", 1)],
    "cleanup.policy": [("log.cleanup.policy", 1)],
    "message.timestamp.type": [("log.message.timestamp.type", 1)],
    "max.message.bytes": [("message.max.bytes", 1)],
    "message.timestamp.difference.max.ms": [("log.message.timestamp.difference.max.ms", 1)],
    "message.timestamp.before.max.ms": [("log.message.timestamp.before.max.ms", 1)],
    "message.timestamp.after.max.ms": [("log.message.timestamp.after.max.ms", 1)],
    "compression.type": [("compression.type", 1)],
    "delete.retention.ms": [("log.cleaner.delete.retention.ms", 1)],
    "min.cleanable.dirty.ratio": [("log.cleaner.min.cleanable.ratio", 1)],
    "min.compaction.lag.ms": [("log.cleaner.min.compaction.lag.ms", 1)],
    "max.compaction.lag.ms": [("log.cleaner.max.compaction.lag.ms", 1)],
    "file.delete.delay.ms": [("log.segment.delete.delay.ms", 1)],
    "preallocate": [("log.preallocate", 1)],
}

CLEANUP_POLICIES = {"delete", "compact"}
TIMESTAMP_TYPES = {"CreateTime", "LogAppendTime"}
COMPRESSION_TYPES = {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"}


def invalid(key: str, value: object, why: str) -> ConfigError:
    """Kafka's wording: `Invalid value X for configuration KEY: WHY`."""
    return ConfigError(f"Invalid value {value} for configuration {key}: {why}")


def _int(key: str, value: str, minimum: int, bits: int = 64) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise invalid(key, value, f"Not a number of type {'INT' if bits == 32 else 'LONG'}"
                      ) from None
    if not -(1 << (bits - 1)) <= n < 1 << (bits - 1):
        raise invalid(key, value, f"Not a number of type {'INT' if bits == 32 else 'LONG'}")
    if n < minimum:
        raise invalid(key, value, f"Value must be at least {minimum}")
    return n


def _float(key: str, value: str, lo: float, hi: float) -> float:
    try:
        x = float(str(value).strip())
    except ValueError:
        raise invalid(key, value, "Not a number of type DOUBLE") from None
    if not lo <= x <= hi:
        raise invalid(key, value, f"Value must be between {lo} and {hi}")
    return x


def _bool(key: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise invalid(key, value, "Expected value to be either true or false")


def _policy(key: str, value: str) -> str:
    parts = [p.strip() for p in str(value).split(",") if p.strip()]
    if not parts:
        raise invalid(key, value, "Empty list")
    for p in parts:
        if p not in CLEANUP_POLICIES:
            allowed = ", ".join(sorted(CLEANUP_POLICIES))
            raise invalid(key, value, f"String must be one of: {allowed}")
    return ",".join(parts)


def _choice(choices: set[str]) -> Callable[[str, str], str]:
    def parse(key: str, value: str) -> str:
        v = str(value).strip()
        if v not in choices:
            raise invalid(key, value, f"String must be one of: {', '.join(sorted(choices))}")
        return v

    return parse


# topic key -> parser(key, text) -> value
_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "segment.bytes": lambda k, v: _int(k, v, 14, 32),
    "segment.ms": lambda k, v: _int(k, v, 1),
    "segment.jitter.ms": lambda k, v: _int(k, v, 0),
    "segment.index.bytes": lambda k, v: _int(k, v, 8, 32),
    "index.interval.bytes": lambda k, v: _int(k, v, 0, 32),
    "flush.messages": lambda k, v: _int(k, v, 1),
    "flush.ms": lambda k, v: _int(k, v, 0),
    "retention.ms": lambda k, v: _int(k, v, -1),
    "retention.bytes": lambda k, v: _int(k, v, -1),
    "cleanup.policy": _policy,
    "message.timestamp.type": _choice(TIMESTAMP_TYPES),
    "max.message.bytes": lambda k, v: _int(k, v, 0, 32),
    "message.timestamp.difference.max.ms": lambda k, v: _int(k, v, 0),
    "message.timestamp.before.max.ms": lambda k, v: _int(k, v, 0),
    "message.timestamp.after.max.ms": lambda k, v: _int(k, v, 0),
    "compression.type": _choice(COMPRESSION_TYPES),
    "delete.retention.ms": lambda k, v: _int(k, v, 0),
    "min.cleanable.dirty.ratio": lambda k, v: _float(k, v, 0.0, 1.0),
    "min.compaction.lag.ms": lambda k, v: _int(k, v, 0),
    "max.compaction.lag.ms": lambda k, v: _int(k, v, 1),
    "file.delete.delay.ms": lambda k, v: _int(k, v, 0),
    "preallocate": _bool,
}


def _attr(key: str) -> str:
    return key.replace(".", "_")


@dataclass(frozen=True)
class LogConfig:
    """Topic-level log settings. Attribute names are the topic keys with `_` for `.`."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * DAY_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    message_timestamp_type: str = "CreateTime"
    max_message_bytes: int = 1048588
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX  # KIP-937 (Kafka 3.6)
    message_timestamp_after_max_ms: int = LONG_MAX
    compression_type: str = "producer"
    delete_retention_ms: int = DAY_MS
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    preallocate: bool = False
    # Keys we do not interpret but keep, so AlterConfigs/DescribeConfigs round-trip them.
    extra: Mapping[str, str] = field(default_factory=dict)

    KEYS = tuple(_PARSERS)

    @cached_property  # read on every produce; the config is immutable
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @cached_property
    def min_insync_replicas(self) -> int:
        """min.insync.replicas (validated by config_def when set; kept in `extra`)."""
        raw = self.extra.get("min.insync.replicas", "1")
        return int(raw) if str(raw).strip().isdigit() else 1

    @cached_property
    def timestamp_bounds(self) -> tuple[int, int]:
        """How far (ms) a CreateTime record's timestamp may be before and after the broker's
        clock: message.timestamp.before.max.ms / after.max.ms, each one unset (Long.MAX)
        falling back to the deprecated message.timestamp.difference.max.ms, as Kafka 3.6's
        LogConfig does."""
        diff = self.message_timestamp_difference_max_ms
        before, after = self.message_timestamp_before_max_ms, self.message_timestamp_after_max_ms
        return (before if before != LONG_MAX else diff, after if after != LONG_MAX else diff)

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from topic keys and/or broker (server.properties) synonyms.

        Values not given keep `base`'s (default: Kafka's defaults). Unknown keys that do
        not start with `log.` are kept in `extra`; other broker keys are ignored.
        """
        values: dict[str, Any] = {}
        for key, parse in _PARSERS.items():
            if key in props:
                values[_attr(key)] = parse(key, props[key])
                continue
            for broker_key, scale in BROKER_SYNONYMS.get(key, []):
                if broker_key in props:
                    raw = props[broker_key]
                    if scale != 1:
                        n = _int(broker_key, raw, -1)
                        values[_attr(key)] = n if n < 0 else n * scale
                    else:
                        values[_attr(key)] = parse(broker_key, raw)
                    break
        broker_keys = {bk for syn in BROKER_SYNONYMS.values() for bk, _ in syn}
        extra = dict(base.extra) if base else {}
        for key, value in props.items():
            if key not in _PARSERS and key not in broker_keys and _is_topic_key(key):
                extra[key] = str(value)
        values["extra"] = extra
        return dataclasses.replace(base or cls(), **values)

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        """This config with topic-level overrides applied."""
        return LogConfig.from_properties(props, base=self)

    def to_properties(self) -> dict[str, str]:
        """Topic keys -> string values (Kafka's spelling: booleans lower case)."""
        out: dict[str, str] = {}
        for key in _PARSERS:
            v = getattr(self, _attr(key))
            out[key] = str(v).lower() if isinstance(v, bool) else str(v)
        out.update(self.extra)
        return out


_TOPIC_KEY_PREFIXES = (
    "cleanup.", "compression.", "delete.", "file.", "flush.", "follower.", "index.",
    "leader.", "local.", "max.", "message.", "min.", "preallocate", "remote.",
    "retention.", "segment.", "unclean.",
)


def _is_topic_key(key: str) -> bool:
    return key.startswith(_TOPIC_KEY_PREFIXES) and key != "message.max.bytes"
