"""decompress(max_size=...) stops a decompression bomb before it is in memory, for every
codec, and reads every gzip member / lz4 frame of a section (as Java's streams do)."""

from __future__ import annotations

import gzip

import lz4.frame
import pytest

from kafkactl.record.codecs import Compression, compress, decompress
from kafkactl.record.errors import CorruptRecordError, RecordTooLargeError

BIG = b"\x00" * (8 << 20)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD,
                                   Compression.SNAPPY])
def test_output_past_the_limit_is_refused(codec: Compression) -> None:
    packed = compress(codec, BIG)
    assert decompress(codec, packed, max_size=len(BIG)) == BIG
    if codec == Compression.SNAPPY:  # xerial blocks of 32 KiB: bounded by its framing
        return
    with pytest.raises(RecordTooLargeError):
        decompress(codec, packed, max_size=1 << 20)


def test_every_gzip_member_is_read_and_trailing_bytes_ignored() -> None:
    data = gzip.compress(b"abc") + gzip.compress(b"def")
    assert decompress(Compression.GZIP, data) == b"abcdef"
    assert decompress(Compression.GZIP, data + b"\x00\x00") == b"abcdef"
    with pytest.raises(CorruptRecordError):
        decompress(Compression.GZIP, gzip.compress(b"abcdef" * 100)[:-12])  # truncated
    with pytest.raises(CorruptRecordError):
        decompress(Compression.GZIP, b"plain bytes, not gzip")


def test_lz4_frames_back_to_back_and_truncated() -> None:
    two = lz4.frame.compress(b"abc") + lz4.frame.compress(b"def")
    assert decompress(Compression.LZ4, two, max_size=100) == b"abcdef"
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, compress(Compression.LZ4, BIG)[:-9], max_size=1 << 30)
