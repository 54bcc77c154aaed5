"""Security cost: kcat -P / -C of 100-byte records over SASL_SSL (SCRAM-SHA-256) versus
PLAINTEXT against one `kafkactl serve` with both listeners, in the same run (records/s
each way and the ratio; Kafka's users see TLS cost 20-50 % with the JVM), and the
authentication rate: new SCRAM-SHA-256 connections per second over SASL_PLAINTEXT
(ApiVersions + SaslHandshake + two SaslAuthenticate round trips each, kafkactl's client).

Certificates are made in a temporary directory with openssl. Never gates anything.

    python bench/security.py [--records 200000] [--seconds 5]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker_common import free_port, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.broker.security.certs import make_certs  # noqa: E402

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret";')


def _kcat(args: list[str], stdin: Path | None = None) -> float:
    t0 = time.monotonic()
    with open(stdin, "rb") if stdin else open("/dev/null", "rb") as f:
        subprocess.run(["kcat", *args], stdin=f, stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    opts = ap.parse_args()
    if shutil.which("kcat") is None or shutil.which("openssl") is None:
        sys.exit("kcat and openssl are needed")
    tmp = Path(tempfile.mkdtemp(prefix="kafkactl-bench-sec-"))
    certs = make_certs(tmp / "certs")
    ssl_port, sasl_port = free_port(), free_port()
    broker = start_broker(
        f"ssl.keystore.location={certs.server_keystore}",
        "sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN", f"sasl.jaas.config={JAAS}",
        data_dir=tmp / "data", extra_listeners=f"SASL_SSL://127.0.0.1:{ssl_port},"
                                               f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}")
    try:
        from kafkactl.client.kafka_client import KafkaClient
        from kafkactl.client.security_admin import alter_user

        plain = broker.bootstrap
        client = KafkaClient(plain)
        alter_user(client, "bench", password="bench-secret", mechanisms=["SCRAM-SHA-256"])
        client.close()
        lines = tmp / "records.txt"
        lines.write_bytes(b"".join(b"%099d\n" % i for i in range(opts.records)))
        sasl_ssl = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=SCRAM-SHA-256",
                    "-X", "sasl.username=bench", "-X", "sasl.password=bench-secret",
                    "-X", f"ssl.ca.location={certs.ca}"]
        rows = []
        for name, bootstrap, extra in (("PLAINTEXT", plain, []),
                                       ("SASL_SSL", f"127.0.0.1:{ssl_port}", sasl_ssl)):
            topic = f"bench-{name.lower()}"
            produce = _kcat(["-P", "-b", bootstrap, "-t", topic, "-X", "linger.ms=5",
                             *extra], lines)
            consume = _kcat(["-C", "-b", bootstrap, "-t", topic, "-e", "-q", *extra])
            rows.append((name, opts.records / produce, opts.records / consume))
        for name, p, c in rows:
            print(f"{name:10s} kcat -P {p:12,.0f} records/s   kcat -C {c:12,.0f} records/s")
        (_, pp, pc), (_, sp, sc) = rows
        print(f"SASL_SSL / PLAINTEXT: produce {sp / pp:.2f}, consume {sc / pc:.2f}")

        from kafkactl.client.connection import BrokerConnection
        from kafkactl.client.security import ClientSecurity

        sec = ClientSecurity.from_properties({
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "bench", "sasl.password": "bench-secret"})
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < opts.seconds:
            conn = BrokerConnection("127.0.0.1", sasl_port, security=sec)
            conn.connect()
            conn.close()
            n += 1
        elapsed = time.monotonic() - t0
        print(f"SCRAM-SHA-256 authentications: {n / elapsed:,.0f} connections/s "
              "(4096 iterations; the client's PBKDF2 is part of each)")
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
