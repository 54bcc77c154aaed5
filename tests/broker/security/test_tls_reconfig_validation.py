"""Kafka's checks of a dynamic keystore or truststore change (SslFactory.
validateReconfiguration), with a real broker, openssl-made certificates of two CAs (one of
them expired) and `kafkactl configs alter`:

- a keystore whose certificate has another distinguished name, or drops a subject
  alternative name, is refused ("Keystore DistinguishedName does not match", "Keystore
  SubjectAltNames do not match") unless ssl.allow.dn.changes / ssl.allow.san.changes;
- on the inter-broker listener, a keystore the broker's truststore does not trust (expired,
  of another CA) or a truststore that does not trust the broker's own certificate is
  refused ("Validation of dynamic config update of SSLFactory failed"), while a CA rollover
  done in Kafka's order (truststore with both CAs, then the new certificate, then the new
  CA alone) is taken;
- a keystore or truststore file replaced in place is reloaded when an alter sends its
  location again (Kafka's reloadUpdatedFilesWithoutConfigChange), through the same checks.

The broker has a PLAINTEXT listener (for the CLI), INTERNAL (SSL, client certificates
required, the inter-broker listener) and EXTERNAL (SSL)."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.security.certs import KEY, OPENSSL
from tests.conftest import BrokerProcess, free_port

SAN = "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
EKU = "extendedKeyUsage=serverAuth,clientAuth\n"


class Pki:
    """Certificate authorities and keystores (key + certificate in one PEM file) made with
    openssl in `d`."""

    def __init__(self, d: Path) -> None:
        self.d = d
        d.mkdir(parents=True, exist_ok=True)

    def _openssl(self, *args: str) -> None:
        assert OPENSSL is not None
        subprocess.run([OPENSSL, *args], cwd=self.d, check=True, capture_output=True)

    def ca(self, name: str) -> Path:
        self._openssl("req", "-x509", *KEY, "-nodes", "-keyout", f"{name}.key", "-out",
                      f"{name}.pem", "-days", "2", "-subj", f"/CN=kafkactl test {name}")
        return self.d / f"{name}.pem"

    def keystore(self, name: str, cn: str, ca: str, *, days: int = 2,
                 ext: str = SAN + EKU) -> Path:
        """A keystore for `cn` signed by CA `ca`; days=-1: expired yesterday."""
        self._openssl("req", *KEY, "-nodes", "-keyout", f"{name}.key", "-out",
                      f"{name}.csr", "-subj", f"/CN={cn}")
        (self.d / f"{name}.ext").write_text(ext)
        self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey",
                      f"{ca}.key", "-CAcreateserial", "-out", f"{name}.pem", "-days",
                      str(days), "-sha256", "-extfile", f"{name}.ext")
        keystore = self.d / f"{name}-ks.pem"
        keystore.write_text((self.d / f"{name}.key").read_text() +
                            (self.d / f"{name}.pem").read_text())
        return keystore

    def bundle(self, name: str, *cas: Path) -> Path:
        path = self.d / f"{name}.pem"
        path.write_text("".join(ca.read_text() for ca in cas))
        return path


@dataclass(frozen=True)
class Certs:
    pki: Pki
    ca1: Path
    ca2: Path
    both: Path  # ca1 + ca2
    broker: Path  # CN=broker, ca1: the broker's keystore at start
    renewed: Path  # CN=broker, ca1, another key and serial
    other_ca: Path  # CN=broker, ca2
    other_dn: Path  # CN=broker-two, ca1
    no_san: Path  # CN=broker, ca1, without the SANs
    expired: Path  # CN=broker, ca1, expired


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    pki = Pki(tmp_path_factory.mktemp("pki"))
    ca1, ca2 = pki.ca("ca1"), pki.ca("ca2")
    return Certs(pki, ca1, ca2, pki.bundle("both", ca1, ca2),
                 broker=pki.keystore("broker", "broker", "ca1"),
                 renewed=pki.keystore("renewed", "broker", "ca1"),
                 other_ca=pki.keystore("other-ca", "broker", "ca2"),
                 other_dn=pki.keystore("other-dn", "broker-two", "ca1"),
                 no_san=pki.keystore("no-san", "broker", "ca1", ext=EKU),
                 expired=pki.keystore("expired", "broker", "ca1", days=-1))


@dataclass
class TlsBroker:
    broker: BrokerProcess
    internal: int  # port of INTERNAL
    external: int  # port of EXTERNAL


def start(tmp: Path, certs: Certs, **extra: str) -> TlsBroker:
    data = tmp / "data"
    data.mkdir(parents=True, exist_ok=True)
    port, internal, external = free_port(), free_port(), free_port()
    b = BrokerProcess(data, port, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal},"
                     f"EXTERNAL://127.0.0.1:{external}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,EXTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.location": str(certs.broker),
        "ssl.truststore.location": str(certs.ca1),
        "listener.name.internal.ssl.client.auth": "required", **extra})
    b.start()
    return TlsBroker(b, internal, external)


@pytest.fixture
def tls_broker(certs: Certs, tmp_path: Path) -> Iterator[TlsBroker]:
    tb = start(tmp_path, certs)
    yield tb
    tb.broker.kill()


def alter(tb: TlsBroker, config: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(["configs", "alter", "-b", tb.broker.bootstrap, "--entity-type",
                       "brokers", "--entity-name", "0", "--add-config", config],
                      text=True, timeout=60)


def described(tb: TlsBroker) -> str:
    r = zygote.run(["configs", "describe", "-b", tb.broker.bootstrap, "--entity-type",
                    "brokers", "--entity-name", "0"], text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return str(r.stdout)


def serial_of(keystore: Path) -> int:
    text = keystore.read_text()
    der = ssl.PEM_cert_to_DER_cert(text[text.index("-----BEGIN CERTIFICATE-----"):])
    return _serial(der)


def _serial(der: bytes) -> int:
    # Certificate ::= SEQUENCE { tbs SEQUENCE { [0] version, serialNumber INTEGER, ...
    from kafkactl.broker.security.x500 import _children, _read

    tbs = _children(_children(_read(der, 0, len(der)))[0])
    field = tbs[1] if tbs[0].tag == b"\xa0" else tbs[0]
    return int.from_bytes(field.content, "big")


def served(certs: Certs, port: int, client: Path | None = None) -> int | None:
    """The serial number of the certificate the listener on `port` shows a new
    connection, once it answers an ApiVersions request on it (trusting both CAs, with
    `client` as client certificate); None when the handshake or the request fails."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=str(certs.both))
    ctx.check_hostname = False
    if client is not None:
        ctx.load_cert_chain(str(client))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                ctx.wrap_socket(raw) as s:
            s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "tls-reconfig", {}))
            if len(s.recv(4)) != 4:
                return None
            der = s.getpeercert(binary_form=True)
            return None if der is None else _serial(der)
    except (ssl.SSLError, ConnectionError, OSError):
        return None


