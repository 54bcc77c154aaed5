"""Lines left in their input buffer (client/delimited.py `read_blocks`, `Block`) and the
producer's path for them (LineProducer -> Producer.send_lines -> ProducerBatch.append_lines,
the compiled line encoder): the records are those read_records gives, whatever the chunk
boundaries, and they land in the topic as the list path would put them."""

from __future__ import annotations

import io
import os
import random
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactl.client import accumulator, delimited
from kafkactl.client.admin import AdminClient
from kafkactl.client.consumer import Consumer
from kafkactl.client.delimited import Block, read_blocks, read_records
from kafkactl.client.fetcher import EARLIEST
from kafkactl.client.line_producer import LineProducer
from kafkactl.client.partitioner import murmur2_partition
from kafkactl.client.producer import Producer
from kafkactl.client.producer_batch import ProducerBatch
from kafkactl.client.topic_reader import StartOffset, TopicReader
from kafkactl.record import columns
from kafkactl.record._accel import kernels
from kafkactl.record.batch import RecordBatch
from kafkactl.record.codecs import Compression
from tests.conftest import BrokerProcess
from tests.hypothesis_profiles import examples


def _flat(chunks: Iterator[list[bytes]]) -> list[bytes]:
    return [r for chunk in chunks for r in chunk]


def _blocks(data: bytes, delim: bytes) -> list[Block]:
    return list(read_blocks(io.BytesIO(data), delim))


@settings(max_examples=examples(300))
@given(st.lists(st.binary(max_size=9) | st.sampled_from([b"", b"x" * 40]), max_size=40),
       st.sampled_from([b"\n", b"\x00", b","]), st.sampled_from([b"", b"\n", b"\x00", b","]),
       st.integers(1, 50))
def test_blocks_hold_the_records_read_records_gives(lines: list[bytes], delim: bytes,
                                                     tail: bytes, chunk: int) -> None:
    data = delim.join(lines) + tail
    saved = delimited.CHUNK
    delimited.CHUNK = chunk  # chunk boundaries everywhere: inside records and delimiters
    try:
        blocks = _blocks(data, delim)
        want = _flat(read_records(io.BytesIO(data), delim))
    finally:
        delimited.CHUNK = saved
    assert [r for b in blocks for r in b.records()] == want
    for b in blocks:
        assert len(b) == len(b.records()) >= 1
        assert b.data[b.end - 1:b.end] == delim and 0 <= b.start < b.end <= len(b.data)


def test_a_chunk_is_one_block_without_a_copy() -> None:
    data = b"a\nbb\nccc\nunfinished"
    blocks = _blocks(data, b"\n")
    assert blocks[0].data is not None and blocks[0].records() == [b"a", b"bb", b"ccc"]
    assert (blocks[0].start, blocks[0].end) == (0, 9)
    assert blocks[1].records() == [b"unfinished"]
    assert _blocks(b"", b"\n") == []
    with pytest.raises(ValueError, match="one-byte delimiter"):
        _blocks(data, b"\r\n")


def test_blocks_from_a_pipe_written_in_pieces() -> None:
    """The read1 + select path: a slow writer's pieces, records cut anywhere."""
    lines = [b"line %d %s" % (i, b"p" * (i % 97)) for i in range(20_000)]
    data = b"\n".join(lines) + b"\n"
    r, w = os.pipe()

    def write() -> None:
        with os.fdopen(w, "wb") as f:
            for i in range(0, len(data), 7_777):
                f.write(data[i:i + 7_777])
                f.flush()

    t = threading.Thread(target=write)
    t.start()
    with os.fdopen(r, "rb") as f:
        got = [rec for b in read_blocks(f, b"\n") for rec in b.records()]
    t.join()
    assert got == lines


def read_back(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes]]:
    c = Consumer(topic, bootstrap_servers=bootstrap)
    r = TopicReader(c, until_end=True)
    r.seek(StartOffset("earliest", EARLIEST))
    out: list[tuple[bytes | None, bytes]] = []
    try:
        for rec in r.records():
            out.append((None if rec.key is None else bytes(rec.key), bytes(rec.value or b"")))
    finally:
        c.close()
    return out


