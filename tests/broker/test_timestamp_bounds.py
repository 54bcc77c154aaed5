"""KIP-937 (Kafka 3.6): message.timestamp.before.max.ms and message.timestamp.after.max.ms
bound a CreateTime record's timestamp before and after the broker's clock; each one unset
falls back to the deprecated message.timestamp.difference.max.ms. They were accepted and
stored, never enforced."""

from __future__ import annotations

import time

from kafkactl.log.config import LogConfig
from kafkactl.protocol.errors import ErrorCode
from tests.conftest import BrokerProcess

from .wire import Wire, batch

HOUR_MS = 3_600_000
LONG_MAX = 2**63 - 1


def test_bounds_fall_back_to_the_difference() -> None:
    assert LogConfig().timestamp_bounds == (LONG_MAX, LONG_MAX)
    c = LogConfig.from_properties({"message.timestamp.difference.max.ms": "1000"})
    assert c.timestamp_bounds == (1000, 1000)
    c = LogConfig.from_properties({"message.timestamp.difference.max.ms": "1000",
                                   "message.timestamp.before.max.ms": "5000"})
    assert c.timestamp_bounds == (5000, 1000)
    c = LogConfig.from_properties({"log.message.timestamp.after.max.ms": "7"})
    assert c.timestamp_bounds == (LONG_MAX, 7)


def _code(w: Wire, topic: str, offset_ms: int) -> int:
    ts = int(time.time() * 1000) + offset_ms
    return int(w.produce(topic, batch([b"v"], timestamp=ts))["error_code"])


def test_before_and_after_bounds_are_enforced(module_broker: BrokerProcess) -> None:
    with Wire(module_broker.bootstrap) as w:
        assert w.create_topic("tsb", configs={
            "message.timestamp.before.max.ms": str(HOUR_MS)})["error_code"] == 0
        assert _code(w, "tsb", -2 * HOUR_MS) == ErrorCode.INVALID_TIMESTAMP
        assert _code(w, "tsb", -HOUR_MS // 2) == 0
        assert _code(w, "tsb", 48 * HOUR_MS) == 0  # after: unbounded
        assert w.create_topic("tsa", configs={
            "message.timestamp.after.max.ms": "60000"})["error_code"] == 0
        assert _code(w, "tsa", 2 * 60000) == ErrorCode.INVALID_TIMESTAMP
        assert _code(w, "tsa", -48 * HOUR_MS) == 0  # before: unbounded
        assert w.create_topic("tsd", configs={
            "message.timestamp.difference.max.ms": "60000",
            "message.timestamp.before.max.ms": str(HOUR_MS)})["error_code"] == 0
        assert _code(w, "tsd", -HOUR_MS // 2) == 0  # before wins over the difference
        assert _code(w, "tsd", 2 * 60000) == ErrorCode.INVALID_TIMESTAMP  # the difference
        assert w.fetch("tsd", 0)["high_watermark"] == 1  # the refused one is not stored
