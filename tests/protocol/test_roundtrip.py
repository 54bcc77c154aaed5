"""Every API at every advertised version, requests and responses, through our codec."""

from __future__ import annotations

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.messages import REQUESTS, RESPONSES
from kafkactl.protocol.versions import SUPPORTED_VERSIONS

from .samples import expected_struct, plain, sample_message

CASES = [
    (key, v) for key, (lo, hi) in sorted(SUPPORTED_VERSIONS.items()) for v in range(lo, hi + 1)
]
IDS = [f"{ApiKey(k).spec_name}-v{v}" for k, v in CASES]


@pytest.mark.parametrize("use_nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("api_key", "version"), CASES, ids=IDS)
def test_request_roundtrip(api_key: int, version: int, use_nulls: bool) -> None:
    msg = REQUESTS[api_key]
    body = sample_message(msg, version, use_nulls)
    frame = codec.encode_request(api_key, version, 42, "client-é", body)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    header, offset = codec.decode_request_header(frame[4:])
    assert header == codec.RequestHeader(api_key, version, 42, "client-é")
    decoded = codec.decode_request(api_key, version, frame[4:], offset)
    assert plain(decoded) == expected_struct(msg.fields, version, body)
    # decoding then re-encoding gives the same bytes
    assert codec.encode_request(api_key, version, 42, "client-é", decoded) == frame


@pytest.mark.parametrize("use_nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize(("api_key", "version"), CASES, ids=IDS)
def test_response_roundtrip(api_key: int, version: int, use_nulls: bool) -> None:
    msg = RESPONSES[api_key]
    body = sample_message(msg, version, use_nulls)
    frame = codec.frame_bytes(codec.encode_response(api_key, version, 7, body))
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    assert codec.peek_correlation_id(frame[4:]) == 7
    decoded = codec.decode_response(api_key, version, frame[4:])
    assert plain(decoded) == expected_struct(msg.fields, version, body)
    again = codec.frame_bytes(codec.encode_response(api_key, version, 7, decoded))
    assert again == frame


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=IDS)
def test_empty_body_uses_spec_defaults(api_key: int, version: int) -> None:
    """Encoding {} writes every field's default, which decodes back to the defaults."""
    data = codec.encode_request(api_key, version, 1, None, {})[4:]
    header, offset = codec.decode_request_header(data)
    assert header.client_id is None
    decoded = codec.decode_request(api_key, version, data, offset)
    assert plain(decoded) == expected_struct(REQUESTS[api_key].fields, version, {})

    data = codec.frame_bytes(codec.encode_response(api_key, version, 1, {}))[4:]
    decoded = codec.decode_response(api_key, version, data)
    assert plain(decoded) == expected_struct(RESPONSES[api_key].fields, version, {})
