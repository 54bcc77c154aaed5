"""A client certificate the broker refuses gets a TLS alert saying why, before the broker
closes the connection, as Kafka's SslTransportLayer.handshakeFailure flushes it: an expired
certificate "certificate expired", one of a CA the broker does not trust "unknown ca", none
where listener.name.ssl.ssl.client.auth=required "certificate required". Before, asyncio's
TLS closed the connection without writing the alert, and clients saw a bare EOF
("unexpected eof while reading"). Checked over TLS 1.2 and 1.3, with Python's ssl and
openssl s_client; a good certificate still works and the broker keeps serving."""

from __future__ import annotations

import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.broker.security.certs import KEY, OPENSSL, Certs
from tests.broker.security.conftest import SecureBroker, start_secure


@dataclass(frozen=True)
class ClientCerts:
    expired: tuple[Path, Path]  # signed by the broker's CA, expired yesterday
    other_ca: tuple[Path, Path]  # signed by a CA the broker does not trust


def _openssl(d: Path, *args: str) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], cwd=d, check=True, capture_output=True)


def _client(d: Path, name: str, ca: str, days: int) -> tuple[Path, Path]:
    _openssl(d, "req", *KEY, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={name}")
    (d / f"{name}.ext").write_text("extendedKeyUsage=clientAuth\n")
    _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey",
             f"{ca}.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", str(days),
             "-sha256", "-extfile", f"{name}.ext")
    return d / f"{name}.pem", d / f"{name}.key"


@pytest.fixture(scope="module")
def clients(certs: Certs) -> ClientCerts:
    d = certs.ca.parent
    _openssl(d, "req", "-x509", *KEY, "-nodes", "-keyout", "other-ca.key", "-out",
             "other-ca.pem", "-days", "2", "-subj", "/CN=another CA")
    return ClientCerts(expired=_client(d, "old", "ca", -1),
                       other_ca=_client(d, "mallory", "other-ca", 2))


@pytest.fixture(scope="module")
def tls_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[SecureBroker]:
    sb = start_secure(tmp_path_factory.mktemp("tls-alerts"), certs)
    yield sb
    sb.broker.kill()


def _request(sb: SecureBroker, cert: tuple[Path, Path] | None,
             version: ssl.TLSVersion) -> str:
    """"answered" when an ApiVersions request over TLS is answered, else the error."""
    ctx = ssl.create_default_context(cafile=str(sb.certs.ca))
    ctx.minimum_version = ctx.maximum_version = version
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with socket.create_connection(("127.0.0.1", sb.ports["SSL"]), timeout=30) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "tls", {}))
            return "answered" if len(s.recv(4)) == 4 else "EOF"
    except (ssl.SSLError, OSError) as e:
        return f"{type(e).__name__}: {e}"


TLS = [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]


@pytest.mark.parametrize("version", TLS, ids=["TLSv1.2", "TLSv1.3"])
def test_a_refused_certificate_gets_an_alert(tls_broker: SecureBroker, clients: ClientCerts,
                                             version: ssl.TLSVersion) -> None:
    sb = tls_broker
    error = _request(sb, clients.expired, version)
    assert "alert certificate expired" in error, error
    error = _request(sb, clients.other_ca, version)
    assert "alert unknown ca" in error, error
    error = _request(sb, None, version)
    # TLS 1.3 has an alert of its own for it; TLS 1.2 says "handshake failure"
    expected = ("alert certificate required" if version == ssl.TLSVersion.TLSv1_3
                else "alert handshake failure")
    assert expected in error, error
    # a good client still works, the broker keeps serving
    assert _request(sb, (sb.certs.client_cert, sb.certs.client_key), version) == "answered"
    assert sb.broker.proc is not None and sb.broker.proc.poll() is None


def test_openssl_s_client_reads_the_alert(tls_broker: SecureBroker,
                                          clients: ClientCerts) -> None:
    sb = tls_broker
    cert, key = clients.expired
    assert OPENSSL is not None
    r = subprocess.run([OPENSSL, "s_client", "-connect", f"127.0.0.1:{sb.ports['SSL']}",
                        "-CAfile", str(sb.certs.ca), "-cert", str(cert), "-key", str(key),
                        "-tls1_2"], input="", capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert "alert certificate expired" in out, out
