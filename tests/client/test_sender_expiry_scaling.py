"""The producer's work per queued batch stays constant as batches pile up.

- The sender looks for batches past delivery.timeout.ms on every pass of its loop: it read
  the creation time of every queued batch each time (and copied them all), so producing N
  records as N batches (a tiny batch.size, a broker that does not keep up) cost O(N^2):
  `seq 1 24000 | kafkactl produce --batch-size 1` took 36 s, 12,000 took 6. Now, as
  Kafka's RecordAccumulator.expiredBatches, a partition's queue (in creation order) is read
  only up to its first batch not expired, and not at all before the earliest batch can
  have expired.
- buffer.memory was charged batch.size per batch, whatever the batch really held: with
  batch.size 1 it never bounded the queue. Now a batch is charged what it takes (at least
  its header, as Kafka's BufferPool allocates max(batch.size, the record's size)), and a
  producer that the broker does not answer blocks for max.block.ms and fails.
- The expiry is the same as before: a queued batch fails once now - its creation is more
  than delivery.timeout.ms (checked against the rule itself over random queues, retries
  and splits).

Counted, never timed: the expiry pass's reads of batches' creation times (ProducerBatch
.created_ms) are counted while the broker is frozen (SIGSTOP), so the queue stays put.
"""

from __future__ import annotations

import random
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from kafkactl.client.accumulator import RecordAccumulator
from kafkactl.client.errors import KafkaTimeoutError
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.client.sender import Sender
from kafkactl.record.batch import RECORD_BATCH_OVERHEAD
from tests.conftest import BrokerProcess
from tests.polling import wait_until
from tests.sockets import queued_requests

PARTITIONS = 2


class _CreatedReads:
    """ProducerBatch.created_ms, counting the reads the thread in `counting` makes."""

    def __init__(self) -> None:
        self.slot = ProducerBatch.__dict__["created_ms"]
        self.counting: int | None = None
        self.reads = 0

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        if threading.get_ident() == self.counting:
            self.reads += 1
        return self.slot.__get__(obj, owner)

    def __set__(self, obj: Any, value: Any) -> None:
        self.slot.__set__(obj, value)


@pytest.fixture
def created_reads(monkeypatch: pytest.MonkeyPatch) -> _CreatedReads:
    reads = _CreatedReads()
    monkeypatch.setattr(ProducerBatch, "created_ms", reads)
    return reads


def _count_passes(sender: Sender, reads: _CreatedReads,
                  passes: list[tuple[int, int]]) -> None:
    """Record (batches queued, creation times read) for each of the sender's expiry
    passes."""
    expire = sender._expire_batches
    acc = sender.acc

    def counted(now: float) -> None:
        with acc.lock:
            queued = sum(len(dq) for dq in acc.batches.values())
        reads.reads = 0
        reads.counting = threading.get_ident()
        try:
            expire(now)
        finally:
            reads.counting = None
            passes.append((queued, reads.reads))

    sender._expire_batches = counted  # type: ignore[method-assign]


@contextmanager
def _frozen(broker: BrokerProcess, **kwargs: Any) -> Iterator[Any]:
    """A producer with batch.size 1 (a batch per record) whose broker is frozen
    (SIGSTOP) once the producer has its producer id and metadata: what it is sent
    queues up, never answered."""
    from kafkactl.client.admin import AdminClient
    from kafkactl.client.producer import Producer

    with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.create_topics({"piled": (PARTITIONS, 1, {})}) == {"piled": None}
    p = Producer(broker.bootstrap, batch_size=1, linger_ms=0, max_in_flight=1,
                 delivery_timeout_ms=3_600_000, request_timeout_ms=3_600_000, **kwargs)
    assert broker.proc is not None
    try:
        for partition in range(PARTITIONS):
            p.send("piled", b"first", partition=partition).result(30)
        wait_until(lambda: queued_requests(broker.port) == 0, 20,
                   "the broker read every request")
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            yield p
        finally:
            broker.proc.send_signal(signal.SIGCONT)
    finally:
        p.abort(1.0)


def _pile(p: Any, passes: list[tuple[int, int]], n: int) -> int:
    """Send n more records (a batch each) over the partitions; wait for an expiry pass
    that sees them all queued, and two more; the most creation times a pass read from
    that first one on."""
    for i in range(n):
        p.send("piled", b"v%d" % i, partition=i % PARTITIONS)
    with p.accumulator.lock:
        total = sum(len(dq) for dq in p.accumulator.batches.values())

    def seen() -> int:
        for k, (queued, _) in enumerate(list(passes)):
            if queued >= total:
                return k + 1
        return 0

    start = wait_until(seen, 60, f"an expiry pass over {total} queued batches") - 1
    # (the sender passes once a second at least: its idle poll)
    wait_until(lambda: len(passes) >= start + 3, 60, "three expiry passes")
    return max(reads for _, reads in passes[start:])


