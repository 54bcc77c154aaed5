"""Test certificates made with openssl (Debian's) at test time, never checked in: a CA, a
broker certificate for 127.0.0.1 / localhost, and client certificates (mutual TLS)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL = shutil.which("openssl")


@dataclass(frozen=True)
class Certs:
    ca: Path  # CA certificate (PEM): the truststore of both sides
    server_keystore: Path  # key + certificate chain in one PEM file
    server_key: Path
    server_cert: Path
    client_cert: Path  # CN=alice,OU=eng,O=kafkactl
    client_key: Path


def _run(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


# ECDSA P-256 keys: made in a millisecond, where an RSA-2048 key costs openssl 0.1-0.5 s of
# CPU (52 of them made 13 CPU-seconds of a whole test run); every client the tests drive
# (kcat/librdkafka, confluent-kafka, kafka-python, aiokafka, Python's ssl) takes them.
KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


def _leaf(d: Path, name: str, subject: str, ext: str | None) -> None:
    _run("req", *KEY, "-nodes", "-keyout", f"{name}.key", "-out",
         f"{name}.csr", "-subj", subject, cwd=d)
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-sha256"]
    if ext:
        (d / f"{name}.ext").write_text(ext)
        args += ["-extfile", f"{name}.ext"]
    _run(*args, cwd=d)


def make_certs(d: Path) -> Certs:
    d.mkdir(parents=True, exist_ok=True)
    _run("req", "-x509", *KEY, "-nodes", "-keyout", "ca.key", "-out",
         "ca.pem", "-days", "2", "-subj", "/CN=kafkactl test CA", cwd=d)
    _leaf(d, "broker", "/CN=localhost",
          "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _leaf(d, "alice", "/O=kafkactl/OU=eng/CN=alice", "extendedKeyUsage=clientAuth\n")
    keystore = d / "broker-keystore.pem"
    keystore.write_text((d / "broker.key").read_text() + (d / "broker.pem").read_text())
    return Certs(d / "ca.pem", keystore, d / "broker.key", d / "broker.pem",
                 d / "alice.pem", d / "alice.key")
