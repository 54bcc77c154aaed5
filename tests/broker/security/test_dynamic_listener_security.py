"""Dynamic broker configs of a TLS listener (KIP-226), with a real broker, openssl-made
certificates, `kafkactl configs alter` and TLS clients:

- a password config (`listener.name.ssl.ssl.key.password`) is refused without
  `password.encoder.secret` (INVALID_CONFIG, Kafka's "Password encoder secret not
  configured"); with it, it is stored encrypted, in a file of mode 0600, never logged, and
  decrypted at start (a changed secret: a start-up error naming the key and
  `password.encoder.old.secret`, which re-encodes it);
- the listener's SSL settings (keystore, truststore, client authentication) apply to the
  connections accepted after the change, and again at start (before, they were stored
  only); a keystore that cannot be read is refused and the listener keeps its context."""

from __future__ import annotations

import json
import socket
import ssl
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkactl.broker.password_encoder import is_encoded
from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.broker.security.certs import KEY, OPENSSL, Certs
from tests.conftest import BrokerProcess, free_port

KEY_PASSWORD = "topsecret-key-pw"
KEY_KEY = "listener.name.ssl.ssl.key.password"
KEYSTORE_KEY = "listener.name.ssl.ssl.keystore.location"
CONFIG_FILE = "dynamic-broker-configs.json"


@dataclass(frozen=True)
class SecondKeystore:
    """Another broker certificate (CN=broker-two) from the same CA, its key encrypted with
    KEY_PASSWORD."""

    path: Path


@pytest.fixture(scope="module")
def second_keystore(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> SecondKeystore:
    assert OPENSSL is not None
    d = tmp_path_factory.mktemp("second-keystore")

    def openssl(*args: str) -> None:
        subprocess.run([OPENSSL, *args], cwd=d, check=True, capture_output=True)

    openssl("req", *KEY, "-nodes", "-keyout", "two.key", "-out", "two.csr", "-subj",
            "/CN=broker-two")
    (d / "two.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                               "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "two.csr", "-CA", str(certs.ca), "-CAkey",
            str(certs.ca.parent / "ca.key"), "-CAcreateserial", "-out", "two.pem", "-days",
            "2", "-sha256", "-extfile", "two.ext")
    openssl("pkey", "-in", "two.key", "-aes256", "-passout", f"pass:{KEY_PASSWORD}", "-out",
            "two-encrypted.key")
    keystore = d / "two-keystore.pem"
    keystore.write_text((d / "two-encrypted.key").read_text() + (d / "two.pem").read_text())
    return SecondKeystore(keystore)


def start_tls_broker(tmp: Path, certs: Certs, **extra: str) -> tuple[BrokerProcess, int]:
    """A broker with a PLAINTEXT listener and an SSL one (no client certificates asked)."""
    data = tmp / "data"
    data.mkdir(parents=True, exist_ok=True)
    port, tls_port = free_port(), free_port()
    b = BrokerProcess(data, port, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}",
        "ssl.keystore.location": str(certs.server_keystore),
        "ssl.truststore.location": str(certs.ca), **extra})
    b.start()
    return b, tls_port


@pytest.fixture
def tls_broker(certs: Certs, tmp_path: Path) -> Iterator[tuple[BrokerProcess, int]]:
    b, tls_port = start_tls_broker(tmp_path, certs,
                                   **{"password.encoder.secret": "encoder-secret-1",
                                      "ssl.allow.dn.changes": "true"})
    yield b, tls_port
    b.kill()


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return zygote.run(list(args), text=True, timeout=60)


def alter(b: BrokerProcess, config: str) -> subprocess.CompletedProcess[str]:
    return kafkactl("configs", "alter", "-b", b.bootstrap, "--entity-type", "brokers",
                    "--entity-name", "0", "--add-config", config)


def client_context(certs: Certs, client_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if client_cert:
        ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return ctx


def api_versions(s: socket.socket | ssl.SSLSocket) -> bool:
    s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "dyn-tls", {}))
    return len(s.recv(4)) == 4


