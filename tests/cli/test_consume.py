"""Records from kcat and confluent-kafka read back exactly by `kafkactl consume`."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest

from tests import zygote
from tests.conftest import BrokerProcess


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics of their own: one broker for the module."""
    return module_broker

KAFKACTL = [sys.executable, "-m", "kafkactl"]


def consume(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return zygote.run(["consume", "-b", bootstrap, "-e", "-q", *args], timeout=60)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_every_codec(broker, codec: str) -> None:
    topic = f"cf-{codec}"
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                  "enable.idempotence": True, "linger.ms": 5})
    sent = []
    for i in range(200):
        key = None if i % 7 == 0 else b"k%d" % i
        value = None if i % 11 == 0 else bytes(range(256))[i:] + b"\n\t%d" % i
        headers = [("h", b"%d" % i), ("bin", b"\xff\x00")] if i % 2 else None
        p.produce(topic, value=value, key=key, headers=headers, partition=0)
        sent.append((key, value, headers or []))
    assert p.flush(30) == 0
    r = consume(broker.bootstrap, "-t", topic, "--from-beginning", "--json")
    assert r.returncode == 0, r.stderr
    got = []
    for line in r.stdout.splitlines():
        d = json.loads(line)

        def dec(v, enc):
            return None if v is None else (base64.b64decode(v) if enc else v.encode())

        flat = d.get("headers", [])  # kcat's layout: [name, value, name, value, ...]
        hdrs = [(k, None if v is None else (v.encode() if k == "h" else None))
                for k, v in zip(flat[0::2], flat[1::2], strict=True)]
        got.append((dec(d["key"], d.get("key_encoding")),
                    dec(d["payload"], d.get("payload_encoding")), hdrs))
    assert [(k, v) for k, v, _ in got] == [(k, v) for k, v, _ in sent]
    assert [[h for h in hs if h[0] == "h"] for _, _, hs in got] == \
        [[h for h in hs if h[0] == "h"] for _, _, hs in sent]


def test_kcat_produce_format_tokens(broker) -> None:
    data = b"a:1\nb:2\n:3\n"
    subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "kc", "-K", ":", "-p", "0",
                    "-H", "x=y", "-z", "lz4"], input=data, check=True, timeout=60)
    r = consume(broker.bootstrap, "-t", "kc", "--offset", "earliest",
                "--format", "%t %p %o [%k] %s %K %S %h|%T\\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert [ln.split("|")[0] for ln in lines] == [
        "kc 0 0 [a] 1 1 1 x=y", "kc 0 1 [b] 2 1 1 x=y", "kc 0 2 [] 3 0 1 x=y"]
    assert all(int(ln.split("|")[1]) > 1_600_000_000_000 for ln in lines)


def test_binary_values_raw_and_offsets(broker) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce("bin", value=b"%02d" % i, partition=0)
    p.flush(30)
    r = consume(broker.bootstrap, "-t", "bin", "--offset", "-5")
    assert r.stdout == b"".join(b"%02d\n" % i for i in range(15, 20))
    r = consume(broker.bootstrap, "-t", "bin", "--offset", "17", "--print-offsets")
    assert r.stdout == b"17\t17\n18\t18\n19\t19\n"
    r = consume(broker.bootstrap, "-t", "bin", "--from-beginning", "--max-messages", "3")
    assert r.stdout == b"00\n01\n02\n"
    r = consume(broker.bootstrap, "-t", "bin", "--offset", "@0", "--key-separator", "=")
    assert r.stdout.splitlines()[0] == b"=00"


def test_closed_pipe_and_bad_input(broker) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for _ in range(50000):
        p.produce("big", value=b"x" * 100, partition=0)
    p.flush(60)
    proc = subprocess.Popen(KAFKACTL + ["consume", "-b", broker.bootstrap, "-t", "big",
                                        "--from-beginning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert b"Traceback" not in err and b"Exception" not in err
    assert proc.returncode == 0
    for args in (["-t", "big", "--offset", "yesterday-ish"],
                 ["-t", "nope-missing"], [], ["-t", "big", "--topic-pattern", "("]):
        r = consume(broker.bootstrap, *args)
        assert r.returncode != 0 and b"Traceback" not in r.stderr and b"error" in r.stderr, args


def test_key_separator_fast_path_prints_what_the_format_path_prints(broker) -> None:
    """`-K SEP` renders header-less batches without the per-record formatter; the bytes
    must be exactly what `-f '%kSEP%s\\n'` (the general path) prints, including null keys
    and values, a batch with headers in between, and a -c limit inside a batch."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50})
    for i in range(500):
        key = None if i % 7 == 0 else b"k%d" % i
        value = None if i % 11 == 0 else b"value %d" % i
        headers = [("h", b"x")] if 200 <= i < 210 else None
        if i in (200, 210):
            assert p.flush(30) == 0  # the records with headers get batches of their own
        p.produce("ksep", value=value, key=key, partition=0, headers=headers)
    assert p.flush(30) == 0
    for extra in (["--from-beginning"], ["--from-beginning", "-c", "333"],
                  ["-o", "123", "-c", "50"]):
        fast = consume(broker.bootstrap, "-t", "ksep", *extra, "-K", "=>")
        slow = consume(broker.bootstrap, "-t", "ksep", *extra, "-f", "%k=>%s\\n")
        assert fast.returncode == slow.returncode == 0, fast.stderr + slow.stderr
        assert fast.stdout == slow.stdout and fast.stdout


def test_topic_pattern_must_match_the_whole_name(broker) -> None:
    """Kafka's tools match --topic-pattern against the whole name (Java's matches()):
    '^gree' matches no topic 'greetings', and the error says so and what to write."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce("greetings", value=b"hello", partition=0)
    assert p.flush(30) == 0
    r = consume(broker.bootstrap, "--topic-pattern", "^gree", "--from-beginning")
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "must match the whole topic name" in err and "'^gree.*'" in err, err
    assert err.startswith("error: ")
    r = consume(broker.bootstrap, "--topic-pattern", "^gree.*", "--from-beginning")
    assert r.returncode == 0 and r.stdout == b"hello\n", r.stderr


def test_format_of_keyed_lines_of_many_lengths_is_kcats(broker) -> None:
    """`-f` over header-less batches (rendered a batch at a time) prints what kcat -f
    prints for the same format: keyed lines of 50-500 bytes from kcat -P -K, some without
    the key separator, read whole and from inside a batch."""
    lines = b"".join(b"10.0.%d.%d GET /%s\n" % (i % 256, i % 9, b"p" * (40 + i * 37 % 450))
                     if i % 10 else b"no-separator-%d\n" % i for i in range(3000))
    subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "fmtlines", "-K", " "],
                   input=lines, check=True, timeout=60)
    for fmt in ("%k\\t%s\\n", "%o %K %S %k|%s\\n"):
        for start in (["-o", "beginning"], ["-o", "1234"]):
            kcat = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", "fmtlines",
                                   "-e", "-q", *start, "-f", fmt], capture_output=True,
                                  check=True, timeout=60)
            ours = consume(broker.bootstrap, "-t", "fmtlines", "-o",
                           start[1].replace("beginning", "earliest"), "-f", fmt)
            assert ours.returncode == 0, ours.stderr
            assert ours.stdout == kcat.stdout and ours.stdout
