"""Listeners and security keys the broker cannot honour are a start-up error naming the key
(one line, non-zero exit, nothing written), never a silent plaintext downgrade: a TLS
listener without a key, SASL without mechanisms or users, JKS stores, GSSAPI, custom
classes, security keys no listener uses. What it can honour (a listener name mapped to
PLAINTEXT, Kafka's stock protocol map, Kafka's ACL authorizers) starts. The security
listeners themselves are tested in tests/broker/security/."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkactl.protocol.api_keys import ApiKey
from tests import zygote
from tests.conftest import free_port as _free_port

from .wire import Wire


def _serve(data: Path, port: int, overrides: dict[str, str]) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "kafkactl", "serve", "--data-dir", str(data),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


SECRET = 'org.apache.kafka.common.security.plain.PlainLoginModule required password="s3cret";'

# (overrides with {port}, text the one error line must contain)
REFUSED = {
    "ssl_without_key": ({"listeners": "SSL://127.0.0.1:{port}"},
                        "listener SSL uses TLS but has no key: set ssl.keystore.location"),
    "sasl_ssl_without_key": ({"listeners": "SASL_SSL://127.0.0.1:{port}"},
                             "listener SASL_SSL uses TLS but has no key"),
    "sasl_plaintext_without_mechanisms": (
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}"},
        "listener SASL_PLAINTEXT uses SASL_PLAINTEXT but sasl.enabled.mechanisms is unset"),
    "second_listener_ssl_without_key": (
        {"listeners": "PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:0"},
        "listener SSL uses TLS but has no key"),
    "unmapped_name": ({"listeners": "FOO://127.0.0.1:{port}"},
                      "listeners=FOO://127.0.0.1:{port}: listener FOO has no security "
                      "protocol; map it in listener.security.protocol.map"),
    "name_mapped_to_ssl_without_key": ({"listeners": "INTERNAL://127.0.0.1:{port}",
                                        "listener.security.protocol.map": "INTERNAL:SSL"},
                                       "listener INTERNAL uses TLS but has no key"),
    "jks_keystore": ({"listeners": "SSL://127.0.0.1:{port}", "ssl.keystore.type": "JKS",
                      "ssl.keystore.location": "/etc/kafka/broker.jks"},
                     "ssl.keystore.type=JKS: only PEM stores are supported"),
    "gssapi": ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
                "sasl.enabled.mechanisms": "GSSAPI"},
               "sasl.enabled.mechanisms=GSSAPI: GSSAPI is not supported yet"),
    "plain_without_users": ({"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
                             "sasl.enabled.mechanisms": "PLAIN"},
                            "listener SASL_PLAINTEXT enables PLAIN but has no users"),
    "advertised_unknown_listener": ({"advertised.listeners": "SSL://localhost:{port}"},
                                    "advertised.listeners=SSL://localhost:{port}: listener "
                                    "SSL is not one of listeners"),
    "inter_broker_ssl": ({"security.inter.broker.protocol": "SSL"},
                         "security.inter.broker.protocol=SSL: no listener uses SSL"),
    "custom_authorizer": ({"authorizer.class.name": "com.example.MyAuthorizer"},
                          "authorizer.class.name=com.example.MyAuthorizer: only Kafka's ACL "
                          "authorizers are supported"),
    "callback_handler": ({"listener.name.sasl_plaintext.plain.sasl.server.callback.handler."
                          "class": "com.example.Handler"},
                         "custom classes are not supported"),
    "keystore": ({"ssl.keystore.location": "/etc/kafka/broker.jks"},
                 "ssl.keystore.location=(value not shown): no listener uses SSL"),
    "truststore": ({"ssl.truststore.location": "/etc/kafka/trust.jks"},
                   "ssl.truststore.location=(value not shown): no listener uses SSL"),
    "client_auth": ({"ssl.client.auth": "required"},
                    "ssl.client.auth=required: no listener uses SSL"),
    "sasl_mechanisms": ({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"},
                        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256: no listener uses SASL"),
    "jaas": ({"sasl.jaas.config": SECRET},
             "sasl.jaas.config=(value not shown): no listener uses SASL"),
    "listener_jaas": ({"listener.name.plaintext.plain.sasl.jaas.config": SECRET},
                      "listener.name.plaintext.plain.sasl.jaas.config=(value not shown): "
                      "listener PLAINTEXT does not use SASL"),
    "listener_keystore": ({"listener.name.plaintext.ssl.keystore.location": "/k.jks"},
                          "listener.name.plaintext.ssl.keystore.location=(value not shown)"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_cannot_be_honoured_is_a_start_up_error(tmp_path: Path, case: str) -> None:
    port = _free_port()
    overrides, expected = REFUSED[case]
    data = tmp_path / "data"
    argv = ["serve", "--data-dir", str(data), "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    for key, value in overrides.items():
        argv += ["--override", f"{key}={value.format(port=port)}"]
    try:
        done = zygote.run(argv, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the broker started anyway (a silent downgrade)")
    text = (done.stdout + done.stderr).decode(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    assert done.returncode != 0, text
    assert len(lines) == 1, text
    assert expected.format(port=port) in lines[0], text
    assert lines[0].startswith("error: "), text
    assert "s3cret" not in text
    assert not data.exists(), "nothing is written before the configuration is accepted"


def _wait_started(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0].decode()
        try:
            with Wire(f"127.0.0.1:{port}", timeout=10) as w:
                assert w.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the broker did not start")


ACCEPTED = {
    "name_mapped_to_plaintext": {"listeners": "FOO://127.0.0.1:{port}",
                                 "listener.security.protocol.map": "FOO:PLAINTEXT"},
    "kafka_stock_protocol_map": {
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"},
    "client_auth_none": {"ssl.client.auth": "none"},
    "tuning_key_only": {"ssl.enabled.protocols": "TLSv1.2,TLSv1.3"},
    "empty_authorizer": {"authorizer.class.name": ""},
    "acl_authorizer": {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"},
    "standard_authorizer": {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
    "all_interfaces_plaintext": {"listeners": "PLAINTEXT://0.0.0.0:{port}"},
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_can_be_honoured_starts(tmp_path: Path, case: str) -> None:
    port = _free_port()
    overrides = {k: v.format(port=port) for k, v in ACCEPTED[case].items()}
    proc = _serve(tmp_path / "data", port, overrides)
    try:
        _wait_started(proc, port)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out.decode()
    if case == "tuning_key_only":
        assert "ssl.enabled.protocols is ignored" in out.decode()
    exposed = f"binds 0.0.0.0:{port} with PLAINTEXT (no TLS, no authentication)"
    assert (exposed in out.decode()) == (case == "all_interfaces_plaintext"), out.decode()
