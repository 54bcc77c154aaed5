"""Unit tests of the security building blocks: Kafka's principal mapping rules, JAAS
parsing, the SCRAM exchange against RFC 7677's test vector, the authorizer's rules, the
crash-safe stores, and connections.max.reauth.ms on a live broker."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from kafkactl.broker.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourceType,
)
from kafkactl.broker.security.acl_store import FileAclStore
from kafkactl.broker.security.authorizer import AclAuthorizer
from kafkactl.broker.security.credential_store import FileCredentialStore
from kafkactl.broker.security.jaas import JaasConfigError, plain_users
from kafkactl.broker.security.principal import (
    KafkaPrincipal,
    NoMatchingRule,
    SslPrincipalMapper,
    distinguished_name,
)
from kafkactl.broker.security.scram import SaslAuthenticationError, ScramServerExchange
from kafkactl.protocol import scram


def test_distinguished_name_is_rfc2253_most_specific_first() -> None:
    # a certificate whose subject is C=US, O=acme, inc, CN=alice (the rest is not read)
    def tlv(tag: int, body: bytes) -> bytes:
        return bytes([tag, len(body)]) + body

    rdns = [tlv(0x31, tlv(0x30, tlv(0x06, bytes([0x55, 0x04, t])) + tlv(0x0C, v)))
            for t, v in ((6, b"US"), (10, b"acme, inc"), (3, b"alice"))]
    subject = tlv(0x30, b"".join(rdns))
    tbs = tlv(0x30, tlv(0x02, b"\x01") + tlv(0x30, b"") + tlv(0x30, b"") + tlv(0x30, b"")
              + subject)
    assert distinguished_name(tlv(0x30, tbs)) == "CN=alice,O=acme\\, inc,C=US"


@pytest.mark.parametrize("rules,dn,expected", [
    ("DEFAULT", "CN=alice,O=acme", "CN=alice,O=acme"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$3/L,DEFAULT", "CN=Bob,OU=eng,O=ACME", "bob@acme"),
    ("RULE:^CN=([^,]*).*$/$1/U", "CN=carol,O=x", "CAROL"),
    ("RULE:^CN=(x)$/$1/,DEFAULT", "CN=dave", "CN=dave"),
])
def test_ssl_principal_mapping_rules(rules: str, dn: str, expected: str) -> None:
    assert SslPrincipalMapper(rules).principal_name(dn) == expected


def test_no_matching_rule_and_bad_rules() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=x$/y/").principal_name("CN=z")
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        SslPrincipalMapper("RULE:oops")


def test_jaas_plain_users() -> None:
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="a\\"b" user_admin="a\\"b" user_alice=secret;')
    assert plain_users(text) == {"admin": 'a"b', "alice": "secret"}
    for bad in ("", "Module required user_a=\"x\"", "Module nope a=b;"):
        with pytest.raises(JaasConfigError):
            plain_users(bad)


class _OneUser:
    def __init__(self, cred: scram.ScramCredential) -> None:
        self.cred = cred

    def get(self, user: str, mechanism: str) -> scram.ScramCredential | None:
        return self.cred if user == "user" else None


def test_scram_rfc7677_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    mech = scram.SCRAM_SHA_256
    cred = scram.new_credential(mech, "pencil", 4096, base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    monkeypatch.setattr(scram, "new_nonce", lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    ex = ScramServerExchange(mech, _OneUser(cred))  # type: ignore[arg-type]
    assert ex.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
        b"i=4096")
    final = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
             b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert ex.evaluate(final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    with pytest.raises(SaslAuthenticationError):
        ex.evaluate(final)  # no second final on the same exchange


def test_scram_unknown_user_and_forged_proof_fail_alike() -> None:
    mech = scram.SCRAM_SHA_512
    cred = scram.new_credential(mech, "pw")
    unknown = ScramServerExchange(mech, _OneUser(cred))  # type: ignore[arg-type]
    with pytest.raises(SaslAuthenticationError) as e1:
        unknown.evaluate(b"n,,n=nobody,r=abc")
    ex = ScramServerExchange(mech, _OneUser(cred))  # type: ignore[arg-type]
    sf = scram.ServerFirst.parse(ex.evaluate(b"n,,n=user,r=abc"))
    with pytest.raises(SaslAuthenticationError) as e2:
        ex.evaluate(f"c=biws,r={sf.nonce},p={base64.b64encode(bytes(64)).decode()}".encode())
    assert str(e1.value) == str(e2.value)


def _binding(name: str, ptype: PatternType, principal: str, op: AclOperation,
             perm: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding.create(ResourceType.TOPIC, name, ptype, principal, "*", op, perm)


def test_authorizer_rules(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path / "acls.json")
    store.load()
    auth = AclAuthorizer(store, super_users=frozenset({"User:root"}))
    alice, bob = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")
    store.add([_binding("orders", PatternType.LITERAL, "User:alice", AclOperation.WRITE),
               _binding("logs-", PatternType.PREFIXED, "User:*", AclOperation.READ),
               _binding("logs-secret", PatternType.LITERAL, "User:bob", AclOperation.ALL,
                        AclPermissionType.DENY)])
    T = ResourceType.TOPIC
    assert auth.authorize(alice, "h", AclOperation.WRITE, T, "orders")
    assert auth.authorize(alice, "h", AclOperation.DESCRIBE, T, "orders")  # implied
    assert not auth.authorize(alice, "h", AclOperation.READ, T, "orders")
    assert not auth.authorize(alice, "h", AclOperation.WRITE, T, "other")  # no ACL: deny
    assert auth.authorize(bob, "h", AclOperation.READ, T, "logs-app")
    assert not auth.authorize(bob, "h", AclOperation.READ, T, "logs-secret")  # deny wins
    assert auth.authorize(KafkaPrincipal("User", "root"), "h", AclOperation.DELETE, T, "x")
    # persisted and reloaded
    again = FileAclStore(tmp_path / "acls.json")
    again.load()
    assert again.bindings() == store.bindings()
    assert not (tmp_path / "acls.json.tmp").exists()


def test_bindings_kafka_refuses() -> None:
    with pytest.raises(InvalidAcl, match="operation"):
        AclBinding.create(2, "t", 3, "User:a", "*", 99, 3)
    with pytest.raises(InvalidAcl, match="invalid resource name"):
        AclBinding.create(3, "g/h", 3, "User:a", "*", AclOperation.READ, 3)
    # as Kafka's broker (only its kafka-acls tool checks operations against types)
    AclBinding.create(3, "g", 3, "User:a", "*", AclOperation.WRITE, 3)


def test_credential_store_keeps_no_password(tmp_path: Path) -> None:
    store = FileCredentialStore(tmp_path / "c.json")
    store.load()
    cred = scram.new_credential(scram.SCRAM_SHA_256, "hunter2")
    store.alter({("u", "SCRAM-SHA-256"): cred}, set())
    assert "hunter2" not in (tmp_path / "c.json").read_text()
    again = FileCredentialStore(tmp_path / "c.json")
    again.load()
    assert again.get("u", "SCRAM-SHA-256") == cred
    again.alter({}, {("u", "SCRAM-SHA-256")})
    assert again.users() == {}


def test_connections_max_reauth_ms(certs: object, tmp_path: Path) -> None:
    from kafkactl.protocol import codec
    from kafkactl.protocol.api_keys import ApiKey
    from tests.broker.security.conftest import start_secure
    from tests.broker.security.test_bad_input import _closed, _connect, _request

    sb = start_secure(tmp_path, certs,  # type: ignore[arg-type]
                      **{"listener.name.sasl_plaintext.connections.max.reauth.ms": "1000"})
    try:
        with _connect(sb, "SASL_PLAINTEXT") as s:
            _request(s, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
            r = _request(s, ApiKey.SASL_AUTHENTICATE, 1,
                         {"auth_bytes": b"\x00bob\x00bob-secret"})
            assert r["error_code"] == 0 and r["session_lifetime_ms"] == 1000
            assert _request(s, ApiKey.METADATA, 1, {"topics": []})["brokers"]
            time.sleep(1.2)
            s.sendall(codec.encode_request(ApiKey.METADATA, 1, 7, "x", {"topics": []}))
            assert _closed(s)
        assert "SASL session expired" in sb.broker.log()
    finally:
        sb.broker.kill()