LINES = ([b"k%d v%d" % (i % 7, i) for i in range(3000)] + [b"", b"no-key", b" lead"]
         + [b"big " + b"b" * 70_000, b"x y z"] + [b"%d" % i for i in range(20_000)])


@pytest.mark.skipif(kernels is None, reason="the block path needs the compiled kernels")
@pytest.mark.parametrize("sep", [None, b" "])
@pytest.mark.parametrize("batch_size", [1_000, 16_384, 1_000_000])
def test_blocks_land_as_the_lines_were(module_broker: BrokerProcess, sep: bytes | None,
                                       batch_size: int) -> None:
    topic = f"blocks-{'keyed' if sep else 'plain'}-{batch_size}"
    data = b"\n".join(LINES)  # no final delimiter: the last line still counts
    producer = Producer(module_broker.bootstrap, linger_ms=1, batch_size=batch_size,
                        max_request_size=1 << 20)
    lp = LineProducer(producer, topic, key_separator=sep)
    assert lp.takes_blocks
    saved = delimited.CHUNK
    delimited.CHUNK = 50_000  # the huge line spans chunks
    try:
        outcome = lp.run(read_blocks(io.BytesIO(data), b"\n"))
    finally:
        delimited.CHUNK = saved
    assert not outcome.interrupted and outcome.error is None
    assert lp.read == lp.stats.acked == lp.stats.sent == len(LINES)
    assert lp.stats.bytes == sum(map(len, LINES)) and lp.unsent() == []
    want: list[tuple[bytes | None, bytes]] = [(None, line) for line in LINES]
    if sep is not None:
        want = [(k, v) if found else (None, line)
                for line in LINES for k, found, v in [line.partition(sep)]]
    assert read_back(module_broker.bootstrap, topic) == want


@pytest.mark.skipif(kernels is None, reason="the block path needs the compiled kernels")
def test_keyed_blocks_over_partitions_go_where_the_keys_hash(module_broker: BrokerProcess
                                                             ) -> None:
    with AdminClient(module_broker.bootstrap) as admin:
        admin.create_topics({"blocks-spread": (3, 1, {})})
    lines = [b"key%d,value %d" % (i % 50, i) for i in range(2000)] + [b"keyless"]
    producer = Producer(module_broker.bootstrap, linger_ms=1)
    lp = LineProducer(producer, "blocks-spread", key_separator=b",")
    outcome = lp.run(read_blocks(io.BytesIO(b"\n".join(lines) + b"\n"), b"\n"))
    assert outcome.error is None and lp.stats.acked == len(lines)
    c = Consumer("blocks-spread", bootstrap_servers=module_broker.bootstrap)
    r = TopicReader(c, until_end=True)
    r.seek(StartOffset("earliest", EARLIEST))
    seen = 0
    try:
        for rec in r.records():
            seen += 1
            if rec.key is not None:
                assert rec.partition == murmur2_partition(bytes(rec.key), 3)
    finally:
        c.close()
    assert seen == len(lines)


@pytest.mark.skipif(kernels is None, reason="the block path needs the compiled kernels")
def test_an_input_error_after_blocks_counts_every_record(module_broker: BrokerProcess
                                                          ) -> None:
    def blocks() -> Iterator[Block]:
        data = b"one\ntwo\nthree\n"
        yield Block(data, 0, len(data), b"\n")
        raise OSError("disk gone")

    lp = LineProducer(Producer(module_broker.bootstrap, linger_ms=1), "blocks-input-error")
    outcome = lp.run(blocks())
    assert isinstance(outcome.error, OSError) and not lp.input_done
    assert lp.read == lp.stats.acked == 3 and lp.unsent() == []


