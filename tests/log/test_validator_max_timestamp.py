"""The batch max timestamp is the records', as Kafka's LogValidator takes it (batch
.setMaxTimestamp), not the producer header's; a producer batch with the LogAppendTime
attribute bit is refused on a LogAppendTime topic and cleared on a CreateTime one.

The compiled twins (kafkactl/log/_log_kernels.pyx: BatchValidator.validate and
records_max_timestamp) must give what the pure reference gives at the edges: one record,
a batch at max.message.bytes, out-of-order, -1 and negative timestamps, deltas of one and
several varint bytes, runs of one record size and mixed sizes, timestamps that wrap a Java
long, compressed and not. Both the answer (BatchInfo) and the bytes left in the buffer
(the rewritten header and its CRC) are compared. Under KAFKACTL_NO_EXTENSIONS=1 both sides
are the reference."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kafkactl.log import validator
from kafkactl.log.kernels import log_kernels
from kafkactl.log.validator import (
    BatchValidationError,
    records_max_timestamp_py,
    validate_batches_py,
)
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatch
from kafkactl.record.batch_header import BATCH_HEADER, RECORDS_OFFSET, restamp_crc
from kafkactl.record.builder import RecordBatchBuilder
from kafkactl.record.codecs import Compression
from kafkactl.record.crc import crc32c

TS = 1_700_000_000_000
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


def _batch(timestamps: list[int], *, codec: int = Compression.NONE,
           sizes: list[int] | None = None, header_max: int | None = None,
           log_append_bit: bool = False) -> bytearray:
    """A batch of records with these timestamps (values of `sizes` bytes), its header's
    max timestamp then set to `header_max` (a lying producer) and its attribute bit 3 set
    with `log_append_bit`, the CRC made to match."""
    b = RecordBatchBuilder(compression=Compression(codec))
    for i, ts in enumerate(timestamps):
        b.append(ts, b"k%d" % i, b"v" * (sizes[i] if sizes else 10))
    buf = bytearray(b.build())
    if header_max is not None:
        buf[35:43] = header_max.to_bytes(8, "big", signed=True)
    if log_append_bit:
        buf[22] |= 0x08
    restamp_crc(buf, 0)
    return buf


def _header(buf: bytearray) -> tuple[int, int, int]:
    """(attributes, first timestamp, max timestamp) of the batch at 0."""
    h = BATCH_HEADER.unpack_from(buf, 0)
    return h[5], h[7], h[8]


def _config(**over: Any) -> dict[str, Any]:
    config = {"max_message_bytes": 1 << 20, "timestamp_type": "CreateTime",
              "max_timestamp_difference_ms": LONG_MAX, "now_ms": TS, "produce_version": 9,
              "single_batch": True, "compacted": False, "topic_partition": "t-0"}
    config.update(over)
    return config


def _run(fn: Any, buf: bytearray, config: dict[str, Any]) -> tuple[Any, bytes]:
    view = memoryview(buf)
    try:
        got: Any = ("ok", fn(view, **config))
    except BatchValidationError as e:
        got = (e.code, str(e), e.record_errors)
    return got, bytes(buf)


def _both(buf: bytearray, **over: Any) -> tuple[Any, bytes]:
    """validate_batches (the twin when built) and the reference on copies of `buf`: the
    same answer and the same bytes after; returns them."""
    config = _config(**over)
    expected = _run(validate_batches_py, bytearray(buf), config)
    assert _run(validator.validate_batches, bytearray(buf), config) == expected
    return expected


EDGES = [
    [TS],  # one record
    [TS + 100, TS + 900, TS + 500],  # out of order (the tester's batch)
    [TS + 500, TS + 400, TS + 300],  # decreasing: the first is the max
    [-1, -1, -1],  # no timestamps
    [-1],
    [TS, -1, TS + 3],
    [-5, -7, -2],  # negative: the max is NO_TIMESTAMP (-1), as Kafka's starts there
    [0, 0],
    [TS + i for i in range(100)],  # deltas crossing one varint byte (64)
    [TS + (i * 37) % 1000 for i in range(300)],  # mixed widths, out of order
    [TS - 10_000 + i * 70 for i in range(50)],
]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.LZ4])
@pytest.mark.parametrize("timestamps", EDGES, ids=range(len(EDGES)))
@pytest.mark.parametrize("lie", ["honest", "below", "above", "minus-one"])
def test_the_max_timestamp_is_the_records(codec: int, timestamps: list[int], lie: str
                                          ) -> None:
    honest = max([-1, *timestamps])
    header_max = {"honest": None, "below": timestamps[0] - 1000, "above": TS + 10**9,
                  "minus-one": -1}[lie]
    buf = _batch(timestamps, codec=codec, header_max=header_max)
    answer, after = _both(buf)
    assert answer[0] == "ok"
    assert answer[1][0].max_timestamp == honest
    attrs, first, max_ts = _header(bytearray(after))
    assert (first, max_ts) == (timestamps[0], honest)
    assert crc32c(after[21:]) == int.from_bytes(after[17:21], "big")
    if header_max is None or header_max == honest:
        assert after == bytes(buf)  # an honest header is left as it is (no new CRC)
    # every other byte is the producer's
    assert after[:35] == bytes(buf[:17]) + after[17:21] + bytes(buf[21:35])
    assert after[43:] == bytes(buf[43:])


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_a_batch_at_the_size_limit(codec: int) -> None:
    timestamps = [TS + (i * 13) % 500 for i in range(200)]
    buf = _batch(timestamps, codec=codec, header_max=TS)
    for limit, ok in ((len(buf), True), (len(buf) - 1, False)):
        answer, after = _both(buf, max_message_bytes=limit)
        if ok:
            assert answer[0] == "ok" and _header(bytearray(after))[2] == max(timestamps)
        else:
            assert answer[0] == ErrorCode.MESSAGE_TOO_LARGE and after == bytes(buf)


def test_several_batches_each_get_their_own_max() -> None:
    a = _batch([TS + 5, TS + 50, TS], header_max=TS)
    b = _batch([TS + 7, TS + 1], header_max=TS + 99)
    answer, after = _both(a + b, single_batch=False, produce_version=2)
    assert [i.max_timestamp for i in answer[1]] == [TS + 50, TS + 7]
    assert _header(bytearray(after[:len(a)]))[2] == TS + 50
    assert _header(bytearray(after[len(a):]))[2] == TS + 7


def test_with_the_timestamp_limit_set_the_max_is_the_records_too() -> None:
    buf = _batch([TS - 50, TS + 20, TS], header_max=TS - 50)
    answer, after = _both(buf, max_timestamp_difference_ms=1000)
    assert answer[1][0].max_timestamp == TS + 20 and _header(bytearray(after))[2] == TS + 20


def test_a_log_append_time_topic_keeps_the_header_for_the_append() -> None:
    """On a LogAppendTime topic the append stamps the time: the records are not read."""
    buf = _batch([TS + 100, TS + 900], header_max=TS)
    answer, after = _both(buf, timestamp_type="LogAppendTime")
    assert answer[0] == "ok" and after == bytes(buf)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_the_log_append_time_bit_from_a_producer(codec: int) -> None:
    # a LogAppendTime topic: INVALID_TIMESTAMP, a record error for each record
    buf = _batch([TS, TS + 1], codec=codec, log_append_bit=True)
    answer, after = _both(buf, timestamp_type="LogAppendTime")
    assert answer[0] == ErrorCode.INVALID_TIMESTAMP and after == bytes(buf)
    assert [i for i, _ in answer[2]] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime." in answer[2][0][1]
    # a CreateTime topic: the bit is cleared, the header's max kept (each record read it)
    answer, after = _both(buf)
    attrs, _, max_ts = _header(bytearray(after))
    assert answer[0] == "ok" and not attrs & 0x08 and max_ts == TS + 1
    assert answer[1][0].max_timestamp == TS + 1
    assert crc32c(after[21:]) == int.from_bytes(after[17:21], "big")
    # ... unless that max is NO_TIMESTAMP: then Kafka refuses it too
    buf = _batch([TS, TS + 1], codec=codec, header_max=-1, log_append_bit=True)
    answer, _ = _both(buf)
    assert answer[0] == ErrorCode.INVALID_TIMESTAMP


def test_records_max_timestamp_twins_agree() -> None:
    """The record walk itself, compiled and pure, on random batches of every shape: sizes
    fixed and mixed, deltas of 1..10 varint bytes, first timestamps at the ends of a Java
    long (the sum wraps as Java's does)."""
    rng = random.Random(42)
    firsts = [TS, 0, -1, LONG_MAX, LONG_MIN, LONG_MAX - 63, LONG_MIN + 64, LONG_MAX - 64,
              LONG_MIN + 63]
    for n in range(1000):
        # counts one below / at / one above the column run (MIN_COLUMN_RUN, 16)
        count = rng.choice([1, 2, 3, 15, 16, 17, 64, 65, 200])
        shape = rng.choice(["fixed", "mixed", "wide", "huge", "two+", "two-", "two+-",
                            "runs"])
        if shape == "huge":
            deltas = [rng.choice([0, 1, -1, 2**62, -(2**62), LONG_MAX, LONG_MIN])
                      for _ in range(count)]
        elif shape.startswith("two"):  # two varint bytes: 64..8191 or -8192..-65
            deltas = [rng.choice([1, -1] if shape == "two+-" else
                                 [1 if shape == "two+" else -1]) * rng.randint(65, 8191)
                      for _ in range(count)]
        else:
            span = {"fixed": 50, "mixed": 63, "wide": 10**6, "runs": 50}[shape]
            deltas = [rng.randint(-span, span) for _ in range(count)]
        # "runs": records in runs of one size, short (1, 3) and at the column edge (15-17),
        # so the walk switches between columns and records, and past MAX_SHORT_RUNS (4)
        sizes: list[int] = []
        while len(sizes) < count:
            sizes += [len(sizes) % 2 * 5 + 5] * rng.choice([1, 3, 15, 16, 17])
        deltas[0] = 0
        first = rng.choice(firsts)
        b = RecordBatchBuilder()
        for i in range(count):
            size = rng.randint(0, 30) if shape in ("mixed", "wide") else \
                sizes[i] if shape == "runs" else 10
            b.append_at(i, TS, None, b"x" * size)
        buf = bytearray(b.build())
        _set_deltas(buf, deltas)
        expected = max([-1] + [_java(first + d) for d in deltas])
        assert records_max_timestamp_py(buf, RECORDS_OFFSET, len(buf), count, first) \
            == expected, (n, shape, first)
        assert records_max_timestamp_py(memoryview(buf)[RECORDS_OFFSET:], 0,
                                        len(buf) - RECORDS_OFFSET, count, first) == expected
        if log_kernels is not None:
            assert log_kernels.records_max_timestamp(
                buf, RECORDS_OFFSET, len(buf), count, first) == expected, (n, shape)


def _java(n: int) -> int:
    return (n - LONG_MIN) % 2**64 + LONG_MIN


def _set_deltas(buf: bytearray, deltas: list[int]) -> None:
    """Rewrite the records of the batch in `buf` with these timestamp deltas (re-framed)."""
    from kafkactl.record.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

    count = len(deltas)
    out = bytearray()
    p = RECORDS_OFFSET
    for i in range(count):
        length, q = decode_varint(buf, p)
        _, r = decode_varlong(buf, q + 1)
        body = bytes(buf[q:q + 1]) + encode_varlong(deltas[i]) + bytes(buf[r:q + length])
        out += encode_varint(len(body)) + body
        p = q + length
    buf[RECORDS_OFFSET:] = out
    buf[8:12] = (len(buf) - 12).to_bytes(4, "big")
    restamp_crc(buf, 0)


def test_records_read_back_after_the_rewrite() -> None:
    """The rewritten batch still reads as the same records (only header fields moved)."""
    buf = _batch([TS + 3, TS + 9, TS + 1], header_max=TS)
    _, after = _both(buf)
    recs = list(RecordBatch(memoryview(bytearray(after)), 0))
    assert [r.timestamp for r in recs] == [TS + 3, TS + 9, TS + 1]


def test_the_twin_reads_the_records_itself_and_declines_a_lying_header() -> None:
    """The compiled twin answers an honest plain batch (out-of-order timestamps, -1, one
    record) without its reference, and hands a lying header or the LogAppendTime bit to
    the reference, which rewrites or refuses it."""
    if log_kernels is None:
        pytest.skip("pure Python: KAFKACTL_NO_EXTENSIONS is set or the kernel is not built")
    from kafkactl.record._accel import kernels
    from kafkactl.record.framing import check_records

    asked: list[int] = []

    def reference(buf: memoryview, **config: Any) -> list[Any]:
        asked.append(1)
        return validate_batches_py(buf, **config)

    for prove in (None if kernels is None else kernels.prove, None):
        twin = log_kernels.BatchValidator(reference, validator.BatchInfo, check_records,
                                          prove, crc32c).validate
        for timestamps in ([TS], [TS + 100, TS + 900, TS + 500], [-1, -1], [-5, -3]):
            asked.clear()
            honest = _batch(timestamps)
            assert twin(memoryview(honest), **_config())[0].max_timestamp == \
                max(-1, *timestamps)
            assert not asked, timestamps
            for lying in (_batch(timestamps, header_max=timestamps[0] - 1),
                          _batch(timestamps, log_append_bit=True)):
                if _header(lying)[2] == -1:  # the bit with no timestamp: refused
                    with pytest.raises(BatchValidationError):
                        twin(memoryview(lying), **_config())
                else:
                    got = twin(memoryview(lying), **_config())
                    assert got[0].max_timestamp == _header(lying)[2]
                assert asked
                asked.clear()
