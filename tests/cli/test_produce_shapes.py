"""What people really pipe into `kafkactl produce`, checked record for record against kcat.

Each shape goes in through the real CLI (a subprocess reading a pipe) and is read back with
kcat; the same input produced with `kcat -P` into a second topic must read back the same
(kafkactl differs from kcat -P in one documented way: an empty line is an empty record, as
Kafka's console producer sends it, where kcat -P skips it)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import zygote
from tests.cli.kcat_read import kcat_records as read_back
from tests.conftest import BrokerProcess

KAFKACTL = [sys.executable, "-m", "kafkactl"]


@pytest.fixture
def shared_broker(module_broker: BrokerProcess) -> BrokerProcess:
    """One broker for the module (num.partitions is 1 by default): every test uses topics
    of its own."""
    return module_broker


def produce(bootstrap: str, topic: str, data: bytes, *args: str,
            timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return zygote.run(["produce", "-b", bootstrap, "-t", topic, *args], input=data,
                      timeout=timeout)


def kcat_produce(bootstrap: str, topic: str, data: bytes, *args: str) -> None:
    r = subprocess.run(["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", *args],
                       input=data, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr


def kcat_records(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record (kcat_read.kcat_records without the partition)."""
    return [(k, v) for _p, k, v in read_back(bootstrap, topic)]


def values_of(records: list[tuple[bytes | None, bytes | None]]) -> list[bytes | None]:
    assert all(k is None for k, _ in records)
    return [v for _, v in records]


def split(data: bytes, delim: bytes = b"\n") -> list[bytes]:
    parts = data.split(delim)
    if parts and parts[-1] == b"":
        parts.pop()
    return parts


def access_log(n: int, seed: int) -> bytes:
    rnd = random.Random(seed)
    paths = ["/", "/index.html", "/api/v1/orders", "/static/app.js", "/login"]
    lines = []
    for i in range(n):
        path = rnd.choice(paths) + "?" + "q=" + "x" * rnd.randint(0, 420)
        line = (f'10.0.{i % 256}.{rnd.randint(1, 254)} - - [22/Nov/2026:16:{i % 60:02d}:00 +0000] '
                f'"GET {path} HTTP/1.1" {rnd.choice([200, 301, 404, 500])} {rnd.randint(0, 99999)}')
        lines.append(line.encode()[:rnd.randint(50, 500)])
    return b"\n".join(lines) + b"\n"


def roundtrip(broker: BrokerProcess, name: str, data: bytes, *args: str,
              delim: bytes = b"\n", kcat_args: tuple[str, ...] | None = ()
              ) -> list[bytes | None]:
    """Produce with kafkactl and (unless kcat_args is None) with kcat -P; both must read
    back as the input's records (kcat -P drops empty records); returns what kafkactl
    stored."""
    r = produce(broker.bootstrap, name, data, *args)
    assert r.returncode == 0, r.stderr
    want = split(data, delim)
    got = values_of(kcat_records(broker.bootstrap, name))
    assert got == want
    if kcat_args is None:
        return got
    kcat_produce(broker.bootstrap, name + "-kcat", data, *kcat_args)
    assert values_of(kcat_records(broker.bootstrap, name + "-kcat")) == [v for v in want if v]
    return got


def test_seq_many_lengths(shared_broker: BrokerProcess) -> None:
    data = b"".join(b"%d\n" % i for i in range(1, 200_001))  # 1..6 digits, > 16,383/batch
    got = roundtrip(shared_broker, "seq", data)
    assert len(got) == 200_000


def test_yes_one_short_length(shared_broker: BrokerProcess) -> None:
    got = roundtrip(shared_broker, "yes", b"hello\n" * 150_000)
    assert len(got) == 150_000


def test_access_log_lines_50_to_500_bytes(shared_broker: BrokerProcess) -> None:
    roundtrip(shared_broker, "access", access_log(20_000, seed=7))


def test_access_log_keyed(shared_broker: BrokerProcess) -> None:
    data = access_log(5_000, seed=8)
    r = produce(shared_broker.bootstrap, "keyed", data, "-K", " ")
    assert r.returncode == 0, r.stderr
    want = [tuple(line.split(b" ", 1)) for line in split(data)]
    assert [(k, v) for k, v in kcat_records(shared_broker.bootstrap, "keyed")] == want
    kcat_produce(shared_broker.bootstrap, "keyed-kcat", data, "-K", " ")
    assert kcat_records(shared_broker.bootstrap, "keyed-kcat") == want


def test_binary_null_delimited(shared_broker: BrokerProcess) -> None:
    rnd = random.Random(3)
    recs = [bytes(rnd.choice(range(1, 256)) for _ in range(rnd.randint(1, 700)))
            for _ in range(3000)]  # every byte but NUL, \n and \r included
    data = b"\x00".join(recs) + b"\x00"
    # (kcat -P cannot split on NUL: its -D is a C string; kcat reads the records back.)
    roundtrip(shared_broker, "binary", data, "-0", delim=b"\x00", kcat_args=None)


