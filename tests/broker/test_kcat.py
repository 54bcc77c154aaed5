"""kcat (librdkafka 2.0.2) against a live broker: metadata, produce, consume, every codec."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import BrokerProcess


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests here only use topics of their own: one broker for the module."""
    return module_broker

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")


def kcat(*args: str, input: bytes | None = None, timeout: float = 30) -> str:
    proc = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode()


def test_metadata_lists_broker_and_auto_created_topic(broker) -> None:
    kcat("-b", broker.bootstrap, "-P", "-t", "meta", input=b"x\n")
    out = kcat("-b", broker.bootstrap, "-L", "-t", "meta")
    assert f"broker 0 at {broker.bootstrap}" in out
    assert 'topic "meta" with 1 partitions' in out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_every_codec(broker, codec: str) -> None:
    topic = f"codec-{codec}"
    lines = [f"{codec}-value-{i}" for i in range(500)]
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-z", codec, "-K", ":",
         input="".join(f"k{i}:{v}\n" for i, v in enumerate(lines)).encode())
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-e", "-f", "%o|%k|%s\n")
    got = [line.split("|") for line in out.splitlines()]
    assert [int(o) for o, _, _ in got] == list(range(500))
    assert [k for _, k, _ in got] == [f"k{i}" for i in range(500)]
    assert [v for _, _, v in got] == lines


def test_consume_from_offset_and_end(broker) -> None:
    kcat("-b", broker.bootstrap, "-P", "-t", "offs", input=b"".join(
        f"m{i}\n".encode() for i in range(20)))
    out = kcat("-b", broker.bootstrap, "-C", "-t", "offs", "-o", "15", "-e", "-f", "%o:%s\n")
    assert out.splitlines() == [f"{i}:m{i}" for i in range(15, 20)]
    out = kcat("-b", broker.bootstrap, "-Q", "-t", "offs:0:-1")
    assert "offs [0] offset 20" in out
