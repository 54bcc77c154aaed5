"""A header name that is not UTF-8 (kcat writes one with -H $'h\\xe9=v'; Kafka takes any
bytes) where kafkactl writes records again: the broker's log cleaner compacts past it and
keeps the survivor's bytes, the mirror copies it byte for byte, and the Spark source reads
it as Spark does (U+FFFD in its string column). Real brokers, real kcat, a real mirror."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.consumer import Consumer
from tests.mirror.helpers import FAST, create_topics, mirrored, start_mirror
from tests.polling import wait_until

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")


def kcat(*args: str, input: bytes | None = None) -> bytes:
    assert KCAT is not None
    r = subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def kcat_produce(bootstrap: str, topic: str, line: bytes, *headers: bytes) -> None:
    """One record `key:value` (one batch) with these `name=value` headers."""
    args = ["-b", bootstrap, "-P", "-t", topic, "-K", ":"]
    for h in headers:
        args += ["-H", h.decode("utf-8", "surrogateescape")]
    kcat(*args, input=line + b"\n")


def kcat_read(bootstrap: str, topic: str) -> bytes:
    return kcat("-b", bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%o %k=%s|%h\n")


def test_the_cleaner_compacts_past_a_header_name_that_is_not_utf8(
        broker_factory: Any) -> None:
    """Two versions of key k, each with the header name h\\xe9: the cleaner drops the
    older and keeps the newer's header bytes as they were. Before, it logged "skipping
    unparseable batch" for them and never compacted the key."""
    b = broker_factory(log_cleaner_backoff_ms="100")
    create_topics(b.bootstrap, {"hkc": 1}, {"cleanup.policy": "compact",
                                            "segment.bytes": "200",
                                            "min.cleanable.dirty.ratio": "0.01"})
    kcat_produce(b.bootstrap, "hkc", b"k:old", b"h\xe9=1")
    kcat_produce(b.bootstrap, "hkc", b"k:new", b"h\xe9=2", b"x=\xe9")
    for i in range(8):  # segments roll past 200 bytes: k's are cleanable
        kcat_produce(b.bootstrap, "hkc", b"pad%d:p" % i)

    def compacted() -> bytes | None:
        out = kcat_read(b.bootstrap, "hkc")
        return out if b"k=old" not in out else None

    out = wait_until(compacted, 60, f"k=old cleaned away:\n{b.log()}")
    assert out.startswith(b"1 k=new|h\xe9=2,x=\xe9\n2 pad0=p|\n"), out
    assert "unparseable" not in b.log()
    r = subprocess.run([sys.executable, "-m", "kafkactl", "consume", "-t", "hkc", "-b",
                        b.bootstrap, "-e", "-q", "-o", "earliest", "-f", "%o %k=%s|%h\\n"],
                       capture_output=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, out), r.stderr


def test_the_mirror_copies_a_header_name_byte_for_byte(broker_factory: Any,
                                                        tmp_path: Path) -> None:
    source, target = broker_factory(**FAST), broker_factory(**FAST)
    create_topics(source.bootstrap, {"hkm": 1})
    kcat_produce(source.bootstrap, "hkm", b"k:v", b"h\xe9=v", b"x=\xe9", b"\xff\xfe=")
    kcat_produce(source.bootstrap, "hkm", b"k2:v2", b"plain=1")
    m = start_mirror(tmp_path, source.bootstrap, target.bootstrap, "-t", "hkm")
    wait_until(lambda: mirrored(m, 2), 60, f"both records mirrored:\n{m.log()}")
    assert m.terminate() == 0, m.log()
    want = b"0 k=v|h\xe9=v,x=\xe9,\xff\xfe=\n1 k2=v2|plain=1\n"
    assert kcat_read(source.bootstrap, "hkm") == want
    assert kcat_read(target.bootstrap, "hkm") == want
    assert "Traceback" not in m.log() and "surrogates" not in m.log()


def test_the_spark_source_reads_a_header_name_as_spark_does(broker_factory: Any) -> None:
    """Spark's headers column has string keys (new String(bytes, UTF_8) in Java: U+FFFD
    for bytes that are not UTF-8); Arrow refused the surrogate-escaped name."""
    pytest.importorskip("pyarrow")
    from kafkactl.spark.partition_reader import to_arrow

    b = broker_factory()
    kcat_produce(b.bootstrap, "hks", b"k:v", b"h\xe9=v", b"ok=1")
    with Consumer("hks", bootstrap_servers=b.bootstrap, auto_offset_reset="earliest") as c:
        recs = wait_until(lambda: [r for rs in c.poll(200).values() for r in rs], 30,
                          "the record")
    assert [k for k, _v in recs[0].headers] == ["h\udce9", "ok"]
    batch = to_arrow("hks", 0, [0], [recs[0].timestamp], [0], [recs[0].key],
                     [recs[0].value], [recs[0].headers])
    assert batch.column("headers").to_pylist() == [[{"key": "h\ufffd", "value": b"v"},
                                                    {"key": "ok", "value": b"1"}]]
