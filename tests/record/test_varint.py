from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkactl.record.errors import CorruptRecordError
from kafkactl.record.varint import (
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.mark.parametrize(
    ("n", "encoded"),
    [
        (0, "00"), (-1, "01"), (1, "02"), (-2, "03"), (63, "7e"), (-64, "7f"), (64, "8001"),
        (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
    ],
)
def test_varint_known_encodings(n: int, encoded: str) -> None:
    assert encode_varint(n).hex() == encoded
    assert decode_varint(bytes.fromhex(encoded)) == (n, len(encoded) // 2)


def test_varlong_extremes_take_ten_bytes() -> None:
    assert encode_varlong(2**63 - 1).hex() == "feffffffffffffffff01"
    assert encode_varlong(-(2**63)).hex() == "ffffffffffffffffff01"
    for n in (2**63 - 1, -(2**63)):
        assert decode_varlong(encode_varlong(n)) == (n, 10)


def test_seed_byte_counts() -> None:
    # seed 003: 0-63 take one byte, 64-8191 two, 8192-1048575 three; 1000012 takes three
    assert {len(encode_varint(n)) for n in (0, 63)} == {1}
    assert {len(encode_varint(n)) for n in (64, 8191)} == {2}
    assert {len(encode_varint(n)) for n in (8192, 1048575)} == {3}
    assert len(encode_varint(1000012)) == 3


@pytest.mark.parametrize(
    "raw", ["ffffffffff01", "8080808080", "ffffffff7f", "80", "", "ff"],
)
def test_overlong_out_of_range_and_truncated_varints_are_rejected(raw: str) -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(bytes.fromhex(raw))


def test_overlong_varlong_rejected() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varlong(bytes.fromhex("ff" * 10 + "01"))
    with pytest.raises(CorruptRecordError):
        decode_varlong(bytes.fromhex("ff" * 9 + "7f"))  # 70 bits > 64


def test_out_of_range_encode_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(-(2**63) - 1)
    with pytest.raises(ValueError):
        encode_uvarint(-1)


@given(INT32, st.binary(max_size=4))
def test_varint_roundtrip_at_offset(n: int, prefix: bytes) -> None:
    data = prefix + encode_varint(n) + b"\x00"
    assert decode_varint(data, len(prefix)) == (n, len(data) - 1)


@given(INT64)
def test_varlong_roundtrip(n: int) -> None:
    enc = encode_varlong(n)
    assert decode_varlong(enc) == (n, len(enc))


@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(n: int) -> None:
    assert decode_uvarint(encode_uvarint(n)) == (n, len(encode_uvarint(n)))
