"""A source batch compressed small whose records section, uncompressed, is larger than the
mirror's producer sends (max.request.size): the copy path sent it as one batch and died on
"a batch of N bytes is larger than max.request.size", naming no topic, partition or
offset, and calling one record a batch. Now its records go one by one: a record too large
is named (source topic-partition and offset) with the settings that let it through, and
a batch of records that each fit is mirrored whole."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.producer import Producer
from tests.mirror.helpers import (
    FAST,
    assert_same,
    create_topics,
    mirrored,
    read_topic,
    start_mirror,
)
from tests.polling import wait_until


def _compressible(size: int, seed: int) -> bytes:
    """Random a's and b's: gzip takes them to about a sixth, not to nothing (a source
    batch of them is big enough compressed for the copy path, see COPY_MIN_BYTES)."""
    rnd = random.Random(seed)
    return bytes(rnd.choice(b"ab") for _ in range(size))


def _clusters(broker_factory: Any) -> tuple[Any, Any]:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"big": 1}, {"max.message.bytes": "10000000"})
    return source, target


def test_a_record_too_large_for_the_mirrors_producer_is_named(broker_factory: Any,
                                                              tmp_path: Path) -> None:
    source, target = _clusters(broker_factory)
    with Producer(source.bootstrap, compression_type="gzip", max_request_size=4_000_000,
                  batch_size=4_000_000) as p:
        for i in range(3):  # a batch of three small records first
            p.send("big", b"small %d" % i, partition=0)
        assert p.flush(60)
        p.send("big", _compressible(2_000_000, 1), b"key", partition=0)  # offset 3
        assert p.flush(60)
    src = read_topic(source.bootstrap, "big")[0]
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big")
    assert m.proc.wait(60) == 1, m.log()
    log = m.log()
    assert ("error: the target refused the record at offset 3 of big-0 (target topic big): "
            "a record of 2000003 bytes is larger than max.request.size (1048576): raise the "
            "mirror's producer max.request.size (--producer-property "
            "max.request.size=2000103 or more) and the target topic's max.message.bytes "
            "as much, or skip such records (--no-abort-on-send-failure)") in log, log
    assert "a batch of" not in log, log
    # the records before it are mirrored
    assert read_topic(target.bootstrap, "big") == {0: src[:3]}


@pytest.mark.parametrize("exactly_once", [False, True], ids=["at-least-once", "exactly-once"])
def test_a_batch_too_large_uncompressed_is_mirrored_record_by_record(
        broker_factory: Any, tmp_path: Path, exactly_once: bool) -> None:
    """100 records of 20 KB in one source batch, about 300 KB compressed and 2 MB not:
    each fits the mirror's producer, the batch does not."""
    source, target = _clusters(broker_factory)
    with Producer(source.bootstrap, compression_type="gzip", max_request_size=4_000_000,
                  batch_size=4_000_000, linger_ms=1000) as p:
        for i in range(100):
            p.send("big", _compressible(20_000, i), b"k%d" % i, partition=0)
        assert p.flush(60)
    src = read_topic(source.bootstrap, "big")
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "big",
                     *(["--exactly-once"] if exactly_once else []))
    try:
        wait_until(lambda: mirrored(m, 100) or m.proc.poll() is not None, 60,
                   "the records mirrored")
        assert m.proc.poll() is None, m.log()
        assert m.terminate() == 0, m.log()
    finally:
        m.kill()
    assert_same(src, read_topic(target.bootstrap, "big", read_committed=exactly_once))
