"""`kafkactl produce -Z` (kcat's: an empty value, and with -K an empty key, is null) and
`--null-marker STR` / `--property null.marker=STR` (Kafka's console producer's, KIP-810: a
key or value equal to STR is null): tombstones for compacted topics, through the real
command into one broker, read back with kcat (%S and %K are -1 for null). Inputs people
pipe: `seq`, `yes k:`, `yes ''`, log lines of many lengths, binary; without a null field
they land as they do without the options. tests/client/test_line_nulls.py checks the line
paths themselves, batch for batch, at their edges."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.partitioner import murmur2_partition
from tests import zygote
from tests.cli.kcat_read import KCAT_QUICK_EOF, Record, kcat_records
from tests.client.null_rows import null_rows
from tests.conftest import BrokerProcess

Row = tuple[bytes | None, bytes | None]

# kcat -C -e sees the end of a partition when a fetch comes back empty: without this, the
# broker holds that fetch for librdkafka's 500 ms fetch.wait.max.ms


def produce(bootstrap: str, topic: str, data: bytes, *args: str
            ) -> subprocess.CompletedProcess[bytes]:
    return zygote.run(["produce", "-b", bootstrap, "-t", topic, *args], input=data,
                      timeout=60)


def records(bootstrap: str, topic: str) -> list[Record]:
    return kcat_records(bootstrap, topic, timeout=60)


def rows(bootstrap: str, topic: str) -> list[Row]:
    return [(k, v) for _, k, v in records(bootstrap, topic)]


# any byte -> a printable one other than the key separator
PRINTABLE = bytes(33 + b % 94 if 33 + b % 94 != ord(":") else ord("=") for b in range(256))


def log_lines(n: int, seed: int) -> list[bytes]:
    """Keyed log lines from 0 to ~2 KB: upserts, tombstones (`key:`), the marker as a value
    or a key, empty keys, keyless and empty lines."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        body = rng.randbytes(rng.choice((0, 1, 63, 64, 200, 2000)) if rng.random() < 0.2
                             else rng.randrange(20, 300)).translate(PRINTABLE)
        out.append(rng.choice([
            b"user%d:%s" % (i % 40, body), b"user%d:%s" % (i % 40, body),
            b"user%d:%s" % (i % 40, body), b"user%d:" % (i % 40),
            b"user%d:NULL" % (i % 40), b":" + body, b"NULL:" + body, body, b"", b"NULL"]))
    return out


