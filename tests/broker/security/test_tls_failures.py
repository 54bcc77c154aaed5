"""A TLS handshake the broker refuses (no client certificate where one is required, or one
from an untrusted CA) is a failed authentication, as in Kafka: logged ("Failed
authentication with <peer> (SSL handshake failed ...)") and counted in the listener's
failed-authentication-total. Before, asyncio made the handshake and nobody heard of its
failure: no line, and the metric stayed 0. A client with a good certificate still works."""

from __future__ import annotations

import socket
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactl.protocol import codec
from kafkactl.protocol.api_keys import ApiKey
from tests.broker.security.certs import Certs
from tests.broker.security.conftest import SecureBroker, start_secure
from tests.conftest import free_port
from tests.polling import wait_until


@pytest.fixture(scope="module")
def tls_broker(certs: Certs, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[SecureBroker, int]]:
    port = free_port()
    sb = start_secure(tmp_path_factory.mktemp("tls-failures"), certs,
                      **{"metrics.listen": f"127.0.0.1:{port}"})
    yield sb, port
    sb.broker.kill()


def _failed_total(port: int) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith("kafka_server_socket_server_metrics_failed_authentication_total") \
                and 'listener="SSL"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _handshake(sb: SecureBroker, cert: tuple[Path, Path] | None) -> bool:
    """Whether an ApiVersions request over TLS is answered."""
    ctx = ssl.create_default_context(cafile=str(sb.certs.ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with socket.create_connection(("127.0.0.1", sb.ports["SSL"]), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(codec.encode_request(ApiKey.API_VERSIONS, 0, 1, "tls", {}))
            return len(s.recv(4)) == 4
    except (ssl.SSLError, ConnectionError, OSError):
        return False


def test_a_refused_client_certificate_is_logged_and_counted(
        tls_broker: tuple[SecureBroker, int]) -> None:
    sb, port = tls_broker
    before = _failed_total(port)
    assert not _handshake(sb, None)  # listener.name.ssl.ssl.client.auth=required
    wait_until(lambda: _failed_total(port) >= before + 1, 10, "the failure counted")

    def logged() -> str | None:
        return next((x for x in sb.broker.log().splitlines() if "SSL handshake failed" in x),
                    None)

    line = wait_until(logged, 10, "the failure logged")
    assert "Failed authentication with 127.0.0.1:" in line and "listener SSL" in line, line
    assert _handshake(sb, (sb.certs.client_cert, sb.certs.client_key))
    assert _failed_total(port) == before + 1