def test_a_producer_that_cannot_take_blocks_gets_their_records(module_broker: BrokerProcess
                                                                ) -> None:
    """Kept records (--failed-file) and headers take the list path, blocks or not."""
    lp = LineProducer(Producer(module_broker.bootstrap, linger_ms=1), "blocks-kept",
                      keep_failed=True, headers=[("h", b"1")])
    assert not lp.takes_blocks
    data = b"a\nb\nc\n"
    outcome = lp.run([Block(data, 2, len(data), b"\n")])
    assert outcome.error is None and lp.read == lp.stats.acked == 2
    assert [v for _, v in read_back(module_broker.bootstrap, "blocks-kept")] == [b"b", b"c"]


@pytest.mark.parametrize("encoder", ["compiled", "reference"])
@pytest.mark.parametrize("batch_size", [200, 16_384])
def test_send_lines_between_other_sends_keeps_the_order(module_broker: BrokerProcess,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        encoder: str, batch_size: int) -> None:
    """Producer.send_lines with either encoder (the pure-Python reference is the one the
    producer uses without the kernels), between records of the other paths on the same
    partition (a batch holds records of one path: lines are encoded into its buffer), with
    lines longer than a batch: every record lands, in the order sent."""
    if encoder == "compiled" and kernels is None:
        pytest.skip("pure Python: no compiled encoder")
    if encoder == "reference":
        monkeypatch.setattr(accumulator, "encode_lines_into", columns.encode_lines_into_py)
    topic = f"send-lines-{encoder}-{batch_size}"
    lines = [b"k%d v%d %s" % (i % 5, i, b"p" * (i % 40)) for i in range(400)]
    huge = [b"h" * 5_000, b"kk " + b"v" * 3_000]
    data = b"\n".join(lines[:200] + huge + lines[200:]) + b"\n"
    want: list[tuple[bytes | None, bytes]] = []
    with Producer(module_broker.bootstrap, linger_ms=1, batch_size=batch_size) as producer:
        producer.send_values(topic, [b"first", b"second"], partition=0)
        want += [(None, b"first"), (None, b"second")]
        assert producer.send_lines(topic, data, 0, len(data), b"\n", partition=0) == 402
        want += [(None, line) for line in lines[:200] + huge + lines[200:]]
        producer.send(topic, b"middle", b"key", partition=0)
        want.append((b"key", b"middle"))
        n = producer.send_lines(topic, data, 0, len(data), b"\n", b" ", partition=0)
        assert n == 402
        want += [(k, v) if found else (None, line)
                 for line in lines[:200] + huge + lines[200:]
                 for k, found, v in [line.partition(b" ")]]
        producer.send_key_values(topic, [b"a", None], [b"1", b"2"], partition=0)
        want += [(b"a", b"1"), (None, b"2")]
        assert producer.flush(30)
        # the buffers of batches of lines done are kept for the next ones (and were reused:
        # the lines above went through more batches than are kept)
        assert 1 <= len(producer.accumulator.spare_buffers) <= accumulator.SPARE_BUFFERS
    assert read_back(module_broker.bootstrap, topic) == want


@pytest.mark.parametrize("encoder", ["compiled", "reference"])
def test_threads_sending_lines_at_once_each_land_whole_and_in_order(
        module_broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch, encoder: str) -> None:
    """Two threads send lines to one partition at once, and a third sends single records:
    no batch buffer is written by two encoders at once (each record lands as it was sent,
    each thread's in its order, none lost or doubled)."""
    if encoder == "compiled" and kernels is None:
        pytest.skip("pure Python: no compiled encoder")
    if encoder == "reference":
        monkeypatch.setattr(accumulator, "encode_lines_into", columns.encode_lines_into_py)
    topic = f"send-lines-threads-{encoder}"
    per_thread = 3000
    with Producer(module_broker.bootstrap, linger_ms=1, batch_size=4096) as producer:
        def lines(name: str) -> None:
            for first in range(0, per_thread, 50):
                block = b"".join(b"%s-%d %s\n" % (name.encode(), i, b"x" * (i % 70))
                                 for i in range(first, first + 50))
                producer.send_lines(topic, block, 0, len(block), b"\n", partition=0)

        def singles() -> None:
            for i in range(300):
                producer.send(topic, b"single-%d" % i, partition=0)

        threads = [threading.Thread(target=lines, args=(n,)) for n in ("a", "b")]
        threads.append(threading.Thread(target=singles))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert producer.flush(30)
    got = [v for _, v in read_back(module_broker.bootstrap, topic)]
    assert len(got) == 2 * per_thread + 300
    for name in (b"a", b"b"):
        mine = [v for v in got if v.startswith(name + b"-")]
        assert mine == [b"%s-%d %s" % (name, i, b"x" * (i % 70)) for i in range(per_thread)]
    assert [v for v in got if v.startswith(b"single-")] == [b"single-%d" % i
                                                           for i in range(300)]


