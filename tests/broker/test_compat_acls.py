"""ACL APIs without an authorizer answer SECURITY_DISABLED, on a connection that stays
usable (issue 12.4): Sarama's ClusterAdmin sends DescribeAcls without an ApiVersions
handshake, and its next call on the same connection must still work."""

from __future__ import annotations

import socket
import struct

import pytest

from kafkactl.protocol.api_keys import ApiKey

from .wire import Wire

SECURITY_DISABLED = 54
FILTER = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
          "principal_filter": None, "host_filter": None, "operation": 1,
          "permission_type": 1}
ACL = {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
       "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_acl_apis_answer_security_disabled_and_keep_the_connection(broker, version) -> None:
    with Wire(broker.bootstrap) as w:  # no ApiVersions first, as Sarama does
        r = w.request(ApiKey.DESCRIBE_ACLS, version, FILTER)
        assert r["error_code"] == SECURITY_DISABLED and r["resources"] == []
        assert "Authorizer" in r["error_message"]
        r = w.request(ApiKey.CREATE_ACLS, version, {"creations": [ACL, ACL]})
        assert [x["error_code"] for x in r["results"]] == [SECURITY_DISABLED] * 2
        r = w.request(ApiKey.DELETE_ACLS, version, {"filters": [FILTER]})
        assert [x["error_code"] for x in r["filter_results"]] == [SECURITY_DISABLED]
        # the same connection still answers the next admin call
        meta = w.request(ApiKey.METADATA, 1, {"topics": []})
        assert meta["brokers"]


def test_acl_apis_advertised_as_kafka_does(broker) -> None:
    with Wire(broker.bootstrap) as w:
        r = w.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                               "client_software_version": "1"})
        table = {e["api_key"]: e["max_version"] for e in r["api_keys"]}
        assert table[29] == table[30] == table[31] == 3


def test_real_admin_clients_report_security_disabled(broker) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    # librdkafka (2.x) reads the error but its Python binding returns no bindings, as it
    # does against Kafka without an authorizer: the point is that it answers, not hangs.
    assert admin.describe_acls(flt).result(10) == []

    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import SecurityDisabledError

    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        with pytest.raises(SecurityDisabledError):
            kadmin.describe_acls(ACLFilter(None, "*", ACLOperation.ANY, ACLPermissionType.ANY,
                                           ResourcePatternFilter(KResourceType.ANY, None,
                                                                 ACLResourcePatternType.ANY)))
        assert kadmin.describe_cluster()["brokers"]  # the client is still usable
    finally:
        kadmin.close()


def _raw_request(sock: socket.socket, api_key: int, version: int, cid: int,
                 flexible_header: bool, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, version, cid, 4) + b"wire"
    if flexible_header:
        header += b"\x00"  # request header v2: no tagged fields
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    sock.settimeout(10)
    size = struct.unpack(">i", _recv(sock, 4))[0]
    return _recv(sock, size)


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


@pytest.mark.parametrize("api_key,version,flexible,expected", [
    # ListClientMetricsResources v0 (flexible): throttle, error_code, resources (an empty
    # compact array), no tagged fields
    (74, 0, True, struct.pack(">ih", 0, 35) + b"\x01\x00"),
    # DescribeDelegationToken v0: error_code UNSUPPORTED_VERSION, tokens (empty), throttle
    (41, 0, False, struct.pack(">hii", 35, 0, 0)),
    # SaslHandshake v1 (mechanism PLAIN) on a listener without SASL: ILLEGAL_SASL_STATE,
    # no mechanisms
    (17, 1, False, struct.pack(">hi", 34, 0)),
])
def test_unimplemented_kafka_apis_get_a_well_formed_error(broker, api_key, version, flexible,
                                                          expected) -> None:
    with socket.create_connection(("127.0.0.1", broker.port)) as s:
        body = struct.pack(">h", 5) + b"PLAIN" if api_key == 17 else b""
        frame = _raw_request(s, api_key, version, 41, flexible, body)
        assert struct.unpack_from(">i", frame)[0] == 41
        body = frame[5:] if flexible else frame[4:]  # response header v1 has a tag byte
        if expected is not None:
            assert body == expected
        else:
            assert struct.unpack_from(">h", body, 4)[0] == 35  # after throttle_time_ms
            assert b"not supported by this broker" in body
        # the same connection keeps working (Metadata v1, empty topic list)
        meta = _raw_request(s, 3, 1, 42, False, struct.pack(">i", 0))
        assert struct.unpack_from(">i", meta)[0] == 42


def test_apis_without_an_error_field_or_unknown_keys_still_close(broker) -> None:
    for api_key, version in ((34, 1), (999, 0), (3, 99)):
        with socket.create_connection(("127.0.0.1", broker.port)) as s, \
                pytest.raises((ConnectionError, OSError)):
            _raw_request(s, api_key, version, 1, False)
