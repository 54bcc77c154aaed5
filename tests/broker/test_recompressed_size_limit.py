"""max.message.bytes is checked again on the batch the broker recompressed (the topic's
compression.type differs from the producer's codec), as Kafka's UnifiedLog.append does when
`messageSizeMaybeChanged`: a batch too large after recompression is refused with
MESSAGE_TOO_LARGE and nothing is stored (the log end offset does not move)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.codecs import Compression
from tests.broker.wire import Wire, batch

TS = 1_700_000_000_000
DEFAULT_MAX = 1_048_588  # message.max.bytes


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(w: Wire, configs: dict[str, str]) -> str:
    name = _name("rc")
    r = w.create_topic(name, 1, configs)
    assert r["error_code"] == 0, r
    return name


def _end(w: Wire, topic: str) -> int:
    return int(w.fetch(topic, 0, partition_max_bytes=1)["high_watermark"])


@pytest.mark.parametrize("target, codec", [("uncompressed", Compression.GZIP),
                                           ("snappy", Compression.ZSTD)])
def test_30mb_record_too_large_after_recompression(module_broker: Any, target: str,
                                                   codec: Compression) -> None:
    records = batch([b"y\n" * 15_000_000], compression=codec, timestamp=TS)
    assert len(records) < DEFAULT_MAX  # the producer's batch is small
    with Wire(module_broker.bootstrap, timeout=60) as w:
        topic = _create(w, {"compression.type": target})
        r = w.produce(topic, records)
        assert r["error_code"] == ErrorCode.MESSAGE_TOO_LARGE, r
        assert f"after recompression to {target}" in (r.get("error_message") or ""), r
        assert _end(w, topic) == 0  # nothing stored
        # the same batch is taken where the topic keeps the producer's codec
        same = _create(w, {"compression.type": "producer"})
        assert w.produce(same, records)["error_code"] == 0
        assert _end(w, same) == 1


@pytest.mark.parametrize("delta, ok", [(-1, False), (0, True), (1, True)])
def test_limit_applies_to_the_recompressed_size(module_broker: Any, delta: int,
                                                ok: bool) -> None:
    records = batch([b"z" * 200_000, b"q" * 100_000], compression=Compression.GZIP,
                    timestamp=TS)
    with Wire(module_broker.bootstrap, timeout=60) as w:
        # the size of the batch once recompressed, as stored by a topic with room for it
        probe = _create(w, {"compression.type": "uncompressed"})
        assert w.produce(probe, records)["error_code"] == 0
        stored = len(w.fetch(probe, 0, partition_max_bytes=1)["records"])
        assert stored > 300_000 > len(records)
        topic = _create(w, {"compression.type": "uncompressed",
                            "max.message.bytes": str(stored + delta)})
        r = w.produce(topic, records)
        if ok:
            assert r["error_code"] == 0, r
            assert _end(w, topic) == 2
            assert len(w.fetch(topic, 0, partition_max_bytes=1)["records"]) == stored
        else:
            assert r["error_code"] == ErrorCode.MESSAGE_TOO_LARGE, r
            assert str(stored) in (r.get("error_message") or ""), r
            assert _end(w, topic) == 0


def test_confluent_kafka_gzip_to_uncompressed_topic_is_refused(module_broker: Any) -> None:
    from confluent_kafka import KafkaError, Producer

    with Wire(module_broker.bootstrap, timeout=60) as w:
        topic = _create(w, {"compression.type": "uncompressed"})
    p = Producer({"bootstrap.servers": module_broker.bootstrap, "compression.type": "gzip",
                  "message.max.bytes": 50_000_000, "retries": 0})
    errors: list[Any] = []
    p.produce(topic, b"y\n" * 15_000_000, on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(60) == 0
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errors[0]
    with Wire(module_broker.bootstrap, timeout=60) as w:
        assert _end(w, topic) == 0
