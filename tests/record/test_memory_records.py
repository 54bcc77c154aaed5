from __future__ import annotations

import random

from kafkactl.record.batch import RecordBatchBuilder
from kafkactl.record.codecs import Compression, compress, decompress
from kafkactl.record.legacy import build_message_set
from kafkactl.record.memory_records import iter_batches, scan


def _log(n: int = 5) -> tuple[bytes, list[int]]:
    parts, ends, off = [], [], 0
    for i in range(n):
        b = RecordBatchBuilder(base_offset=off, compression=i % 5)
        for j in range(3):
            b.append(1000 * i + j, b"k", b"v" * (i * 10))
        parts.append(b.build())
        off += 3
        ends.append(sum(map(len, parts)))
    return b"".join(parts), ends


def test_scan_clean_log() -> None:
    data, _ends = _log()
    res = scan(data)
    assert res.error is None and res.valid_bytes == len(data) and res.batch_count == 5
    assert (res.first_offset, res.last_offset) == (0, 14)
    assert res.max_timestamp == 4002 and res.offset_of_max_timestamp == 14


def test_scan_stops_at_every_truncation_point() -> None:
    data, ends = _log()
    for cut in range(len(data)):
        res = scan(data[:cut])
        expected = max([e for e in ends if e <= cut], default=0)
        assert res.valid_bytes == expected
        assert (res.error is None) == (cut == expected)
        assert len(list(iter_batches(data[:cut]))) == ends.index(expected) + 1 if expected \
            else True


def test_scan_detects_random_bit_flips_and_garbage() -> None:
    data, ends = _log()
    rng = random.Random(7)
    for _ in range(200):
        buf = bytearray(data)
        pos = rng.randrange(len(buf))
        start = max([0] + [e for e in ends if e <= pos])
        if pos - start < 8 or 12 <= pos - start < 16:
            continue  # base offset and leader epoch are outside the CRC, by design
        buf[pos] ^= 1 << rng.randrange(8)
        res = scan(buf)
        assert res.valid_bytes <= pos  # never accepts the damaged batch
        assert res.error is not None and res.error_position == res.valid_bytes
    garbage = data + bytes(rng.randrange(256) for _ in range(100))
    res = scan(garbage)
    assert res.valid_bytes == len(data) and res.error is not None


def test_scan_rejects_non_increasing_offsets() -> None:
    b = RecordBatchBuilder(base_offset=5)
    b.append(1, None, b"x")
    one = b.build()
    res = scan(one + one)
    assert res.batch_count == 1 and "not increasing" in (res.error or "")
    assert scan(one, expected_offset=6).valid_bytes == 0
    assert scan(one, expected_offset=5).error is None


def test_mixed_magic_log() -> None:
    legacy = build_message_set(0, [(None, b"a", b"b")], base_offset=0) + build_message_set(
        1, [(5, b"c", b"d"), (6, None, b"e")], Compression.SNAPPY, base_offset=1)
    b = RecordBatchBuilder(base_offset=3)
    b.append(7, None, b"f")
    data = legacy + b.build()
    assert [bt.magic for bt in iter_batches(data)] == [0, 1, 2]
    res = scan(data)
    assert res.error is None and res.last_offset == 3 and res.max_timestamp == 7


def test_codecs_roundtrip_and_snappy_raw_read() -> None:
    import snappy

    payload = bytes(range(256)) * 500
    for codec in Compression:
        assert decompress(codec, compress(codec, payload)) == payload
    assert decompress(Compression.SNAPPY, snappy.compress(payload)) == payload
    legacy = compress(Compression.LZ4, payload, legacy_lz4_checksum=True)
    assert decompress(Compression.LZ4, legacy, legacy_lz4_checksum=True) == payload
