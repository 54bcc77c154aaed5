"""A broker whose inter-broker listener cannot complete a TLS handshake with itself (its own
certificate expired, or signed by a CA its truststore does not hold) refuses to start, with
one line saying why and exit status 1, as Kafka's SslFactory.configure does ("A client
SSLEngine created with the provided settings can't connect to a server SSLEngine created
with those settings."). Before, it started and then failed every inter-broker request.
Only the inter-broker listener is checked: the same keystore on another listener starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.security.certs import OPENSSL
from tests.broker.security.test_tls_reconfig_validation import Pki
from tests.conftest import BrokerProcess, free_port


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    pki = Pki(tmp_path_factory.mktemp("pki"))
    pki.ca("ca1")
    pki.ca("ca2")
    return pki


def _broker(tmp: Path, pki: Pki, keystore: Path, inter_broker: bool) -> BrokerProcess:
    data = tmp / "data"
    data.mkdir(parents=True)
    port, internal = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(pki.d / "ca1.pem"),
        "listener.name.internal.ssl.client.auth": "required"}
    if inter_broker:
        overrides["inter.broker.listener.name"] = "INTERNAL"
    return BrokerProcess(data, port, overrides)


@pytest.mark.parametrize(("name", "ca", "days", "why"), [
    ("expired", "ca1", -1, "certificate verify failed: certificate has expired"),
    ("other-ca", "ca2", 2, "certificate verify failed: unable to get local issuer"),
])
def test_an_inter_broker_listener_that_cannot_reach_itself_refuses_to_start(
        pki: Pki, tmp_path: Path, name: str, ca: str, days: int, why: str) -> None:
    keystore = pki.keystore(name, "broker", ca, days=days)
    b = _broker(tmp_path, pki, keystore, inter_broker=True)
    with pytest.raises(RuntimeError, match="broker exited with 1"):
        b.start()
    lines = [x for x in b.log().splitlines() if "inter-broker listener INTERNAL" in x]
    assert len(lines) == 1, b.log()
    assert "cannot complete a TLS handshake with itself" in lines[0], lines[0]
    assert why in lines[0], lines[0]
    assert "Traceback" not in b.log()


def test_the_same_keystore_on_another_listener_starts(pki: Pki, tmp_path: Path) -> None:
    b = _broker(tmp_path, pki, pki.keystore("expired2", "broker", "ca1", days=-1),
                inter_broker=False)
    b.start()
    try:
        assert b.proc is not None and b.proc.poll() is None
    finally:
        b.kill()
