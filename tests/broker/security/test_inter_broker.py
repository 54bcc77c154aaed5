"""The inter-broker listener and this broker's client credentials from Kafka's keys
(kafkactl.broker.security.inter_broker), and the sans-IO SCRAM client against the
broker's SCRAM server."""

from __future__ import annotations

import pytest

from kafkactl.broker.config import BrokerConfig
from kafkactl.broker.security.inter_broker import inter_broker_security
from kafkactl.broker.security.listeners import SecurityConfigError, check_broker_security
from kafkactl.broker.security.scram import ScramServerExchange
from kafkactl.cluster.broker_connection import InterBrokerSecurity
from kafkactl.protocol import scram

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="broker" password="broker-secret";')
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')


def security(**props: str) -> InterBrokerSecurity:
    overrides = [f"{k}={v}" for k, v in props.items()]
    cfg = BrokerConfig.build(overrides=overrides)
    return inter_broker_security(cfg, check_broker_security(cfg))


def test_plaintext_by_default_and_the_first_listener_without_one() -> None:
    assert security() == InterBrokerSecurity("PLAINTEXT", "PLAINTEXT")
    got = security(**{
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    assert (got.listener, got.protocol, got.mechanism, got.username, got.password) == (
        "SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN", "admin", "admin-secret")


def test_named_listener_with_scram_credentials_from_its_jaas_config() -> None:
    got = security(**{
        "listeners": "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:SASL_PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.replication.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.replication.scram-sha-512.sasl.jaas.config": SCRAM_JAAS})
    assert (got.listener, got.mechanism, got.username, got.password) == (
        "REPLICATION", "SCRAM-SHA-512", "broker", "broker-secret")
    assert "broker-secret" not in repr(got)


@pytest.mark.parametrize(("props", "message"), [
    ({"inter.broker.listener.name": "PLAINTEXT",
      "security.inter.broker.protocol": "PLAINTEXT"}, "only one of"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
      "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}, "is not enabled"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093", "sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config":
          'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'},
     "no username"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
      "sasl.enabled.mechanisms": "SCRAM-SHA-256"}, "no JAAS config"),
])
def test_what_cannot_work_is_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(SecurityConfigError, match=message):
        security(**props)


class _Store:
    def __init__(self, cred: scram.ScramCredential) -> None:
        self.cred = cred

    def get(self, user: str, mechanism: str) -> scram.ScramCredential | None:
        return self.cred if user == "broker" else None


@pytest.mark.parametrize("password", ["broker-secret", "wrong"])
def test_scram_client_exchange_against_the_server(password: str) -> None:
    from kafkactl.broker.security.scram import SaslAuthenticationError

    mech = scram.SCRAM_SHA_256
    server = ScramServerExchange(mech, _Store(scram.new_credential(mech, "broker-secret")))
    client = scram.ScramClientExchange(mech, "broker", password)
    final = client.final(server.evaluate(client.first()))
    if password == "wrong":
        with pytest.raises(SaslAuthenticationError):
            server.evaluate(final)
        return
    client.verify(server.evaluate(final))
    with pytest.raises(scram.ScramError):
        client.verify(b"v=AAAA")