def test_a_keystore_of_another_name_or_fewer_sans_is_refused(
        certs: Certs, tls_broker: TlsBroker) -> None:
    tb = tls_broker
    key = "listener.name.external.ssl.keystore.location"
    r = alter(tb, f"{key}={certs.other_dn}")
    assert r.returncode == 1, r.stdout
    assert ("INVALID_CONFIG: Validation of dynamic config update of SSLFactory failed: "
            "Keystore DistinguishedName does not match:  existing={alias=kafka, DN=CN=broker}"
            ", new={alias=kafka, DN=CN=broker-two}") in r.stderr, r.stderr
    assert "ssl.allow.dn.changes=true" in r.stderr
    r = alter(tb, f"{key}={certs.no_san}")
    assert r.returncode == 1, r.stdout
    assert ("Keystore SubjectAltNames do not match:  existing={alias=kafka, SAN=[[2, "
            "localhost], [7, 127.0.0.1]]}, new={alias=kafka, SAN=[]}") in r.stderr, r.stderr
    # nothing stored, the listener keeps its certificate; one of the same name is taken
    assert key not in described(tb)
    assert served(certs, tb.external) == serial_of(certs.broker)
    r = alter(tb, f"{key}={certs.renewed}")
    assert r.returncode == 0, r.stderr
    assert served(certs, tb.external) == serial_of(certs.renewed)


def test_ssl_allow_dn_and_san_changes_allow_them(certs: Certs, tmp_path: Path) -> None:
    tb = start(tmp_path, certs, **{"listener.name.external.ssl.allow.dn.changes": "true",
                                   "ssl.allow.san.changes": "true"})
    try:
        r = alter(tb, f"listener.name.external.ssl.keystore.location={certs.other_dn}")
        assert r.returncode == 0, r.stderr
        assert served(certs, tb.external) == serial_of(certs.other_dn)
        r = alter(tb, f"listener.name.external.ssl.keystore.location={certs.no_san}")
        assert r.returncode == 0, r.stderr
        assert served(certs, tb.external) == serial_of(certs.no_san)
        # the DN rule of INTERNAL is not relaxed (listener-prefixed key of EXTERNAL)
        r = alter(tb, f"listener.name.internal.ssl.keystore.location={certs.other_dn}")
        assert r.returncode == 1 and "Keystore DistinguishedName does not match" in r.stderr
    finally:
        tb.broker.kill()


