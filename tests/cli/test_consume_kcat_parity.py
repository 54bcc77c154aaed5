"""`kafkactl consume` as kcat users expect it: CRCs checked by default, kcat's -J layout and
-f tokens (an unknown one refused), -X with librdkafka's and Java's names, --timeout-ms."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkactl.record.memory_records import iter_batches
from tests.conftest import BrokerProcess
from tests.polling import wait_until

KCAT = shutil.which("kcat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")


def kafkactl(*args: str, input: bytes | None = None, timeout: float = 60
             ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], input=input,
                          capture_output=True, timeout=timeout)


def produce(b: BrokerProcess, topic: str, lines: list[str], *extra: str) -> None:
    r = kafkactl("produce", "-t", topic, "-q", "-b", b.bootstrap, *extra,
                 input="".join(f"{x}\n" for x in lines).encode())
    assert r.returncode == 0, r.stderr


def _segment(b: BrokerProcess, topic: str) -> Path:
    return b.data_dir / f"{topic}-0" / "00000000000000000000.log"


def test_a_damaged_batch_is_an_error_not_output(broker: BrokerProcess) -> None:
    """One byte flipped inside the second of three batches: every output mode prints the
    first batch, then fails naming the partition and the damaged batch's offset; nothing
    of the damaged batch or after it is printed. check.crcs=false reads it unchecked."""
    produce(broker, "rot", ["a1", "a2", "a3"])
    produce(broker, "rot", ["b1", "b2", "b3"])
    produce(broker, "rot", ["c1", "c2"])
    seg = _segment(broker, "rot")
    wait_until(lambda: len(list(iter_batches(seg.read_bytes()))) == 3, 10, "three batches")
    batches = list(iter_batches(seg.read_bytes()))
    second = batches[1]
    end = sum(b.size for b in batches[:2])  # the byte after the second batch
    data = bytearray(seg.read_bytes())
    assert data[end - 2:end - 1] == b"3"  # the last byte of "b3" (then its 0 headers)
    data[end - 2] ^= 0x01
    with open(seg, "r+b") as f:  # in place, under the running broker: bit rot
        f.seek(end - 2)
        f.write(bytes([data[end - 2]]))
    common = ["-t", "rot", "-b", broker.bootstrap, "-e"]
    modes: list[list[str]] = [["--from-beginning"], ["--from-beginning", "-J"],
                              ["--from-beginning", "-f", "%o %s\n"],
                              ["-G", "rot-group", "-X", "auto.offset.reset=earliest"]]
    for extra in modes:
        r = kafkactl("consume", *common, *extra)
        assert r.returncode == 1, (extra, r.stdout, r.stderr)
        err = r.stderr.decode()
        assert f"rot-0: the batch at offset {second.base_offset} fails its CRC check" in err, err
        assert _values(r.stdout, extra) == ["a1", "a2", "a3"], (extra, r.stdout)
    # the group committed what it printed: the first batch
    r = kafkactl("offsets", "show", "-G", "rot-group", "--json", "-b", broker.bootstrap)
    assert [row["current_offset"] for row in json.loads(r.stdout)] == [3]
    r = kafkactl("consume", *common, "--from-beginning", "-X", "check.crcs=false")
    assert r.returncode == 0, r.stderr
    # "b3" with its last byte's low bit flipped reads "b2"
    assert r.stdout.decode().split() == ["a1", "a2", "a3", "b1", "b2", "b2", "c1", "c2"]
    if KCAT is not None:  # kcat (librdkafka) with check.crcs refuses the same batch
        k = subprocess.run([KCAT, "-b", broker.bootstrap, "-C", "-t", "rot", "-e",
                            "-X", "check.crcs=true"], capture_output=True, timeout=60)
        assert b"b1" not in k.stdout and b"a3" in k.stdout


def _topic_with_headers(b: BrokerProcess) -> str:
    produce(b, "kj", ["k1:v1", "k2:v2"], "-K", ":", "-H", "h1=x", "-H", "h2=y")
    produce(b, "kj", ["plain", ""])
    return "kj"


@needs_kcat
def test_json_is_kcats(module_broker: BrokerProcess) -> None:
    """-J prints what kcat -J prints, byte for byte: the same keys in the same order, the
    broker the record came from, headers as kcat's flat [name, value, ...] list."""
    topic = _topic_with_headers(module_broker)
    ours = kafkactl("consume", "-t", topic, "--from-beginning", "-e", "-J", "-q",
                    "-b", module_broker.bootstrap)
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run([str(KCAT), "-b", module_broker.bootstrap, "-C", "-t", topic,
                             "-e", "-J", "-q"], capture_output=True, timeout=60)
    assert ours.stdout == theirs.stdout
    first = json.loads(ours.stdout.splitlines()[0])
    assert first["headers"] == ["h1", "x", "h2", "y"] and first["broker"] == 0