def test_an_expiry_pass_reads_one_batch_per_partition_whatever_the_queue(
        broker: BrokerProcess, created_reads: _CreatedReads) -> None:
    """N and then 2N batches queued: a pass reads the creation time of no more batches
    than there are partitions (before: every queued batch, N then 2N, per pass)."""
    n = 1500
    with _frozen(broker, buffer_memory=1 << 30) as p:
        passes: list[tuple[int, int]] = []
        _count_passes(p.sender, created_reads, passes)
        at_n = _pile(p, passes, n)
        at_2n = _pile(p, passes, n)
        with p.accumulator.lock:
            queued = sum(len(dq) for dq in p.accumulator.batches.values())
        assert queued >= 2 * n - PARTITIONS
        assert at_n <= PARTITIONS and at_2n <= PARTITIONS, (at_n, at_2n)


def test_buffer_memory_bounds_the_queue_of_tiny_batches(broker: BrokerProcess) -> None:
    """batch.size 1 and buffer.memory 8 KB: each batch is charged what it holds (its
    header at least), so the queue stops at about 8 KB of batches and send() blocks for
    max.block.ms, then fails (before: charged 1 byte a batch, 1,000 records queued)."""
    memory = 8192
    with _frozen(broker, buffer_memory=memory, max_block_ms=300) as p:
        acc = p.accumulator
        sent = 0
        with pytest.raises(KafkaTimeoutError,
                           match=r"buffer\.memory \(8192 bytes\) stayed full for 0\.3 s"):
            for i in range(1000):
                p.send("piled", b"%04d" % i, partition=0)
                sent += 1
        assert sent < memory // RECORD_BATCH_OVERHEAD, sent
        with acc.lock:
            batches = [b for dq in acc.batches.values() for b in dq]
            used = acc.used_memory
        # each batch not done (the queued ones, and those in flight) is charged its
        # size at least; past buffer.memory by at most a record (charged once in)
        assert sum(b.size for b in batches) <= used <= memory + 100, used


# -- the expiry rule, against a reference ------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def tick(self, rng: random.Random) -> float:
        self.now += rng.choice((0.0, 0.001, 0.25, 0.7, 1.3))
        return self.now


@pytest.mark.parametrize("seed", range(40))
def test_expiry_is_the_rule_over_retries_and_splits(seed: int) -> None:
    """Random appends over 3 partitions, heads taken in flight, retried (put back) and
    split, and expiry passes at random times: each pass fails exactly the queued batches,
    not in flight, with now - created > delivery.timeout.ms (the rule the sender applied
    to every queued batch on every pass before)."""
    rng = random.Random(seed)
    clock = _Clock()
    acc = RecordAccumulator(batch_size=64, linger_ms=0, buffer_memory=1 << 30)
    client = SimpleNamespace(cluster=SimpleNamespace(reported_leaderless=lambda t, p: False,
                                                     leader_for=lambda t, p: 0))
    sender = Sender(client, acc, delivery_timeout_ms=2000)  # type: ignore[arg-type]
    failed: list[ProducerBatch] = []
    acc.batch_callbacks.append(lambda b, off, err: failed.append(b) if isinstance(
        err, KafkaTimeoutError) else None)
    flying: list[ProducerBatch] = []
    for _ in range(400):
        op = rng.random()
        tp = ("t", rng.randrange(3))
        now = clock.tick(rng)
        if op < 0.45:
            before = set(map(id, acc.batches.get(tp, ())))
            acc.append(tp[0], tp[1], None, None, b"x" * rng.randrange(1, 40))
            for b in acc.batches[tp]:
                if id(b) not in before:  # (a batch made now: made at the clock's time)
                    b.created_ms = now * 1000.0
        elif op < 0.6:
            head = acc.pop_head(tp)
            if head is not None and head.record_count:
                head.build()
                sender.in_flight[tp].append(head)
                flying.append(head)
        elif op < 0.75 and flying:
            b = flying.pop(rng.randrange(len(flying)))
            sender._remove_in_flight(b)
            if b.record_count > 1 and rng.random() < 0.5:
                acc.split_and_reenqueue(b)
            else:
                acc.reenqueue(b)
        else:
            with acc.lock:
                queued = [b for dq in acc.batches.values() for b in dq]
            due = {id(b) for b in queued if now - b.created_ms / 1000.0 > 2.0}
            failed.clear()
            sender._expire_batches(now)
            assert {id(b) for b in failed} == due
            with acc.lock:
                left = {id(b) for dq in acc.batches.values() for b in dq}
            assert not left & due

