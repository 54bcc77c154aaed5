"""Byte-exact comparison with kafka-python's own protocol classes (an independent
implementation): the same request/response dict must give the same frame, and frames
built by kafka-python must decode with our codec."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.messages import REQUESTS, RESPONSES

from .samples import expected_struct, plain, sample_message

kp_protocol = pytest.importorskip("kafka.protocol.api_message")


def kp_class(api_key: int, kind: str) -> Any:
    """kafka-python's ApiMessage subclass for (api_key, Request|Response)."""
    name = ApiKey(api_key).spec_name + kind

    def walk(cls: type) -> Any:
        for sub in cls.__subclasses__():
            if sub.__name__ == name and sub.__dict__.get("_class_version") is None:
                return sub
            found = walk(sub)
            if found is not None:
                return found
        return None

    import kafka.protocol.admin  # noqa: F401  (register every message class)
    import kafka.protocol.consumer  # noqa: F401
    import kafka.protocol.metadata  # noqa: F401
    import kafka.protocol.producer  # noqa: F401

    cls = walk(kp_protocol.ApiMessage)
    if cls is None:
        pytest.skip(f"kafka-python has no {name}")
    return cls


def kp_build(cls: Any, d: dict[str, Any], version: int | None = None) -> Any:
    kwargs = {}
    for name, field in cls._struct.fields.items():
        if name not in d:
            continue
        v = d[name]
        if v is not None and field.is_struct_array():
            v = [kp_build(field.data_class, x) for x in v]
        elif v is not None and field.is_struct():
            v = kp_build(field.data_class, v)
        kwargs[name] = v
    if version is None:
        return cls(**kwargs)
    return cls(**kwargs, version=version)


def kp_compatible(value: Any) -> Any:
    """kafka-python models *AuthorizedOperations as its own ``bitfield`` type, which
    takes a set, not Kafka's int32; keep those at the spec default (-2**31)."""
    if isinstance(value, dict):
        return {
            k: (-(2**31) if k.endswith("authorized_operations") else kp_compatible(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [kp_compatible(v) for v in value]
    return value


CASES = [
    (ApiKey.API_VERSIONS, 0), (ApiKey.API_VERSIONS, 3), (ApiKey.API_VERSIONS, 4),
    (ApiKey.METADATA, 4), (ApiKey.METADATA, 5), (ApiKey.METADATA, 12),
    (ApiKey.PRODUCE, 3), (ApiKey.PRODUCE, 7), (ApiKey.PRODUCE, 9),
    (ApiKey.FETCH, 4), (ApiKey.FETCH, 11), (ApiKey.FETCH, 12),
    (ApiKey.LIST_OFFSETS, 2), (ApiKey.LIST_OFFSETS, 7),
    (ApiKey.FIND_COORDINATOR, 0), (ApiKey.FIND_COORDINATOR, 4),
    (ApiKey.JOIN_GROUP, 5), (ApiKey.JOIN_GROUP, 7), (ApiKey.SYNC_GROUP, 5),
    (ApiKey.HEARTBEAT, 4), (ApiKey.OFFSET_COMMIT, 8), (ApiKey.OFFSET_FETCH, 8),
    (ApiKey.INIT_PRODUCER_ID, 0), (ApiKey.INIT_PRODUCER_ID, 4),
    (ApiKey.CREATE_TOPICS, 7), (ApiKey.DESCRIBE_CONFIGS, 4),
]
IDS = [f"{k.spec_name}-v{v}" for k, v in CASES]


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=IDS)
def test_request_bytes_match_kafka_python(api_key: ApiKey, version: int) -> None:
    body = sample_message(REQUESTS[api_key], version)
    ours = codec.encode_request(api_key, version, 1234, "kafkactl", body)
    req = kp_build(kp_class(api_key, "Request")[version], body)
    req.with_header(correlation_id=1234, client_id="kafkactl")
    theirs = bytes(req.encode(header=True, framed=True))
    assert ours == theirs


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=IDS)
def test_response_bytes_match_kafka_python(api_key: ApiKey, version: int) -> None:
    body = kp_compatible(sample_message(RESPONSES[api_key], version))
    ours = codec.frame_bytes(codec.encode_response(api_key, version, 99, body))
    resp = kp_build(kp_class(api_key, "Response")[version], body)
    resp.with_header(correlation_id=99)
    theirs = bytes(resp.encode(header=True, framed=True))
    assert ours == theirs
    assert plain(codec.decode_response(api_key, version, theirs[4:])) == expected_struct(
        RESPONSES[api_key].fields, version, body
    )
