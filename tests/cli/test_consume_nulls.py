"""`kafkactl consume -Z` (kcat's -Z: a null key or value printed as NULL) and
`--null-literal STR` (kafka-console-consumer's null.literal): tombstones and null keys were
printed as nothing, like an empty value. Against kcat -Z on the same topic, plain, -K and
-f; -J keeps JSON's null."""

from __future__ import annotations

import subprocess

import pytest

from tests import zygote
from tests.cli.kcat_read import KCAT_QUICK_EOF
from tests.conftest import BrokerProcess

TOPIC = "consume-nulls"


@pytest.fixture(scope="module")
def tombstones(_module_broker_process: BrokerProcess) -> str:
    """k:v lines, k: (a tombstone), a line without a key, an empty value: -K : -Z."""
    lines = b"".join(b"u%d:v%d\nu%d:\nnokey\n" % (i, i, i) for i in range(50))
    b = _module_broker_process.bootstrap
    r = zygote.run(["produce", "-b", b, "-t", TOPIC, "-K", ":", "-Z"], input=lines,
                   timeout=60)
    assert r.returncode == 0, r.stderr
    return b


def consume(bootstrap: str, *args: str) -> bytes:
    r = zygote.run(["consume", "-b", bootstrap, "-t", TOPIC, "-o", "earliest", "-e", "-q",
                    *args], timeout=60)
    assert r.returncode == 0, r.stderr
    return bytes(r.stdout)


def kcat(bootstrap: str, *args: str) -> bytes:
    r = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-e", "-q",
                        *KCAT_QUICK_EOF, *args], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("fmt", [None, "%k|%s\\n", "%o %k=%s %K %S\\n"])
def test_dash_z_prints_what_kcat_prints(tombstones: str, fmt: str | None) -> None:
    ours = consume(tombstones, "-Z", *(["-f", fmt] if fmt else []))
    theirs = kcat(tombstones, "-Z", *(["-f", fmt.replace("\\n", "\n")] if fmt else []))
    assert ours == theirs
    # 50 tombstones, and with a format 50 null keys too
    assert ours.count(b"NULL") == (100 if fmt else 50), ours[:200]


def test_key_separator_and_a_literal(tombstones: str) -> None:
    out = consume(tombstones, "-K", "=", "--null-literal", "<nil>").splitlines()
    assert out[:3] == [b"u0=v0", b"u0=<nil>", b"<nil>=nokey"]
    assert len(out) == 150
    assert consume(tombstones, "-K", "=").splitlines()[:3] == [b"u0=v0", b"u0=", b"=nokey"]


def test_json_keeps_json_null(tombstones: str) -> None:
    """-J prints JSON null; -Z changes nothing there (kcat takes -Z -J alike); a literal is
    refused (it could not be JSON)."""
    plain = consume(tombstones, "-J")
    assert b'"payload":null' in plain
    assert consume(tombstones, "-J", "-Z") == plain
    r = zygote.run(["consume", "-b", tombstones, "-t", TOPIC, "-J", "--null-literal", "x"],
                   timeout=60)
    assert r.returncode == 2
    assert b"-J prints a null key or value as JSON null" in r.stderr, r.stderr


def test_the_literal_is_taken_literally_also_as_a_property(tombstones: str) -> None:
    """As Kafka's null.literal (and produce's --null-marker): no escapes, so a tombstone
    never prints like a value holding a tab; -X null.literal=STR is the same option."""
    out = consume(tombstones, "-K", "=", "--null-literal", "\\t").splitlines()
    assert out[1] == b"u0=\\t"
    assert consume(tombstones, "-K", "=", "-X", "null.literal=<nil>").splitlines()[1] == \
        b"u0=<nil>"
    r = zygote.run(["consume", "-b", tombstones, "-t", TOPIC, "--null-literal", "a", "-X",
                    "null.literal=b"], timeout=60)
    assert r.returncode == 2 and b"disagree" in r.stderr, r.stderr