def binary(n: int, rng: random.Random) -> bytes:
    """Random bytes, one in ten a NUL (the delimiter), ':' or 'N' (the marker): records of
    any length, empty ones, empty keys and values, marker keys and values."""
    data = bytearray(rng.randbytes(n))
    for i in rng.sample(range(n), n // 10):
        data[i] = rng.choice(b"\x00\x00:N")
    return bytes(data) + b"\x00"


@pytest.mark.parametrize("options", [("-Z",), ("--null-marker", "NULL"),
                                     ("--property", "null.marker=NULL", "--null-empty")])
def test_keyed_log_lines(module_broker: BrokerProcess, options: tuple[str, ...]) -> None:
    lines = log_lines(4000, 1)
    topic = "log-" + "".join(o.strip("-").replace("=", "")[:6] for o in options)
    r = produce(module_broker.bootstrap, topic, b"\n".join(lines) + b"\n", "-K", ":",
                *options)
    assert r.returncode == 0, r.stderr
    null_empty = "-Z" in options or "--null-empty" in options
    marker = b"NULL" if any("NULL" in o for o in options) else None
    assert rows(module_broker.bootstrap, topic) == null_rows(lines, b":", null_empty, marker)


def test_kcat_lands_the_same_tombstones(module_broker: BrokerProcess) -> None:
    """kcat -P -K: -Z on lines that all have the separator (kcat skips an empty line, and
    its -Z works only on a line it split): the same records as kafkactl's."""
    lines = [line for line in log_lines(2000, 2) if b":" in line]
    data = b"\n".join(lines) + b"\n"
    r = produce(module_broker.bootstrap, "vs-kcat", data, "-K", ":", "-Z")
    assert r.returncode == 0, r.stderr
    k = subprocess.run(["kcat", "-P", "-b", module_broker.bootstrap, "-t", "vs-kcat-kcat",
                        "-K", ":", "-Z"], input=data, capture_output=True, timeout=60)
    assert k.returncode == 0, k.stderr
    want = null_rows(lines, b":", True, None)
    assert (None, None) in want and any(k is None and v for k, v in want)
    assert rows(module_broker.bootstrap, "vs-kcat") == want
    assert rows(module_broker.bootstrap, "vs-kcat-kcat") == want


@pytest.mark.parametrize("name", ["seq", "yes-empty", "yes-tombstone", "binary"])
def test_piped_inputs(module_broker: BrokerProcess, name: str) -> None:
    """`seq` (no null field: it lands as without the options), `yes ''`, `yes k:` (with
    Kafka's tutorials' empty marker, `null.marker=`), NUL-delimited binary."""
    make, args, null_empty, marker = {
        "seq": (lambda: b"".join(b"%d\n" % i for i in range(1, 20_001)), ("-Z",), True,
                None),  # more records than a batch of the bulk paths takes (MAX_DELTA)
        "yes-empty": (lambda: b"\n" * 3000, ("-Z",), True, None),
        "yes-tombstone": (lambda: b"k:\n" * 3000, ("-K", ":", "--null-marker", ""), False,
                          b""),
        "binary": (lambda: binary(200_000, random.Random(5)),
                   ("-0", "-K", ":", "-Z", "--null-marker", "N"), True, b"N"),
    }[name]
    data = make()
    r = produce(module_broker.bootstrap, name, data, *args)
    assert r.returncode == 0, r.stderr
    lines = data.split(b"\x00" if "-0" in args else b"\n")[:-1]
    want = null_rows(lines, b":" if "-K" in args else None, null_empty, marker)
    assert rows(module_broker.bootstrap, name) == want
    if name == "seq":
        assert want == [(None, line) for line in lines]
    else:
        assert any(v is None for _, v in want)


def test_a_key_s_value_then_its_tombstone_in_its_partition(module_broker: BrokerProcess
                                                           ) -> None:
    """Over three partitions: every keyed record where murmur2 puts its key, each key's
    records in input order, so its tombstone stays its last record (what compaction
    keeps); null keys anywhere."""
    with AdminClient(module_broker.bootstrap) as admin:
        admin.create_topics({"tomb3": (3, 1, {})})
    lines = log_lines(3000, 3)
    r = produce(module_broker.bootstrap, "tomb3", b"\n".join(lines) + b"\n", "-K", ":",
                "-Z", "--null-marker", "NULL")
    assert r.returncode == 0, r.stderr
    got = records(module_broker.bootstrap, "tomb3")
    want = null_rows(lines, b":", True, b"NULL")
    assert len(got) == len(want)
    for p in range(3):
        keyed = [(k, v) for k, v in want if k is not None and murmur2_partition(k, 3) == p]
        assert [(k, v) for q, k, v in got if q == p and k is not None] == keyed
    assert sorted(((k, v) for _, k, v in got), key=repr) == sorted(want, key=repr)


def test_transactions_and_failed_file_take_the_nulls_too(module_broker: BrokerProcess,
                                                         tmp_path: Path) -> None:
    data = b"a:1\na:\n:b\nc:NULL\n"
    want = [(b"a", b"1"), (b"a", None), (None, b"b"), (b"c", None)]
    r = produce(module_broker.bootstrap, "tomb-txn", data, "-K", ":", "-Z",
                "--null-marker", "NULL", "--transactional-id", "tomb-txn")
    assert r.returncode == 0, r.stderr
    assert rows(module_broker.bootstrap, "tomb-txn") == want
    r = produce(module_broker.bootstrap, "tomb-failed", data, "-K", ":", "-Z",
                "--null-marker", "NULL", "--failed-file", f"{tmp_path}/failed", "--sync")
    assert r.returncode == 0, r.stderr
    assert rows(module_broker.bootstrap, "tomb-failed") == want


def test_headers(module_broker: BrokerProcess) -> None:
    """-H values equal to the marker are null, as Kafka's console producer makes them; -Z
    leaves headers alone (kcat's leaves its -H headers alone)."""
    r = produce(module_broker.bootstrap, "tomb-headers", b"k:\nk:v\n", "-K", ":", "-Z",
                "--null-marker", "NULL", "-H", "a=NULL", "-H", "b=", "-H", "c")
    assert r.returncode == 0, r.stderr
    k = subprocess.run(["kcat", "-C", "-b", module_broker.bootstrap, "-t", "tomb-headers",
                        "-e", "-q", *KCAT_QUICK_EOF, "-f", "%k|%S|%h\n"],
                       capture_output=True, timeout=60)
    assert k.stdout.decode().splitlines() == ["k|-1|a=NULL,b=,c=NULL", "k|1|a=NULL,b=,c=NULL"]


@pytest.mark.parametrize("args, message", [
    (["--null-marker", "N", "-X", "null.marker=M"],
     "--null-marker N and -X null.marker=M disagree: give one"),
    (["-K", ":", "--null-marker", ":"], "the null marker and the key separator (-K)"),
    (["--null-marker", "N", "-H", "N=x"], "a header key cannot be the null marker"),
    # a marker holding the delimiter can never equal a record (it was taken, in silence)
    (["--null-marker", "a\nb"], "the null marker b'a\\nb' holds the record delimiter (-D) "
                                 "b'\\n': no record can be equal to it"),
    (["-D", ";", "--null-marker", ";"], "holds the record delimiter (-D) b';'"),
    (["--property", "parse.key=true"],
     "-X parse.key: a property of Kafka's console producer's line reader; kafkactl "
     "produce takes -K/--key-separator SEP"),
    (["-X", "headers.delimiter=|"], "kafkactl produce takes -H k=v"),
])
def test_usage_errors(args: list[str], message: str) -> None:
    """Refused before connecting (nothing listens on the port), exit 2, one line."""
    r = zygote.run(["produce", "-b", "127.0.0.1:9", "-t", "t", *args], input=b"x\n",
                   timeout=30)
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode()
    assert message in err and "closest" not in err and len(err.splitlines()) == 1, err


def test_help_names_the_options() -> None:
    r = zygote.run(["produce", "--help"], timeout=30, env={**os.environ, "COLUMNS": "200"})
    out = r.stdout.decode()
    assert "--null-empty" in out and "-Z" in out and "--null-marker" in out
    assert "null.marker" in out
