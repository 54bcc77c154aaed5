"""Bad input on the security paths: plaintext bytes on a TLS port, a TLS hello on a
plaintext port, a SASL exchange cut half-way, a replayed or forged SCRAM final message, a
1 MB token before authentication, an unknown mechanism, requests before authentication,
and hypothesis-mutated SASL tokens. Each is refused (Kafka's error, then the connection
closes), the broker keeps serving others, and nothing reaches the log."""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkactl.protocol import codec, scram
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests.broker.security.conftest import PASSWORDS, SecureBroker
from tests.hypothesis_profiles import examples


def _connect(sb: SecureBroker, listener: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", sb.ports[listener]), timeout=10)


def _request(sock: socket.socket, api_key: int, version: int, body: dict[str, object],
             cid: int = 1) -> dict[str, object]:
    sock.sendall(codec.encode_request(api_key, version, cid, "bad", body))
    size = struct.unpack(">i", _recv(sock, 4))[0]
    return codec.decode_response(api_key, version, memoryview(_recv(sock, size)))


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, OSError):
        return True


def _still_serves(sb: SecureBroker) -> None:
    with _connect(sb, "PLAINTEXT") as s:
        r = _request(s, ApiKey.API_VERSIONS, 0, {})
        assert r["error_code"] == 0


def test_plaintext_bytes_on_a_tls_port_close(secure_broker: SecureBroker) -> None:
    with _connect(secure_broker, "SASL_SSL") as s:
        s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "bad", {}))
        assert _closed(s)
    _still_serves(secure_broker)


def test_tls_hello_on_a_plaintext_port_closes(secure_broker: SecureBroker) -> None:
    ctx = ssl.create_default_context(cafile=str(secure_broker.certs.ca))
    with _connect(secure_broker, "SASL_PLAINTEXT") as raw:
        try:
            ctx.wrap_socket(raw, server_hostname="127.0.0.1").close()
            raise AssertionError("TLS handshake succeeded on a plaintext port")
        except (ssl.SSLError, ConnectionError, OSError):
            pass
    _still_serves(secure_broker)


def test_unknown_mechanism_answers_the_enabled_ones_then_closes(
        secure_broker: SecureBroker) -> None:
    with _connect(secure_broker, "SASL_PLAINTEXT") as s:
        r = _request(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert r["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert r["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert _closed(s)


def test_requests_before_authentication_close(secure_broker: SecureBroker) -> None:
    with _connect(secure_broker, "SASL_PLAINTEXT") as s:
        assert _request(s, ApiKey.API_VERSIONS, 3, {"client_software_name": "b",
                                                    "client_software_version": "1"}
                        )["error_code"] == 0
        s.sendall(codec.encode_request(ApiKey.METADATA, 1, 2, "bad", {"topics": None}))
        assert _closed(s)
    assert "unexpected Kafka request of type METADATA" in secure_broker.broker.log()


def test_a_1mb_token_before_authentication_closes(secure_broker: SecureBroker) -> None:
    with _connect(secure_broker, "SASL_PLAINTEXT") as s:
        _request(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        with contextlib.suppress(OSError):
            s.sendall(codec.encode_request(ApiKey.SASL_AUTHENTICATE, 1, 2, "bad",
                                           {"auth_bytes": b"\x00" * (1 << 20)}))
        assert _closed(s)
    assert "sasl.server.max.receive.size" in secure_broker.broker.log()
    _still_serves(secure_broker)


def test_scram_cut_half_way_then_forged_and_replayed_finals(
        secure_broker: SecureBroker) -> None:
    mech = scram.SCRAM_SHA_256
    # cut half-way: the client goes away after client-first
    with _connect(secure_broker, "SASL_PLAINTEXT") as s:
        _request(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mech.name})
        first = scram.ClientFirst.build("alice", scram.new_nonce())
        _request(s, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": first.to_bytes()})
    # a full valid exchange, then its final message replayed on a new exchange
    with _connect(secure_broker, "SASL_PLAINTEXT") as s:
        _request(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mech.name})
        first = scram.ClientFirst.build("alice", scram.new_nonce())
        sf = scram.ServerFirst.parse(bytes(_request(
            s, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": first.to_bytes()})["auth_bytes"]))
        salted = mech.salted_password(PASSWORDS["alice"], sf.salt, sf.iterations)
        wo = f"c=biws,r={sf.nonce}"
        proof = scram.client_proof(mech, salted, scram.auth_message(first.bare, sf.text, wo))
        import base64

        final = f"{wo},p={base64.b64encode(proof).decode()}".encode()
        ok = _request(s, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": final})
        assert ok["error_code"] == 0
    with _connect(secure_broker, "SASL_PLAINTEXT") as s:
        _request(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mech.name})
        _request(s, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": first.to_bytes()})
        r = _request(s, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": final})  # replay
        assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert _closed(s)
    _still_serves(secure_broker)


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
       tokens=st.lists(st.binary(max_size=300), min_size=1, max_size=3),
       handshake_version=st.sampled_from([0, 1]))
def test_fuzzed_sasl_tokens_never_authenticate(secure_broker: SecureBroker, mechanism: str,
                                               tokens: list[bytes],
                                               handshake_version: int) -> None:
    with _connect(secure_broker, "SASL_PLAINTEXT") as s:
        r = _request(s, ApiKey.SASL_HANDSHAKE, handshake_version, {"mechanism": mechanism})
        assert r["error_code"] == 0
        for token in tokens:
            try:
                if handshake_version == 0:  # KIP-43 raw token frames
                    s.sendall(struct.pack(">i", len(token)) + token)
                    size = struct.unpack(">i", _recv(s, 4))[0]
                    _recv(s, size)
                    continue
                r = _request(s, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": token})
            except (ConnectionError, OSError):
                break
            if r["error_code"]:
                assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert _closed(s)
                break
        # whatever happened, an unauthenticated connection cannot read metadata
        try:
            s.sendall(codec.encode_request(ApiKey.METADATA, 1, 9, "bad", {"topics": None}))
            assert _closed(s)
        except OSError:
            pass
    _still_serves(secure_broker)
