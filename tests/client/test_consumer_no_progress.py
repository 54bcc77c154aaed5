"""The consumer's answer to a fetch that can make no progress (item 11, client side): bytes
below the partition limit that hold no whole batch, again and again at the same offset, are
an error naming the offset instead of an endless refetch loop. (The real broker answers
CORRUPT_MESSAGE for a torn batch, see tests/broker/test_startup_safety.py; this covers
brokers that send the torn bytes.) Both are the data's errors (CorruptFetchError), not a
retriable Kafka error: a group consumer took them for a lost cluster and refetched for
max.poll.interval.ms (5 minutes), saying it had lost its coordinator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactl.client.consumer import NO_PROGRESS_LIMIT, Consumer
from kafkactl.client.fetcher import CorruptFetchError, PartitionFetch
from kafkactl.protocol.errors import KafkaError
from kafkactl.record.batch import RecordBatchBuilder


def _batch(base: int, n: int = 5) -> bytes:
    b = RecordBatchBuilder(base_offset=base)
    for i in range(n):
        b.append(1000 + i, b"k", b"v" * 50)
    return b.build()


def _answer(records: bytes, offset: int, hw: int = 100) -> PartitionFetch:
    return PartitionFetch("t", 0, 0, hw, hw, 0, memoryview(records), offset)


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    c = Consumer(bootstrap_servers="127.0.0.1:9", max_partition_fetch_bytes=1 << 20)
    c.positions[("t", 0)] = 10
    yield c
    c.close()


def test_torn_batch_answers_are_an_error_with_the_offset(consumer: Consumer) -> None:
    torn = _batch(10)[:-37]
    out: list[PartitionFetch] = []
    for _ in range(NO_PROGRESS_LIMIT - 1):
        consumer._handle(_answer(torn, 10), out)
    assert out == [] and consumer.positions[("t", 0)] == 10
    with pytest.raises(CorruptFetchError, match="at offset 10 makes no progress") as e:
        consumer._handle(_answer(torn, 10), out)
    assert not isinstance(e.value, KafkaError) and e.value.offset == 10


def test_progress_resets_the_count_and_a_full_partition_limit_is_not_torn(
        consumer: Consumer) -> None:
    out: list[PartitionFetch] = []
    whole = _batch(10)
    for _ in range(NO_PROGRESS_LIMIT - 1):
        consumer._handle(_answer(whole[:-37], 10), out)
    consumer._handle(_answer(whole, 10), out)
    assert consumer.positions[("t", 0)] == 15
    big = Consumer(bootstrap_servers="127.0.0.1:9", max_partition_fetch_bytes=100)
    big.positions[("t", 0)] = 10
    for _ in range(NO_PROGRESS_LIMIT + 2):  # a batch bigger than the limit: KIP-74 case
        big._handle(_answer(whole[:100], 10), out)
    big.close()


def test_broker_error_names_the_offset(consumer: Consumer) -> None:
    answer = PartitionFetch("t", 0, 2, 100, 100, 0, memoryview(b""), 10)
    with pytest.raises(CorruptFetchError, match="t-0 at offset 10: the broker answers "
                                                "CORRUPT_MESSAGE") as e:
        consumer._handle(answer, [])
    assert not isinstance(e.value, KafkaError) and e.value.offset == 10
