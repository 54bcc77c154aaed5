"""Malformed input raises typed errors (ProtocolDecodeError / UnsupportedVersionError),
never IndexError / struct.error / UnicodeDecodeError; plus a hypothesis fuzz."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import (
    InvalidRequestError,
    ProtocolDecodeError,
    ProtocolEncodeError,
    UnsupportedVersionError,
)
from kafkactl.protocol.messages import REQUESTS, RESPONSES
from tests.hypothesis_profiles import examples

from .samples import plain, sample_message

SAMPLES = [(ApiKey.PRODUCE, 9), (ApiKey.PRODUCE, 3), (ApiKey.METADATA, 12),
           (ApiKey.FETCH, 12), (ApiKey.JOIN_GROUP, 7), (ApiKey.API_VERSIONS, 3)]


def request_frame(api_key: int, version: int) -> bytes:
    body = sample_message(REQUESTS[api_key], version)
    return codec.encode_request(api_key, version, 5, "c", body)[4:]


def decode_whole_request(frame: bytes) -> dict:
    header, off = codec.decode_request_header(frame)
    return codec.decode_request(header.api_key, header.api_version, frame, off)


@pytest.mark.parametrize(("api_key", "version"), SAMPLES)
def test_every_truncation_raises_decode_error(api_key: int, version: int) -> None:
    frame = request_frame(api_key, version)
    for cut in range(len(frame)):
        with pytest.raises(ProtocolDecodeError):
            decode_whole_request(frame[:cut])
    resp = codec.frame_bytes(
        codec.encode_response(api_key, version, 1, sample_message(RESPONSES[api_key], version))
    )[4:]
    for cut in range(len(resp)):
        with pytest.raises(ProtocolDecodeError):
            codec.decode_response(api_key, version, resp[:cut])


def test_decode_error_is_invalid_request() -> None:
    assert issubclass(ProtocolDecodeError, InvalidRequestError)
    assert ProtocolDecodeError("x").code == 42


def _produce_v3(topic: bytes, array_len: int = 1, records_len: int = 3) -> bytes:
    """A hand-built Produce v3 request frame (no size prefix)."""
    out = struct.pack(">hhih", 0, 3, 1, 1) + b"c"
    out += struct.pack(">h", -1) + struct.pack(">hi", 1, 1000)
    out += struct.pack(">i", 1) + struct.pack(">h", len(topic)) + topic
    out += struct.pack(">i", array_len) + struct.pack(">i", 0)
    out += struct.pack(">i", records_len) + b"abc"
    return out


def test_hand_built_frame_decodes() -> None:
    d = decode_whole_request(_produce_v3(b"topic"))
    assert d["topic_data"][0]["name"] == "topic"
    assert bytes(d["topic_data"][0]["partition_data"][0]["records"]) == b"abc"


@pytest.mark.parametrize(
    "frame",
    [
        _produce_v3(b"\xff\xfe bad utf8"),
        _produce_v3(b"topic", array_len=2**31 - 1),  # absurd array length
        _produce_v3(b"topic", array_len=-5),  # negative array length
        _produce_v3(b"topic", records_len=2**31 - 1),  # a 2 GiB records field
        _produce_v3(b"topic", records_len=-7),
    ],
    ids=["bad-utf8", "huge-array", "negative-array", "huge-records", "negative-records"],
)
def test_bad_lengths_and_utf8(frame: bytes) -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_whole_request(frame)


def test_bad_client_id_and_header() -> None:
    bad = struct.pack(">hhih", 18, 0, 1, 3) + b"\xc3\x28x"
    with pytest.raises(ProtocolDecodeError):
        codec.decode_request_header(bad)
    with pytest.raises(ProtocolDecodeError):
        codec.decode_request_header(struct.pack(">hhih", 18, 0, 1, -3))
    with pytest.raises(ProtocolDecodeError):
        codec.decode_request_header(b"\x00\x12")


def test_overlong_uvarint_and_compact_lengths() -> None:
    # ApiVersions v3 body: compact string whose length varint never ends
    header = struct.pack(">hhih", 18, 3, 1, -1) + b"\x00"
    with pytest.raises(ProtocolDecodeError):
        codec.decode_request(18, 3, header + b"\xff" * 8, len(header))
    # compact string longer than the frame
    with pytest.raises(ProtocolDecodeError):
        codec.decode_request(18, 3, header + b"\xff\xff\x03abc", len(header))


def test_unknown_tags_are_skipped() -> None:
    frame = request_frame(ApiKey.PRODUCE, 9)
    assert frame[-1] == 0  # empty top-level tagged-field section
    tagged = frame[:-1] + bytes([2, 99, 3]) + b"xyz" + bytes([120, 0])
    assert plain(decode_whole_request(tagged)) == plain(decode_whole_request(frame))
    # a tagged field whose size runs past the end is an error, not a crash
    with pytest.raises(ProtocolDecodeError):
        decode_whole_request(frame[:-1] + bytes([1, 99, 50]) + b"xyz")


def test_unsupported_versions_and_keys() -> None:
    with pytest.raises(UnsupportedVersionError):
        codec.decode_request(ApiKey.FETCH, 13, b"", 0)
    with pytest.raises(UnsupportedVersionError):
        codec.decode_request(ApiKey.CREATE_DELEGATION_TOKEN, 0, b"", 0)
    with pytest.raises(UnsupportedVersionError):
        codec.decode_request(9999, 0, b"", 0)
    with pytest.raises(UnsupportedVersionError):
        codec.encode_response(ApiKey.PRODUCE, 10, 1, {})
    # the header of an unsupported version still parses (so the broker can answer)
    h, _ = codec.decode_request_header(struct.pack(">hhih", 1, 13, 9, -1) + b"\x00")
    assert (h.api_key, h.api_version, h.correlation_id) == (1, 13, 9)


def test_encode_errors_are_typed() -> None:
    with pytest.raises(ProtocolEncodeError):
        codec.encode_request(ApiKey.PRODUCE, 9, 1, None, {"topic_data": [{"name": None}]})
    with pytest.raises(ProtocolEncodeError):
        codec.encode_request(ApiKey.PRODUCE, 9, 1, None, {"acks": "all"})
    with pytest.raises(ProtocolEncodeError):
        codec.encode_request(ApiKey.PRODUCE, 2, 1, None, {"acks": 70000})
    with pytest.raises(ProtocolEncodeError):
        codec.encode_request(ApiKey.PRODUCE, 9, 1, None, {"topic_data": [5]})


FRAMES = [request_frame(k, v) for k, v in SAMPLES]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(0, len(FRAMES) - 1),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    cut=st.integers(0, 10_000),
)
def test_fuzz_mutated_requests(index: int, edits: list[tuple[int, int]], cut: int) -> None:
    frame = bytearray(FRAMES[index])
    for pos, byte in edits:
        frame[pos % len(frame)] = byte
    data = bytes(frame[: max(cut, len(frame) // 2)])
    with contextlib.suppress(ProtocolDecodeError, UnsupportedVersionError):
        decode_whole_request(data)


@settings(max_examples=examples(300), deadline=None)
@given(api=st.sampled_from(sorted(RESPONSES)), data=st.binary(max_size=200),
       version=st.integers(0, 12))
def test_fuzz_random_bytes_as_responses(api: int, data: bytes, version: int) -> None:
    with contextlib.suppress(ProtocolDecodeError, UnsupportedVersionError):
        codec.decode_response(api, version, data)
