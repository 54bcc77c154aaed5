"""TLS and SASL with real clients: kcat and confluent-kafka over SASL_SSL with SCRAM-SHA-256,
SCRAM-SHA-512 and PLAIN; kafka-python and aiokafka over SASL_PLAINTEXT and SSL; mutual TLS;
wrong passwords refused with Kafka's error; a fetch over TLS (the copy path) returns the
same bytes as over PLAINTEXT."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.broker.security.conftest import PASSWORDS, SecureBroker

KCAT = shutil.which("kcat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")


def _kcat(sb: SecureBroker, listener: str, args: list[str], mechanism: str = "",
          user: str = "", password: str | None = None, stdin: str | None = None,
          client_cert: bool = False) -> subprocess.CompletedProcess[str]:
    assert KCAT is not None
    cmd = [KCAT, "-b", sb.bootstrap(listener), "-X", f"security.protocol={listener}"]
    if listener.endswith("SSL"):
        cmd += ["-X", f"ssl.ca.location={sb.certs.ca}"]
    if client_cert:
        cmd += ["-X", f"ssl.certificate.location={sb.certs.client_cert}",
                "-X", f"ssl.key.location={sb.certs.client_key}"]
    if mechanism:
        cmd += ["-X", f"sasl.mechanism={mechanism}", "-X", f"sasl.username={user}",
                "-X", f"sasl.password={PASSWORDS[user] if password is None else password}"]
    return subprocess.run(cmd + args, input=stdin, capture_output=True, text=True,
                          timeout=60)


@needs_kcat
@pytest.mark.parametrize("mechanism,user", [("SCRAM-SHA-256", "alice"),
                                            ("SCRAM-SHA-512", "alice"), ("PLAIN", "bob")])
def test_kcat_over_sasl_ssl(secure_broker: SecureBroker, mechanism: str, user: str) -> None:
    topic = f"kcat-{mechanism.lower()}"
    values = [f"{mechanism}-{i}" for i in range(50)]
    r = _kcat(secure_broker, "SASL_SSL", ["-P", "-t", topic], mechanism, user,
              stdin="\n".join(values) + "\n")
    assert r.returncode == 0, r.stderr
    r = _kcat(secure_broker, "SASL_SSL", ["-C", "-t", topic, "-e", "-q"], mechanism, user)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == values


@needs_kcat
@pytest.mark.parametrize("mechanism,user", [("SCRAM-SHA-256", "alice"), ("PLAIN", "bob"),
                                            ("SCRAM-SHA-512", "nobody")])
def test_wrong_password_is_refused_with_kafkas_error(secure_broker: SecureBroker,
                                                     mechanism: str, user: str) -> None:
    PASSWORDS.setdefault("nobody", "x")
    r = _kcat(secure_broker, "SASL_SSL", ["-L", "-m", "3"], mechanism, user,
              password="wrong-password")
    assert r.returncode != 0
    assert "Authentication failed" in r.stderr, r.stderr
    log = secure_broker.broker.log()
    assert "Failed authentication with 127.0.0.1:" in log
    assert "wrong-password" not in log


@needs_kcat
def test_mutual_tls_maps_the_certificate_to_a_principal(secure_broker: SecureBroker) -> None:
    values = [f"m{i}" for i in range(20)]
    r = _kcat(secure_broker, "SSL", ["-P", "-t", "mtls"], client_cert=True,
              stdin="\n".join(values) + "\n")
    assert r.returncode == 0, r.stderr
    r = _kcat(secure_broker, "SSL", ["-C", "-t", "mtls", "-e", "-q"], client_cert=True)
    assert r.stdout.splitlines() == values
    # without a client certificate the TLS handshake is refused (ssl.client.auth=required)
    r = _kcat(secure_broker, "SSL", ["-L", "-m", "3"])
    assert r.returncode != 0


def test_confluent_kafka_over_sasl_ssl_scram(secure_broker: SecureBroker) -> None:
    from confluent_kafka import Consumer, Producer

    conf = {"bootstrap.servers": secure_broker.bootstrap("SASL_SSL"),
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice", "sasl.password": PASSWORDS["alice"],
            "ssl.ca.location": str(secure_broker.certs.ca)}
    p = Producer(conf)
    for i in range(100):
        p.produce("ck-scram", f"v{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "ck-g", "auto.offset.reset": "earliest"})
    c.subscribe(["ck-scram"])
    got: list[str] = []
    for _ in range(200):
        if len(got) == 100:
            break
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value().decode())
    c.close()
    assert got == [f"v{i}" for i in range(100)]


def test_kafka_python_over_sasl_plaintext_and_ssl(secure_broker: SecureBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    sasl = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
            "sasl_plain_username": "alice", "sasl_plain_password": PASSWORDS["alice"]}
    p = KafkaProducer(bootstrap_servers=secure_broker.bootstrap("SASL_PLAINTEXT"), **sasl)
    for i in range(30):
        p.send("kp-sasl", f"k{i}".encode())
    p.flush(30)
    p.close()
    ssl_conf = {"security_protocol": "SSL", "ssl_cafile": str(secure_broker.certs.ca),
                "ssl_certfile": str(secure_broker.certs.client_cert),
                "ssl_keyfile": str(secure_broker.certs.client_key)}
    c = KafkaConsumer("kp-sasl", bootstrap_servers=secure_broker.bootstrap("SSL"),
                      auto_offset_reset="earliest", consumer_timeout_ms=5000, **ssl_conf)
    got = [m.value.decode() for m in c]
    c.close()
    assert got == [f"k{i}" for i in range(30)]


def test_aiokafka_over_sasl_plaintext_and_ssl(secure_broker: SecureBroker) -> None:
    import asyncio
    import ssl

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[str]:
        p = AIOKafkaProducer(bootstrap_servers=secure_broker.bootstrap("SASL_PLAINTEXT"),
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="bob", sasl_plain_password=PASSWORDS["bob"])
        await p.start()
        try:
            for i in range(20):
                await p.send_and_wait("aio-sec", f"a{i}".encode())
        finally:
            await p.stop()
        ctx = ssl.create_default_context(cafile=str(secure_broker.certs.ca))
        ctx.load_cert_chain(str(secure_broker.certs.client_cert),
                            str(secure_broker.certs.client_key))
        c = AIOKafkaConsumer("aio-sec", bootstrap_servers=secure_broker.bootstrap("SSL"),
                             security_protocol="SSL", ssl_context=ctx,
                             auto_offset_reset="earliest")
        await c.start()
        got: list[str] = []
        try:
            while len(got) < 20:
                batch = await c.getmany(timeout_ms=5000)
                if not batch:
                    break
                for msgs in batch.values():
                    got += [m.value.decode() for m in msgs]
        finally:
            await c.stop()
        return got

    assert asyncio.run(run()) == [f"a{i}" for i in range(20)]


@needs_kcat
def test_fetch_over_tls_returns_the_same_bytes(secure_broker: SecureBroker) -> None:
    """Big fetches over TLS take the copy path (no sendfile through TLS)."""
    values = [f"{i:06d}-" + "y" * 2000 for i in range(600)]
    r = _kcat(secure_broker, "SASL_SSL", ["-P", "-t", "bigtls"], "SCRAM-SHA-256", "alice",
              stdin="\n".join(values) + "\n")
    assert r.returncode == 0, r.stderr
    tls = _kcat(secure_broker, "SASL_SSL", ["-C", "-t", "bigtls", "-e", "-q"],
                "SCRAM-SHA-256", "alice")
    assert KCAT is not None
    plain = subprocess.run([KCAT, "-b", secure_broker.bootstrap("PLAINTEXT"), "-C", "-t",
                            "bigtls", "-e", "-q"], capture_output=True, text=True, timeout=60)
    assert tls.stdout.splitlines() == values == plain.stdout.splitlines()


def test_kafkactl_client_library_speaks_tls_and_sasl(secure_broker: SecureBroker) -> None:
    from kafkactl.client.producer import Producer
    from kafkactl.client.security import ClientSecurity

    for listener, props in (
            ("SASL_SSL", {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                          "sasl.password": PASSWORDS["alice"]}),
            ("SASL_PLAINTEXT", {"sasl.mechanism": "PLAIN", "sasl.username": "bob",
                                "sasl.password": PASSWORDS["bob"]}),
            ("SSL", {"ssl.certificate.location": str(secure_broker.certs.client_cert),
                     "ssl.key.location": str(secure_broker.certs.client_key)})):
        props = {"security.protocol": listener, "ssl.ca.location": str(secure_broker.certs.ca),
                 **props}
        with Producer.from_properties(props,
                                      bootstrap_servers=secure_broker.bootstrap(listener)) as p:
            p.send("lib-sec", value=listener.encode()).result(30)
        assert ClientSecurity.from_properties(props).protocol == listener
