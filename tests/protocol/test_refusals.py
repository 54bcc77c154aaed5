"""The refusal of an API this broker does not serve, for every API key and version in
Kafka's specs: a response frame that Kafka's own (whole) response spec decodes, carrying
UNSUPPORTED_VERSION, or None (the broker then closes the connection, as Kafka does). And
nullable structs (ConsumerGroupHeartbeatResponse.Assignment), which made the refusal
encoder raise, encode and decode as Kafka's generated code does (an int8 marker)."""

from __future__ import annotations

import uuid

import pytest

from kafkactl.protocol.compiler import compile_decoder, compile_encoder
from kafkactl.protocol.errors import ErrorCode
from kafkactl.protocol.refusal import refusal_frame
from kafkactl.protocol.schema import F, Message, parse_range
from kafkactl.protocol.types import INT32
from kafkactl.protocol.versions import SUPPORTED_VERSIONS

from .spec_messages import SPEC_DIR, api_specs

SERVED = {int(k) for k in SUPPORTED_VERSIONS}


def _all_keys_and_versions() -> list[tuple[int, int]]:
    if SPEC_DIR is None:
        return []
    pairs = []
    for key, (request, _response) in api_specs().items():
        r = parse_range(request.valid)
        assert r is not None
        pairs.extend((key, v) for v in range(r[0], r[1] + 2))  # and one past Kafka's range
    return pairs


@pytest.mark.skipif(SPEC_DIR is None, reason="Kafka protocol JSON specs not found")
def test_every_unserved_key_and_version_gets_a_spec_conformant_refusal_or_none() -> None:
    specs = api_specs()
    answered = closed = 0
    for key, version in _all_keys_and_versions():
        if key in SERVED:
            continue
        frame = refusal_frame(key, version, 4242, "ConsumerGroupHeartbeat is not supported")
        _request, response = specs[key]
        valid = parse_range(response.valid)
        assert valid is not None
        has_error = any(f.name == "error_code" and f.present_in(version)
                        for f in response.fields)
        if frame is None:
            # closed: only where Kafka's response cannot carry a top-level error, or the
            # version is not Kafka's, or the key is newer than the ApiKey table (Kafka 3.x
            # does not know it either)
            assert not has_error or not valid[0] <= version <= valid[1] or key > 75, \
                (key, version)
            closed += 1
            continue
        answered += 1
        assert valid[0] <= version <= valid[1] and has_error
        (size,) = INT32.unpack_from(frame)
        assert size == len(frame) - 4
        view = memoryview(frame)
        assert INT32.unpack_from(frame, 4)[0] == 4242
        pos = 8
        if response.is_flexible(version):
            assert frame[pos] == 0  # response header v1: no tagged fields
            pos += 1
        body, end = compile_decoder(response, version)(view, pos)
        assert end == len(frame), (key, version, "trailing bytes")
        expected = ErrorCode.ILLEGAL_SASL_STATE if key in (17, 36) else \
            ErrorCode.UNSUPPORTED_VERSION
        assert body["error_code"] == expected, (key, version)
    assert answered > 30 and closed > 10  # the loop covered both outcomes
    # the request that made the encoder raise
    assert refusal_frame(68, 0, 1, "x") is not None
    assert refusal_frame(68, 1, 1, "x") is not None


_NULLABLE = Message("T", None, "0-1", "1+", (
    F("a", "int32", "0+"),
    F("s", "S", "0+", nullable="0+", default=None, fields=(
        F("id", "uuid", "0+"),
        F("parts", "[]int32", "0+"),
    )),
    F("b", "string", "0+"),
))


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("value", [None, {"id": uuid.UUID(int=7), "parts": [1, 2]}])
def test_a_nullable_struct_is_an_int8_marker_then_the_struct(version: int, value) -> None:
    out = bytearray()
    compile_encoder(_NULLABLE, version)(out, [], {"a": 5, "s": value, "b": "x"})
    marker = out[4]
    assert marker == (0xFF if value is None else 1)
    decoded, end = compile_decoder(_NULLABLE, version)(memoryview(bytes(out)), 0)
    assert end == len(out)
    assert decoded["s"] == value and decoded["a"] == 5 and decoded["b"] == "x"
    if version == 0 and value is None:
        assert bytes(out) == bytes.fromhex("00000005" "ff" "0001") + b"x"


def test_a_truncated_nullable_struct_is_a_decode_error() -> None:
    from kafkactl.protocol.errors import ProtocolDecodeError
    with pytest.raises(ProtocolDecodeError):
        compile_decoder(_NULLABLE, 0)(memoryview(bytes.fromhex("00000005")), 0)