def test_the_inter_broker_listener_refuses_what_its_truststore_does_not_trust(
        certs: Certs, tls_broker: TlsBroker) -> None:
    tb = tls_broker
    key = "listener.name.internal.ssl.keystore.location"
    r = alter(tb, f"{key}={certs.expired}")
    assert r.returncode == 1, r.stdout
    assert "INVALID_CONFIG: Validation of dynamic config update of SSLFactory failed: " \
           in r.stderr, r.stderr
    assert "certificate has expired" in r.stderr and "listener INTERNAL" in r.stderr
    r = alter(tb, f"{key}={certs.other_ca}")
    assert r.returncode == 1, r.stdout
    assert "Validation of dynamic config update of SSLFactory failed: the new keystore's " \
           "certificate" in r.stderr and "not trusted by the current truststore" in r.stderr
    # a truststore that does not trust the broker's own certificate
    r = alter(tb, f"listener.name.internal.ssl.truststore.location={certs.ca2}")
    assert r.returncode == 1, r.stdout
    assert "the current keystore's certificate is not trusted by the new truststore" \
           in r.stderr, r.stderr
    said = described(tb)
    assert key not in said and "internal.ssl.truststore.location" not in said
    assert served(certs, tb.internal, certs.broker) == serial_of(certs.broker)


def test_a_ca_rollover_in_kafkas_order_is_taken(certs: Certs, tls_broker: TlsBroker) -> None:
    tb = tls_broker
    trust = "listener.name.internal.ssl.truststore.location"
    assert served(certs, tb.internal, certs.other_ca) is None  # ca2's client: not yet
    r = alter(tb, f"{trust}={certs.both}")
    assert r.returncode == 0, r.stderr
    assert served(certs, tb.internal, certs.other_ca) == serial_of(certs.broker)
    r = alter(tb, f"listener.name.internal.ssl.keystore.location={certs.other_ca}")
    assert r.returncode == 0, r.stderr
    assert served(certs, tb.internal, certs.broker) == serial_of(certs.other_ca)
    r = alter(tb, f"{trust}={certs.ca2}")
    assert r.returncode == 0, r.stderr
    assert served(certs, tb.internal, certs.broker) is None  # ca1's client: no longer
    assert served(certs, tb.internal, certs.other_ca) == serial_of(certs.other_ca)


def test_a_store_replaced_in_place_is_reloaded_when_its_location_is_sent_again(
        certs: Certs, tls_broker: TlsBroker, tmp_path: Path) -> None:
    tb = tls_broker
    live = tmp_path / "live-ks.pem"
    shutil.copyfile(certs.broker, live)
    key = f"listener.name.external.ssl.keystore.location={live}"
    assert alter(tb, key).returncode == 0
    shutil.copyfile(certs.renewed, live)  # a renewed certificate, same file
    assert served(certs, tb.external) == serial_of(certs.broker)  # not read yet
    r = alter(tb, key)
    assert r.returncode == 0, r.stderr
    assert served(certs, tb.external) == serial_of(certs.renewed)
    assert "new SSL settings (the file of ssl.keystore.location changed)" in tb.broker.log()

    # the reload goes through the checks: an expired certificate in the inter-broker
    # listener's keystore file is refused, the listener keeps the one it has
    internal = tmp_path / "internal-ks.pem"
    shutil.copyfile(certs.renewed, internal)
    key = f"listener.name.internal.ssl.keystore.location={internal}"
    assert alter(tb, key).returncode == 0
    shutil.copyfile(certs.expired, internal)
    r = alter(tb, key)
    assert r.returncode == 1 and "certificate has expired" in r.stderr, r.stderr
    assert served(certs, tb.internal, certs.broker) == serial_of(certs.renewed)
    shutil.copyfile(certs.renewed, internal)  # (else every alter would check it again)

    # a truststore file too: a client of ca2 is accepted once the file has both CAs
    trust = tmp_path / "trust.pem"
    shutil.copyfile(certs.ca1, trust)
    key = f"listener.name.internal.ssl.truststore.location={trust}"
    assert alter(tb, key).returncode == 0
    shutil.copyfile(certs.both, trust)
    assert served(certs, tb.internal, certs.other_ca) is None
    r = alter(tb, key)
    assert r.returncode == 0, r.stderr
    assert served(certs, tb.internal, certs.other_ca) == serial_of(certs.renewed)