@needs_kcat
def test_format_tokens_are_kcats(module_broker: BrokerProcess) -> None:
    """%R is kcat's binary value length; a token kcat does not have is refused, as kcat
    refuses it, and so is a lone % at the end."""
    topic = _topic_with_headers(module_broker)
    fmt = "%R%s|%K:%k|%S|%t/%p/%o|%h\n"
    ours = kafkactl("consume", "-t", topic, "--from-beginning", "-e", "-q", "-f", fmt,
                    "-b", module_broker.bootstrap)
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run([str(KCAT), "-b", module_broker.bootstrap, "-C", "-t", topic,
                             "-e", "-q", "-f", fmt], capture_output=True, timeout=60)
    assert ours.stdout == theirs.stdout
    assert ours.stdout.startswith(b"\x00\x00\x00\x02v1|")
    for bad, what in (("%Z\n", "unsupported token '%Z'"), ("%s %", "lone '%'")):
        r = kafkactl("consume", "-t", topic, "-e", "-f", bad, "-b", module_broker.bootstrap)
        assert r.returncode == 2 and what in r.stderr.decode(), r.stderr
        assert b"Traceback" not in r.stderr


def test_librdkafka_and_java_property_names(module_broker: BrokerProcess) -> None:
    """-X takes the consumer settings by librdkafka's and Java's names; an unknown name is
    refused with the closest known one; group settings need a group."""
    produce(module_broker, "props", [str(i) for i in range(20)])
    b = module_broker.bootstrap
    r = kafkactl("consume", "-t", "props", "-e", "-q", "-b", b,
                 "-X", "fetch.wait.max.ms=50", "-X", "fetch.max.bytes=100000",
                 "-X", "max.partition.fetch.bytes=64", "-X", "check.crcs=true",
                 "-X", "auto.offset.reset=earliest", "-X", "isolation.level=read_committed",
                 "-X", "client.id=props-test", "-X", "socket.timeout.ms=20000")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(i).encode() for i in range(20)]
    # group.id as a property, and the group settings with it
    r = kafkactl("consume", "-t", "props", "-q", "-b", b, "-c", "5",
                 "-X", "group.id=props-g", "-X", "auto.offset.reset=earliest",
                 "-X", "enable.auto.commit=true", "-X", "session.timeout.ms=10000",
                 "-X", "heartbeat.interval.ms=1000", "-X", "max.poll.interval.ms=60000")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [b"0", b"1", b"2", b"3", b"4"]
    shown = kafkactl("offsets", "show", "-G", "props-g", "--json", "-b", b)
    assert [row["current_offset"] for row in json.loads(shown.stdout)] == [5]
    for args, msg in (
            (["-X", "fetch.wait.max.mss=5"], "closest is fetch.wait.max.ms"),
            (["-X", "session.timeout.ms=9000"], "give -G/--group too"),
            (["-X", "linger.ms=5"], "a producer property"),
            (["-G", "a", "-X", "group.id=b"], "name two groups")):
        r = kafkactl("consume", "-t", "props", "-e", "-b", b, *args)
        assert r.returncode == 2 and msg in r.stderr.decode(), (args, r.stderr)


def test_timeout_ms_ends_a_quiet_consumer(module_broker: BrokerProcess) -> None:
    """--timeout-ms: exit 0 once no record arrived for that long (kafka-console-consumer),
    after printing what there was."""
    produce(module_broker, "quiet", ["only"])
    r = kafkactl("consume", "-t", "quiet", "--from-beginning", "--timeout-ms", "1500",
                 "-b", module_broker.bootstrap, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"only\n" and b"Processed a total of 1 messages" in r.stderr


def _values(out: bytes, mode: list[str]) -> list[str]:
    lines = out.decode().splitlines()
    if "-J" in mode:
        return [json.loads(line)["payload"] for line in lines]
    if "-f" in mode:
        return [line.split(" ", 1)[1] for line in lines]
    return lines
