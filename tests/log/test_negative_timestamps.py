"""`message.timestamp.difference.max.ms` and negative timestamps, as Kafka's
LogValidator.validateTimestamp: only NO_TIMESTAMP (-1) is exempt. A record stamped -2 or
-5 (magic 1 through Produce v2, magic 2 through Produce v3+) is INVALID_TIMESTAMP when the
limit is set, with a record error naming it, wherever it sits in its batch; at the
default limit (Long.MAX_VALUE) every timestamp is accepted. Magic 0 has no timestamps (-1)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kafkactl.log import validator
from kafkactl.log.validator import BatchValidationError, validate_batches_py
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.builder import RecordBatchBuilder
from kafkactl.record.codecs import Compression
from kafkactl.record.convert import up_convert
from kafkactl.record.legacy import build_message_set
from tests.broker.wire import Wire
from tests.conftest import BrokerProcess

NOW = 1_700_000_000_000
LONG_MAX = 2**63 - 1
LIMIT = 60_000


def _v2(timestamps: list[int], codec: Compression = Compression.NONE) -> bytes:
    b = RecordBatchBuilder(compression=codec)
    for i, ts in enumerate(timestamps):
        b.append(ts, b"k%d" % i, b"v%d" % i)
    return b.build()


def _v1(timestamps: list[int], codec: Compression = Compression.NONE) -> bytes:
    """A magic-1 message set as a Produce v2 carries it, up-converted as the broker does."""
    return up_convert(build_message_set(1, [(ts, b"k", b"v") for ts in timestamps], codec),
                      assign_offsets=True)


FORMATS = {"v2": _v2, "v1": _v1}


def _validate(buf: bytes, limit: int, fn: Any = None) -> Any:
    fn = fn or validator.validate_batches
    return fn(memoryview(bytearray(buf)), max_message_bytes=1 << 20,
              timestamp_type="CreateTime", max_timestamp_difference_ms=limit, now_ms=NOW,
              produce_version=9, single_batch=False, topic_partition="t-0")


@pytest.mark.parametrize("fn", [None, validate_batches_py], ids=["broker", "reference"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_minus_one_is_exempt(fmt: str, codec: Compression, fn: Any) -> None:
    (info,) = _validate(FORMATS[fmt]([-1, -1], codec), LIMIT, fn)
    assert info.record_count == 2


@pytest.mark.parametrize("fn", [None, validate_batches_py], ids=["broker", "reference"])
@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("ts", [-2, -5, -(2**62)])
def test_other_negative_timestamps_are_refused(fmt: str, ts: int, fn: Any) -> None:
    with pytest.raises(BatchValidationError) as e:
        _validate(FORMATS[fmt]([ts]), LIMIT, fn)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _m in e.value.record_errors] == [0]
    assert f"Timestamp {ts} of message with offset 0 is out of range" in \
        e.value.record_errors[0][1]
    assert f"[{NOW - LIMIT}, {NOW + LIMIT}]" in e.value.record_errors[0][1]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_a_bad_record_inside_a_batch_is_named(fmt: str, codec: Compression) -> None:
    """Not only the batch header's first and max timestamps: every record's."""
    with pytest.raises(BatchValidationError) as e:
        _validate(FORMATS[fmt]([NOW, -5, -1, NOW - 1000, -2], codec), LIMIT)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _m in e.value.record_errors] == [1, 4]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize("ts", [-1, -2, -5, 0, NOW + 10**9])
def test_no_limit_accepts_every_timestamp(fmt: str, ts: int) -> None:
    (info,) = _validate(FORMATS[fmt]([ts, NOW]), LONG_MAX)
    assert info.record_count == 2


def test_in_range_timestamps_pass_and_far_ones_fail() -> None:
    assert _validate(_v2([NOW - LIMIT, NOW + LIMIT]), LIMIT)
    for ts in (NOW - LIMIT - 1, NOW + LIMIT + 1):
        with pytest.raises(BatchValidationError) as e:
            _validate(_v2([NOW, ts]), LIMIT)
        assert e.value.code == ErrorCode.INVALID_TIMESTAMP
        assert [i for i, _m in e.value.record_errors] == [1]


def test_log_append_time_topics_take_any_timestamp() -> None:
    (info,) = validator.validate_batches(
        memoryview(bytearray(_v2([-5]))), max_message_bytes=1 << 20,
        timestamp_type="LogAppendTime", max_timestamp_difference_ms=LIMIT, now_ms=NOW,
        produce_version=9, single_batch=True)
    assert info.record_count == 1


# ---- through a broker: Produce v0-v2 (magic 0/1) and v9 (magic 2) ---------------------------

@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


def _produce(w: Wire, topic: str, fmt: str, timestamps: list[int | None]) -> dict[str, Any]:
    if fmt == "v2":
        b = RecordBatchBuilder()
        for ts in timestamps:
            b.append(-1 if ts is None else ts, b"k", b"v")
        return w.produce(topic, b.build(), version=9)
    magic = 0 if fmt == "v0" else 1
    return w.produce(topic, build_message_set(magic, [(ts, b"k", b"v") for ts in timestamps]),
                     version=magic * 2)


@pytest.mark.parametrize("fmt", ["v0", "v1", "v2"])
def test_produce_with_the_limit_set(broker: Any, fmt: str) -> None:
    strict, lax = f"neg-ts-strict-{fmt}", f"neg-ts-lax-{fmt}"
    with Wire(broker.bootstrap) as w:
        assert w.create_topic(strict, configs={
            "message.timestamp.difference.max.ms": str(LIMIT)})["error_code"] == 0
        assert w.create_topic(lax)["error_code"] == 0
        now = int(time.time() * 1000)
        assert _produce(w, strict, fmt, [-1, now])["error_code"] == 0
        for ts in (-2, -5):
            r = _produce(w, strict, fmt, [now, ts])
            if fmt == "v0":  # magic 0 carries no timestamp: every record is -1
                assert r["error_code"] == 0, r
                continue
            assert r["error_code"] == ErrorCode.INVALID_TIMESTAMP, r
            if fmt == "v2":  # Produce v8+ names the record
                assert [e["batch_index"] for e in r["record_errors"]] == [1], r
            assert _produce(w, lax, fmt, [now, ts])["error_code"] == 0
        end = w.fetch(strict, 0)["high_watermark"]
        assert end == (6 if fmt == "v0" else 2)