def server_cn(certs: Certs, port: int, client_cert: bool = False) -> str | None:
    """The CN of the certificate the listener shows a new connection, once an ApiVersions
    request is answered on it; None when the handshake or the request fails."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                client_context(certs, client_cert).wrap_socket(
                    raw, server_hostname="localhost") as s:
            if not api_versions(s):
                return None
            subject = dict(x[0] for x in s.getpeercert()["subject"])
            return str(subject["commonName"])
    except (ssl.SSLError, ConnectionError, OSError):
        return None


def stored(b: BrokerProcess) -> tuple[str, int, dict[str, str]]:
    path = b.data_dir / CONFIG_FILE
    return (path.read_text(), stat.S_IMODE(path.stat().st_mode),
            json.loads(path.read_text())["brokers"]["0"])


def test_a_password_config_is_refused_without_the_encoder_secret(
        certs: Certs, tmp_path: Path) -> None:
    b, _tls_port = start_tls_broker(tmp_path, certs)
    try:
        r = alter(b, f"{KEY_KEY}={KEY_PASSWORD}")
        assert r.returncode == 1, r.stdout
        assert "INVALID_CONFIG: Password encoder secret not configured" in r.stderr, r.stderr
        assert "password.encoder.secret" in r.stderr
        path = b.data_dir / CONFIG_FILE
        assert not path.exists() or KEY_PASSWORD not in path.read_text()
        assert KEY_PASSWORD not in b.log()
    finally:
        b.kill()


def test_a_keystore_with_its_password_applies_at_once_and_at_start_stored_encrypted(
        certs: Certs, second_keystore: SecondKeystore,
        tls_broker: tuple[BrokerProcess, int]) -> None:
    b, tls_port = tls_broker
    assert server_cn(certs, tls_port) == "localhost"
    r = alter(b, f"{KEYSTORE_KEY}={second_keystore.path},{KEY_KEY}={KEY_PASSWORD}")
    assert r.returncode == 0, r.stderr
    # the connections accepted from now on get the new certificate
    assert server_cn(certs, tls_port) == "broker-two"
    text, mode, layer = stored(b)
    assert mode == 0o600
    assert KEY_PASSWORD not in text
    assert is_encoded(layer[KEY_KEY]) and layer[KEYSTORE_KEY] == str(second_keystore.path)
    r = kafkactl("configs", "describe", "-b", b.bootstrap, "--entity-type", "brokers",
                 "--entity-name", "0")
    assert r.returncode == 0, r.stderr
    assert f"  {KEY_KEY}=null sensitive=true" in r.stdout, r.stdout

    # at start: the stored keystore, its key decrypted with the password decrypted
    b.restart()
    assert server_cn(certs, tls_port) == "broker-two"
    log = b.log()
    assert KEY_PASSWORD not in log
    assert f"'{KEY_KEY}': '[hidden]'" in log


def test_a_changed_encoder_secret_needs_the_old_one_to_re_encode(
        certs: Certs, second_keystore: SecondKeystore,
        tls_broker: tuple[BrokerProcess, int]) -> None:
    b, tls_port = tls_broker
    r = alter(b, f"{KEYSTORE_KEY}={second_keystore.path},{KEY_KEY}={KEY_PASSWORD}")
    assert r.returncode == 0, r.stderr
    first = stored(b)[2][KEY_KEY]
    b.stop()
    b.overrides["password.encoder.secret"] = "encoder-secret-2"
    with pytest.raises(RuntimeError) as refused:
        b.start()
    said = str(refused.value)
    assert f"cannot decrypt the dynamic broker config {KEY_KEY}" in said, said
    assert "password.encoder.old.secret" in said
    # with the old secret, the value is decrypted, and stored again with the new one
    b.overrides["password.encoder.old.secret"] = "encoder-secret-1"
    b.start()
    assert server_cn(certs, tls_port) == "broker-two"
    again = stored(b)[2][KEY_KEY]
    assert again != first and is_encoded(again)
    b.stop()
    del b.overrides["password.encoder.old.secret"]
    b.start()
    assert server_cn(certs, tls_port) == "broker-two"
    assert KEY_PASSWORD not in b.log()


def test_client_authentication_applies_to_new_connections_and_after_a_restart(
        certs: Certs, tls_broker: tuple[BrokerProcess, int]) -> None:
    b, tls_port = tls_broker
    with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as raw, \
            client_context(certs, False).wrap_socket(raw, server_hostname="localhost") as s:
        assert api_versions(s)
        r = alter(b, "listener.name.ssl.ssl.client.auth=required")
        assert r.returncode == 0, r.stderr
        assert server_cn(certs, tls_port) is None  # no client certificate: refused
        assert server_cn(certs, tls_port, client_cert=True) == "localhost"
        assert api_versions(s)  # the open connection keeps its settings
    b.restart()
    assert server_cn(certs, tls_port) is None
    assert server_cn(certs, tls_port, client_cert=True) == "localhost"


def test_an_unreadable_keystore_is_refused_and_the_listener_keeps_its_own(
        certs: Certs, tmp_path: Path, tls_broker: tuple[BrokerProcess, int]) -> None:
    b, tls_port = tls_broker
    missing = tmp_path / "no-such-keystore.pem"
    r = alter(b, f"{KEYSTORE_KEY}={missing}")
    assert r.returncode == 1, r.stdout
    assert "INVALID_CONFIG: Invalid dynamic configuration" in r.stderr, r.stderr
    assert "cannot load the key from ssl.keystore.location" in r.stderr, r.stderr
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("not a PEM file\n")
    r = alter(b, f"{KEYSTORE_KEY}={not_a_key}")
    assert r.returncode == 1 and "Invalid dynamic configuration" in r.stderr, r.stderr
    assert server_cn(certs, tls_port) == "localhost"
    r = kafkactl("configs", "describe", "-b", b.bootstrap, "--entity-type", "brokers",
                 "--entity-name", "0")
    assert KEYSTORE_KEY not in r.stdout
    b.restart()  # nothing bad was stored
    assert server_cn(certs, tls_port) == "localhost"


def test_a_clear_text_password_of_an_older_kafkactl_is_encrypted_at_start(
        certs: Certs, second_keystore: SecondKeystore, tmp_path: Path) -> None:
    """The file as kafkactl wrote it before (mode 0644, the password in clear): without a
    secret the broker warns and makes the file private; with one it encrypts it."""
    data = tmp_path / "data"
    data.mkdir()
    path = data / CONFIG_FILE
    path.write_text(json.dumps({"version": 1, "default": {}, "brokers": {"0": {
        KEYSTORE_KEY: str(second_keystore.path), KEY_KEY: KEY_PASSWORD}}}))
    path.chmod(0o644)
    b, tls_port = start_tls_broker(tmp_path, certs)
    try:
        assert server_cn(certs, tls_port) == "broker-two"  # applied at start
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        log = b.log()
        assert f"dynamic password configs {KEY_KEY} are stored in clear text" in log, log
        assert KEY_PASSWORD not in log
        b.stop()
        b.overrides["password.encoder.secret"] = "encoder-secret-1"
        b.start()
        assert server_cn(certs, tls_port) == "broker-two"
        text, mode, layer = stored(b)
        assert mode == 0o600 and KEY_PASSWORD not in text and is_encoded(layer[KEY_KEY])
    finally:
        b.kill()
