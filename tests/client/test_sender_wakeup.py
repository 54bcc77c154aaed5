"""The sender wakes for a lone record, and a refused batch does not strand the ones after it."""

from __future__ import annotations

import time
from collections import deque

import pytest

from kafkactl.client.accumulator import RecordAccumulator


def test_a_batch_on_an_idle_partition_wakes_the_sender() -> None:
    """Before: the sender was woken only when a partition already had a batch queued, so a
    lone record waited out the sender's 1 s idle poll."""
    wakes: list[int] = []
    # a linger no pause of this process can outlast: ready() below finds the batches
    # lingering whatever the machine's load (with 5 ms a CI run once found one ready)
    acc = RecordAccumulator(batch_size=1 << 16, linger_ms=60_000,
                            on_full_batch=lambda: wakes.append(1))
    acc.append("t", 0, None, None, b"a")
    assert wakes == [1]
    acc.append("t", 0, None, None, b"b")  # same batch: no new wake-up
    assert wakes == [1]
    acc.append_values("t", 1, [b"c"])  # another idle partition
    assert wakes == [1, 1]
    ready, wait = acc.ready(time.monotonic(), lambda tp: True)
    assert ready == [] and 0 < wait <= 60.0 + 1e-9  # wakes again when the linger ends


def test_a_batch_being_filled_does_not_park_the_sender_for_its_idle_poll() -> None:
    acc = RecordAccumulator(batch_size=1 << 16, linger_ms=0)
    with acc.lock:
        acc._new_batch(("t", 0), acc.batches.setdefault(("t", 0), deque()), None)
    _, wait = acc.ready(time.monotonic(), lambda tp: True)
    assert wait <= 0.001 + 1e-9


def test_records_after_a_refused_batch_are_delivered(broker) -> None:
    """An idempotent producer: a record the broker refuses (bigger than the topic's
    max.message.bytes) fails alone, and the records after it are not left waiting for
    delivery.timeout.ms behind a sequence gap (a new producer id re-stamps them)."""
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.producer import Producer
    from kafkactl.protocol.errors import MessageTooLargeError

    admin = AdminClient(bootstrap_servers=broker.bootstrap)
    assert admin.create_topics({"small": (1, 1, {"max.message.bytes": "2000"})}) == \
        {"small": None}
    admin.close()
    # batch.size 1000: the big record travels alone (a batch fails as a unit)
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=0, acks="all", batch_size=1000)
    try:
        first = p.send("small", b"one", partition=0)
        first.result(30)
        big = p.send("small", b"x" * 5000, partition=0)
        after = [p.send("small", b"after %d" % i, partition=0) for i in range(20)]
        with pytest.raises(MessageTooLargeError):
            big.result(30)
        offsets = [f.result(30).offset for f in after]  # before the fix: timed out here
        assert offsets == sorted(offsets) and len(set(offsets)) == 20
    finally:
        p.close()


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_batch_too_large_for_the_topic_is_split(broker, idempotent: bool) -> None:
    """Records that fit the topic's max.message.bytes one by one but not together in one
    batch are delivered (in order) by splitting the refused batch, as Kafka's producer
    does; only a record too large on its own fails."""
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.producer import Producer
    from kafkactl.protocol.errors import MessageTooLargeError

    admin = AdminClient(bootstrap_servers=broker.bootstrap)
    assert admin.create_topics({"split": (1, 1, {"max.message.bytes": "2000"})}) == \
        {"split": None}
    admin.close()
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=200,
                 acks="all" if idempotent else 1, enable_idempotence=idempotent)
    try:
        futs = [p.send("split", b"%03d" % i + b"v" * 97, partition=0) for i in range(40)]
        big = p.send("split", b"B" * 5000, partition=0)
        tail = [p.send("split", b"t%d" % i, partition=0) for i in range(5)]
        offsets = [f.result(30).offset for f in futs + tail]
        with pytest.raises(MessageTooLargeError):
            big.result(30)
    finally:
        p.close()
    assert offsets == sorted(offsets) and len(set(offsets)) == 45
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap,
                      consumer_timeout_ms=30000)  # a hang detector
    tp = TopicPartition("split", 0)
    c.assign([tp])
    c.seek_to_beginning()
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 45:
            break
    end = c.end_offsets([tp])[tp]  # and nothing past them
    c.close()
    assert got == [b"%03d" % i + b"v" * 97 for i in range(40)] + [b"t%d" % i for i in range(5)]
    assert end == 45


def test_a_transaction_goes_on_after_its_batch_too_large_for_the_topic_is_split(broker
                                                                               ) -> None:
    """A transactional producer: the refused batch's halves take its sequences (as Kafka's
    producer does) instead of a new producer id, which would abort the transaction. Before:
    commit_transaction failed. A record too large on its own still makes the transaction
    abortable, and the next one commits."""
    from kafka import KafkaConsumer, TopicPartition

    from kafkactl.client.admin import AdminClient
    from kafkactl.client.producer import Producer
    from kafkactl.protocol.errors import MessageTooLargeError

    admin = AdminClient(bootstrap_servers=broker.bootstrap)
    assert admin.create_topics({"txsplit": (1, 1, {"max.message.bytes": "2000"})}) == \
        {"txsplit": None}
    admin.close()
    # batches of about 27 records (3,000 bytes): each is refused and split, several in
    # flight at once behind the first
    p = Producer(bootstrap_servers=broker.bootstrap, linger_ms=200, batch_size=3000,
                 transactional_id="splitter")
    values = [b"%03d" % i + b"v" * 97 for i in range(60)]
    try:
        p.init_transactions()
        p.begin_transaction()
        # the first batch of the producer on the partition, then more behind it
        futs = [p.send("txsplit", v, partition=0) for v in values[:40]]
        p.flush()
        futs += [p.send("txsplit", v, partition=0) for v in values[40:]]
        p.commit_transaction(30)
        offsets = [f.result(0).offset for f in futs]
        p.begin_transaction()
        big = p.send("txsplit", b"B" * 5000, partition=0)
        with pytest.raises(MessageTooLargeError):
            big.result(30)
        p.abort_transaction(30)
        p.begin_transaction()
        last = p.send("txsplit", b"last", partition=0)
        p.commit_transaction(30)
        last_offset = last.result(0).offset
    finally:
        p.close()
    assert offsets == sorted(offsets) and len(set(offsets)) == 60
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      consumer_timeout_ms=30000)  # a hang detector
    tp = TopicPartition("txsplit", 0)
    c.assign([tp])
    c.seek_to_beginning()
    got = []
    for m in c:
        got.append(m.value)
        if m.offset == last_offset:
            break
    c.close()
    assert got == [*values, b"last"]
