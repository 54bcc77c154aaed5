"""Headers (the ApiVersions exception), the too-new ApiVersions reply, FileRegion framing,
error codes, and the version-prefixed data schemas."""

from __future__ import annotations

import struct

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol import errors as E
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.data import (
    ASSIGNMENT,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    SUBSCRIPTION,
    decode_data,
    encode_data,
)
from kafkactl.protocol.errors import ErrorCode, error_for
from kafkactl.protocol.types import FileRegion
from kafkactl.protocol.versions import INTER_BROKER_APIS, SUPPORTED_VERSIONS, api_versions_entries

from .samples import expected_struct, plain, sample_message


@pytest.mark.parametrize("version", range(5))
def test_api_versions_response_always_header_v0(version: int) -> None:
    body = {"error_code": 0, "api_keys": api_versions_entries(), "throttle_time_ms": 0}
    frame = codec.frame_bytes(codec.encode_response(ApiKey.API_VERSIONS, version, 77, body))
    # size, correlation id, then straight to the int16 error code: no header tag byte
    assert struct.unpack_from(">ih", frame, 4) == (77, 0)
    count_pos = 10
    if version >= 3:
        assert frame[count_pos] == len(api_versions_entries()) + 1  # compact array
    else:
        assert struct.unpack_from(">i", frame, count_pos)[0] == len(api_versions_entries())
    assert codec.decode_response(ApiKey.API_VERSIONS, version, frame[4:])["api_keys"] == (
        api_versions_entries()
    )


def test_flexible_response_header_has_tag_byte() -> None:
    frame = codec.frame_bytes(codec.encode_response(ApiKey.PRODUCE, 9, 5, {}))
    assert frame[4:9] == b"\x00\x00\x00\x05\x00"
    frame = codec.frame_bytes(codec.encode_response(ApiKey.PRODUCE, 8, 5, {}))
    assert frame[4:8] == b"\x00\x00\x00\x05" and frame[8:12] == b"\x00\x00\x00\x00"


def test_request_header_v2_keeps_client_id_non_compact() -> None:
    frame = codec.encode_request(ApiKey.METADATA, 12, 3, "abc", {"topics": None})
    assert frame[4:18] == struct.pack(">hhih", 3, 12, 3, 3) + b"abc" + b"\x00"
    frame = codec.encode_request(ApiKey.METADATA, 8, 3, "abc", {"topics": None})
    assert frame[4:17] == struct.pack(">hhih", 3, 8, 3, 3) + b"abc"


