"""What a refused TLS handshake says, on both ends.

The broker: "Failed authentication with <peer> (SSL handshake failed:
CERTIFICATE_VERIFY_FAILED: self-signed certificate)", logged by the channel's logger
(kafkactl.broker.security.channel); before, only "CERTIFICATE_VERIFY_FAILED", under the
SASL logger. The kafkactl client without ssl.ca.location: that the broker's certificate was
not trusted and which option gives the CA; before, "Is `kafkactl serve` running there?"."""

from __future__ import annotations

import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.security.certs import OPENSSL, Certs
from tests.broker.security.conftest import PASSWORDS, SecureBroker, start_secure
from tests.polling import wait_until


@pytest.fixture(scope="module")
def tls_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path_factory.mktemp("tls-messages"), certs)
    yield sb
    sb.broker.kill()


def _self_signed(d: Path) -> tuple[Path, Path]:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "self.key", "-out",
                    "self.pem", "-days", "2", "-subj", "/CN=alice"],
                   cwd=d, check=True, capture_output=True)
    return d / "self.pem", d / "self.key"


def test_the_broker_says_why_it_refused_a_certificate(
        tls_broker: SecureBroker, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    ctx = ssl.create_default_context(cafile=str(tls_broker.certs.ca))
    ctx.load_cert_chain(str(cert), str(key))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)), \
            socket.create_connection(("127.0.0.1", tls_broker.ports["SSL"]), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "tls", {}))
        if not s.recv(4):
            raise ConnectionError("closed")

    def line() -> str | None:
        return next((x for x in tls_broker.broker.log().splitlines()
                     if "SSL handshake failed" in x), None)

    found = wait_until(line, 10, "the refused handshake logged")
    assert found is not None
    assert "(SSL handshake failed: CERTIFICATE_VERIFY_FAILED: self-signed certificate)" \
        in found, found
    assert " kafkactl.broker.security.channel: Failed authentication with 127.0.0.1:" \
        in found, found


def test_the_client_says_the_broker_was_not_trusted(tls_broker: SecureBroker) -> None:
    r = zygote.run(["topics", "list", "-b", tls_broker.bootstrap("SASL_SSL"),
                    "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=PLAIN",
                    "-X", "sasl.username=admin", "-X", f"sasl.password={PASSWORDS['admin']}"],
                   text=True, timeout=60)
    assert r.returncode != 0
    assert "certificate verify failed" in r.stderr, r.stderr
    assert "The broker's TLS certificate was not trusted" in r.stderr, r.stderr
    assert "-X ssl.ca.location=PATH" in r.stderr, r.stderr
    assert "kafkactl serve` running there" not in r.stderr, r.stderr
