from __future__ import annotations

import re

import pytest

from kafkactl.log.config import LONG_MAX, LogConfig
from kafkactl.log.errors import ConfigError


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.retention_bytes == -1
    assert c.flush_messages == LONG_MAX
    assert c.max_message_bytes == 1048588
    assert c.cleanup_policy == "delete"


def test_broker_synonyms_with_unit_precedence() -> None:
    c = LogConfig.from_properties({"log.retention.hours": "1"})
    assert c.retention_ms == 3600_000
    c = LogConfig.from_properties({"log.retention.hours": "1", "log.retention.minutes": "2"})
    assert c.retention_ms == 120_000
    c = LogConfig.from_properties({"log.retention.hours": "1", "log.retention.minutes": "2",
                                   "log.retention.ms": "5"})
    assert c.retention_ms == 5
    c = LogConfig.from_properties({"log.retention.hours": "-1"})
    assert c.retention_ms == -1
    c = LogConfig.from_properties({"log.roll.hours": "2", "log.segment.bytes": "1000",
                                   "message.max.bytes": "77", "log.index.size.max.bytes": "800"})
    assert (c.segment_ms, c.segment_bytes, c.max_message_bytes, c.segment_index_bytes) == (
        7200_000, 1000, 77, 800)


def test_topic_key_beats_broker_synonym_and_overrides_base() -> None:
    base = LogConfig.from_properties({"log.retention.ms": "10", "log.segment.bytes": "5000"})
    c = base.with_overrides({"retention.ms": "99", "log.retention.ms": "11"})
    assert c.retention_ms == 99
    assert c.segment_bytes == 5000


def test_round_trip_properties() -> None:
    c = LogConfig.from_properties({"cleanup.policy": "compact,delete", "preallocate": "true",
                                   "retention.bytes": "123"})
    assert c.compact and c.delete and c.preallocate
    assert LogConfig.from_properties(c.to_properties()) == c
    assert c.to_properties()["preallocate"] == "true"


@pytest.mark.parametrize("props", [
    {"segment.bytes": "abc"}, {"segment.bytes": "1"}, {"cleanup.policy": "keep"},
    {"message.timestamp.type": "Wall"}, {"log.retention.hours": "x"},
    {"min.cleanable.dirty.ratio": "2"},
])
def test_bad_values_are_clear_errors(props: dict[str, str]) -> None:
    key = next(iter(props))
    with pytest.raises(ConfigError, match=f"Invalid value .* for configuration {re.escape(key)}"):
        LogConfig.from_properties(props)