def test_one_line_bigger_than_batch_size_amid_small_ones(shared_broker: BrokerProcess) -> None:
    lines = [b"%d" % i for i in range(5000)]
    lines[2500] = b"B" * 60_000
    data = b"\n".join(lines) + b"\n"
    roundtrip(shared_broker, "bigline", data, "--batch-size", "16384")


def test_empty_line_is_an_empty_record(shared_broker: BrokerProcess) -> None:
    got = roundtrip(shared_broker, "empty", b"a\n\nb\n")
    assert got == [b"a", b"", b"b"]


def test_no_trailing_newline(shared_broker: BrokerProcess) -> None:
    assert roundtrip(shared_broker, "notrail", b"a\nb\nlast") == [b"a", b"b", b"last"]


def test_crlf_keeps_the_carriage_return(shared_broker: BrokerProcess) -> None:
    """Like kcat -P, the delimiter is \\n alone: a CRLF line keeps its \\r (use -D '\\r\\n'
    to split on CRLF)."""
    assert roundtrip(shared_broker, "crlf", b"a\r\nb\r\n") == [b"a\r", b"b\r"]
    r = produce(shared_broker.bootstrap, "crlf2", b"a\r\nb\r\n", "-D", "\\r\\n")
    assert r.returncode == 0, r.stderr
    assert values_of(kcat_records(shared_broker.bootstrap, "crlf2")) == [b"a", b"b"]


def test_ten_megabyte_line_is_refused_and_nothing_else_lost(shared_broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    big = b"x" * 10_000_000
    data = b"one\ntwo\n" + big + b"\nthree\n"
    failed = tmp_path / "failed"
    start = time.monotonic()
    r = produce(shared_broker.bootstrap, "huge", data, "--failed-file", str(failed))
    assert r.returncode != 0
    err = r.stderr.decode()
    assert "max.message.bytes" in err or "max.request.size" in err, err
    assert "Traceback" not in err
    assert values_of(kcat_records(shared_broker.bootstrap, "huge")) == [b"one", b"two", b"three"]
    assert failed.read_bytes() == big + b"\n"
    # Not a timing goal: before the fix the records behind the refused one waited out the
    # 120 s delivery.timeout.ms; anything near that means they are stuck again.
    assert time.monotonic() - start < 60


def test_a_mix_of_every_shape_in_one_stream(shared_broker: BrokerProcess) -> None:
    rnd = random.Random(11)
    pieces = [
        b"".join(b"%d\n" % i for i in range(1, 30_000)),
        b"yes\n" * 20_000,
        access_log(2_000, seed=12),
        b"\n",  # an empty line
        b"B" * 70_000 + b"\n",  # bigger than --batch-size
        bytes(rnd.choice(range(14, 256)) for _ in range(5_000)) + b"\n",  # binary
        b"crlf\r\n" * 100,
        b"no newline at the end",
    ]
    data = b"".join(pieces)
    r = produce(shared_broker.bootstrap, "mix", data, "--batch-size", "65536")
    assert r.returncode == 0, r.stderr
    assert values_of(kcat_records(shared_broker.bootstrap, "mix")) == split(data)


def test_tail_follow_delivers_each_line_while_stdin_stays_open(
        shared_broker: BrokerProcess) -> None:
    """`tail -f file | kafkactl produce`: every line is sent as it arrives, not when 4 MB
    are buffered or stdin closes. (Latency figures: bench/producer_low_rate.py.)"""
    proc = subprocess.Popen(KAFKACTL + ["produce", "-b", shared_broker.bootstrap, "-t",
                                        "follow"], stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None
    try:
        for i in range(5):
            proc.stdin.write(b"line %d\n" % i)
            proc.stdin.flush()
            deadline = time.monotonic() + 30
            while True:
                got = values_of(kcat_records(shared_broker.bootstrap, "follow")) \
                    if i or _topic_exists(shared_broker, "follow") else []
                if len(got) == i + 1:
                    break
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                assert time.monotonic() < deadline, f"line {i} not delivered: {got}"
                time.sleep(0.05)
            assert got == [b"line %d" % j for j in range(i + 1)]
    finally:
        proc.stdin.close()
        assert proc.wait(30) == 0


def _topic_exists(broker: BrokerProcess, topic: str) -> bool:
    r = subprocess.run(["kcat", "-L", "-b", broker.bootstrap, "-t", topic, "-J"],
                       capture_output=True, timeout=30)
    return b'"partitions":[{' in r.stdout.replace(b" ", b"")
