"""`kafkactl consume` prints the same bytes with the compiled kernels as with
KAFKACTL_NO_EXTENSIONS=1 (pure Python, the reference), end to end through a real broker, in
every output mode: plain, -K, --print-offsets, -f with every token, -J; over batches of
every kind librdkafka writes (null, empty, binary and non-UTF-8 keys and values, headers,
compressed batches, a log-append-time topic) and from a start offset inside a batch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafkactl.record import _accel
from tests.conftest import BrokerProcess

pytestmark = pytest.mark.skipif(_accel.kernels is None, reason=f"pure Python: {_accel.REASON}")

MODES = [[], ["-K", "\\t"], ["-K", " => "], ["--print-offsets"], ["-J"],
         ["-f", "%t|%p|%o|%T|%k|%K|%s|%S|%h|%%\\n"], ["-f", "%R%s"], ["-f", "[%k]"]]


def _consume(b: BrokerProcess, topic: str, args: list[str], pure: bool,
             start: list[str]) -> bytes:
    env = {k: v for k, v in os.environ.items() if k != "KAFKACTL_NO_EXTENSIONS"}
    if pure:
        env["KAFKACTL_NO_EXTENSIONS"] = "1"
    r = subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-t", topic, "-b",
                        b.bootstrap, "-e", "-q", *start, *args], capture_output=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _fill(b: BrokerProcess, topic: str, codec: str) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20,
                  "compression.codec": codec})
    n = 0
    for i in range(600):
        key = [None, b"", b"k%d" % i, b"\xff\xfek", b'"quoted\\"\n'][i % 5]
        value = [None, b"", b"v%d" % i, "é ☃\t%s".encode(), b"\x00\x01\xc3",
                 b"x" * (i * 13 % 300)][i % 6]
        headers = [("h", b"1"), ("é", None), ("b", b"\xff")] if i % 9 == 0 else None
        p.produce(topic, value=value, key=key, headers=headers, partition=0)
        n += 1
        if i % 97 == 0:
            p.flush(30)  # batches of many sizes
    assert p.flush(30) == 0
    return n


def test_compiled_and_pure_print_the_same_bytes(broker: BrokerProcess) -> None:
    n = _fill(broker, "parity", "none") + _fill(broker, "parity", "zstd")
    for args in MODES:
        compiled = _consume(broker, "parity", args, False, ["--from-beginning"])
        assert compiled == _consume(broker, "parity", args, True, ["--from-beginning"]), args
        if args in ([], ["-J"]):
            assert compiled.count(b"\n") >= n  # every record printed (some hold one)
    for args in (["-J"], MODES[-3]):  # from inside a batch
        compiled = _consume(broker, "parity", args, False, ["-o", "101"])
        assert compiled == _consume(broker, "parity", args, True, ["-o", "101"]), args


def test_log_append_time(broker: BrokerProcess) -> None:
    r = subprocess.run([sys.executable, "-m", "kafkactl", "topics", "create", "-t", "lat",
                        "-b", broker.bootstrap, "--config", "message.timestamp.type=LogAppendTime"],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    _fill(broker, "lat", "lz4")
    for args in (["-J"], ["-f", "%o %T %s\\n"]):
        compiled = _consume(broker, "lat", args, False, ["--from-beginning"])
        assert compiled == _consume(broker, "lat", args, True, ["--from-beginning"])
        assert b"logappend" in compiled or args != ["-J"]