def test_api_versions_too_new_reply() -> None:
    frame = codec.encode_api_versions_unsupported(123)
    assert frame == (
        struct.pack(">ii", 16, 123) + struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, 0, 4)
    )
    # a client that sent v3 or v4 decodes it (as v0, the way Kafka clients do)
    for v in (3, 4):
        d = codec.decode_response(ApiKey.API_VERSIONS, v, frame[4:])
        assert d["error_code"] == 35
        assert d["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_advertised_table() -> None:
    table = {e["api_key"]: (e["min_version"], e["max_version"]) for e in api_versions_entries()}
    assert table[ApiKey.FETCH] == (0, 12)
    assert table[ApiKey.FIND_COORDINATOR] == (0, 4)
    assert table[ApiKey.SASL_HANDSHAKE] == (0, 1)
    assert table[ApiKey.SASL_AUTHENTICATE] == (0, 2)
    assert ApiKey.CREATE_DELEGATION_TOKEN not in table and 71 not in table
    # every client API starts at v0 (librdkafka turns features on by old versions); the
    # controller-to-broker APIs only ever come from a kafkactl controller
    assert all(lo == 0 <= hi for k, (lo, hi) in table.items() if k not in INTER_BROKER_APIS)
    assert all(lo <= hi for lo, hi in table.values())
    assert len(table) == len(SUPPORTED_VERSIONS) == 53


def test_fetch_response_with_file_regions() -> None:
    body = {"responses": [{"topic": "t", "partitions": [
        {"partition_index": p, "high_watermark": 9, "records": FileRegion(7, 100 * p, 50 + p)}
        for p in range(2)
    ]}]}
    parts = codec.encode_response(ApiKey.FETCH, 12, 1, body)
    regions = [p for p in parts if isinstance(p, FileRegion)]
    assert regions == [FileRegion(7, 0, 50), FileRegion(7, 100, 51)]
    assert struct.unpack_from(">i", parts[0])[0] == codec.frame_size(parts) - 4
    # splice the "file" bytes in and the client side decodes the same response
    fake = {0: b"a" * 50, 100: b"b" * 51}
    wire = b"".join(fake[p.position] if isinstance(p, FileRegion) else p for p in parts)
    d = codec.decode_response(ApiKey.FETCH, 12, wire[4:])
    got = [bytes(p["records"]) for p in d["responses"][0]["partitions"]]
    assert got == [b"a" * 50, b"b" * 51]


def test_large_in_memory_records_are_not_copied() -> None:
    big = memoryview(bytearray(b"x" * 100_000))
    body = {"responses": [{"topic": "t", "partitions": [{"records": big}]}]}
    parts = codec.encode_response(ApiKey.FETCH, 11, 1, body)
    assert any(p is big for p in parts)
    frame = codec.frame_bytes(parts)
    d = codec.decode_response(ApiKey.FETCH, 11, frame[4:])
    assert bytes(d["responses"][0]["partitions"][0]["records"]) == bytes(big)


def test_produce_records_are_zero_copy_views() -> None:
    records = bytes(range(256)) * 4
    body = {"acks": 1, "timeout_ms": 5, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    frame = bytearray(codec.encode_request(ApiKey.PRODUCE, 9, 1, None, body)[4:])
    h, off = codec.decode_request_header(frame)
    d = codec.decode_request(0, 9, frame, off)
    view = d["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(view, memoryview) and bytes(view) == records
    frame[-4] ^= 0xFF  # the last records byte (3 tag bytes follow)
    # the view shares memory with the frame: no copy was made
    assert bytes(view) != records


def test_error_codes_match_kafka_python() -> None:
    kerrors = pytest.importorskip("kafka.errors")
    theirs = {c.errno for c in kerrors.BrokerResponseError.__subclasses__() if c.errno is not None}
    assert theirs <= {int(c) for c in ErrorCode}
    assert ErrorCode.UNSUPPORTED_VERSION == 35 and ErrorCode.MEMBER_ID_REQUIRED == 79
    assert ErrorCode.UNKNOWN_TOPIC_ID == 100 and ErrorCode(-1).name == "UNKNOWN_SERVER_ERROR"
    assert max(ErrorCode) >= 120


def test_error_for() -> None:
    assert error_for(1) is E.OffsetOutOfRangeError
    exc = error_for(ErrorCode.MEMBER_ID_REQUIRED)("join again")
    assert isinstance(exc, E.KafkaError) and exc.code == 79 and str(exc) == "join again"
    assert error_for(6)().retriable and not error_for(36)().retriable
    assert error_for(12345) is E.UnknownServerError
    for code in ErrorCode:
        if code:
            assert error_for(code).code == code
    with pytest.raises(ValueError):
        error_for(0)
    with pytest.raises(E.NotCoordinatorError):
        E.raise_for_code(16)
    E.raise_for_code(0)


@pytest.mark.parametrize("schema", [SUBSCRIPTION, ASSIGNMENT, OFFSET_COMMIT_KEY,
                                    OFFSET_COMMIT_VALUE, GROUP_METADATA_VALUE],
                         ids=lambda s: s.name)
def test_data_schemas_roundtrip(schema: object) -> None:
    for version in range(schema.min_version, schema.max_version + 1):  # type: ignore[attr-defined]
        value = sample_message(schema, version)  # type: ignore[arg-type]
        data = encode_data(schema, version, value)  # type: ignore[arg-type]
        assert struct.unpack_from(">h", data)[0] == version
        got_version, decoded = decode_data(schema, data)  # type: ignore[arg-type]
        assert got_version == version
        assert plain(decoded) == expected_struct(schema.fields, version, value)  # type: ignore[attr-defined]


def test_subscription_from_a_newer_client_is_read_with_our_newest_version() -> None:
    data = encode_data(SUBSCRIPTION, 3, {"topics": ["a", "b"], "rack_id": "r1"})
    future = struct.pack(">h", 9) + data[2:] + b"future-fields"
    version, d = decode_data(SUBSCRIPTION, future)
    assert version == 9 and d["topics"] == ["a", "b"] and d["rack_id"] == "r1"
    with pytest.raises(E.ProtocolDecodeError):
        decode_data(SUBSCRIPTION, data[:5])