ENCODERS = [pytest.param("compiled", marks=pytest.mark.skipif(
    kernels is None, reason="pure Python: no compiled encoder")), "reference"]


def _encoder(name: str) -> columns.EncodeLinesInto:
    if name == "reference":
        return columns.encode_lines_into_py
    assert kernels is not None
    return kernels.encode_lines_into


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
@pytest.mark.parametrize("ksep", [None, b" "])
def test_a_batch_of_lines_builds_the_bytes_of_the_general_path(
        encoder: str, compression: Compression, ksep: bytes | None) -> None:
    """Lines encoded into a batch's buffer build the same batch, byte for byte, as the same
    records appended by the general path (keys split as send_key_values gets them)."""
    rng = random.Random(7)
    lines = [b"%d %s" % (i, bytes(rng.randrange(32, 127) for _ in range(rng.randrange(300))))
             for i in range(500)] + [b"", b"nokey", b" leading"]
    data = b"\n".join(lines) + b"\n"
    lines_batch = ProducerBatch("t", 0, 1 << 20, timestamp=1_795_000_000_000)
    after, count, used = _encoder(encoder)(data, 0, len(data), b"\n", ksep, 0,
                                           lines_batch.lines_buffer(), lines_batch.size)
    assert (after, count) == (len(data), len(lines))
    lines_batch.took_lines(count, used)
    general = ProducerBatch("t", 0, 1 << 20, timestamp=1_795_000_000_000)
    for line in lines:
        k, sep, v = line.partition(ksep) if ksep is not None else (b"", b"", line)
        assert general.append(None, k if sep else None, v if sep else line) is not None
    for b in (lines_batch, general):
        b.set_producer_state(7, 1, 42)
    assert bytes(lines_batch.build(compression)) == bytes(general.build(compression))
    assert not lines_batch.takes_lines() or lines_batch.closed


@pytest.mark.parametrize("encoder", ENCODERS)
def test_a_refused_batch_of_lines_splits_into_its_records(monkeypatch: pytest.MonkeyPatch,
                                                          encoder: str) -> None:
    """MESSAGE_TOO_LARGE for a batch of lines: its halves hold its records in order, and
    its buffer is kept for the next batch of lines."""
    monkeypatch.setattr(accumulator, "encode_lines_into", _encoder(encoder))
    acc = accumulator.RecordAccumulator(batch_size=4096, linger_ms=0)
    lines = [b"line %d" % i for i in range(300)]
    data = b"\n".join(lines) + b"\n"
    assert acc.append_lines("t", 0, data, 0, len(data), b"\n", None) == len(lines)
    batch = acc.pop_head(("t", 0))
    assert batch is not None and batch.record_count < len(lines)
    n = batch.record_count
    batch.build()
    acc.split_and_reenqueue(batch)
    assert len(acc.spare_buffers) == 1
    halves = [acc.pop_head(("t", 0)) for _ in range(2)]
    got = [bytes(r.value or b"") for h in halves if h is not None
           for r in RecordBatch(memoryview(h.build()))]
    assert got == lines[:n]
