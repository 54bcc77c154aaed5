"""A broker with four listeners (PLAINTEXT for set-up, SASL_SSL, SSL with client
certificates required, SASL_PLAINTEXT), certificates made by openssl for the module, PLAIN
users from the JAAS config and SCRAM users created over the AlterUserScramCredentials API."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.broker.security.certs import OPENSSL, Certs, make_certs
from tests.conftest import BrokerProcess, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_bob="bob-secret";')
# Kafka's ACL authorizer with admin and the PLAINTEXT listener (ANONYMOUS) as super users
ACL_AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                  "super.users": "User:admin;User:ANONYMOUS"}
PASSWORDS = {"alice": "alice-secret", "carol": "carol-secret", "admin": "admin-secret",
             "bob": "bob-secret"}


@dataclass
class SecureBroker:
    broker: BrokerProcess
    certs: Certs
    ports: dict[str, int]

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def secure_overrides(certs: Certs, ports: dict[str, int], **extra: str) -> dict[str, str]:
    return {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.location": str(certs.server_keystore),
        "ssl.truststore.location": str(certs.ca),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        **extra,
    }


def add_scram_users(bootstrap: str, users: dict[str, str]) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096),
                                            password.encode())
               for user, password in users.items()
               for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(10)


def start_secure(tmp: Path, certs: Certs, **extra: str) -> SecureBroker:
    data = tmp / "data"
    data.mkdir(parents=True, exist_ok=True)
    ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port(), "SSL": free_port(),
             "SASL_PLAINTEXT": free_port()}
    b = BrokerProcess(data, ports["PLAINTEXT"], secure_overrides(certs, ports, **extra))
    b.start()
    return SecureBroker(b, certs, ports)


needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="openssl is not installed")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secure_broker(certs: Certs,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path_factory.mktemp("secure"), certs)
    add_scram_users(sb.bootstrap("PLAINTEXT"), {"alice": PASSWORDS["alice"]})
    yield sb
    sb.broker.kill()
