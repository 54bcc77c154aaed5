"""`kafkactl produce` does not hold a record longer than any it can send: a 300 MB line is
refused with a read buffer's memory, not 300 MB (kcat stops at once too); with
--failed-file its bytes are streamed there as they are read, and the file has it whole,
byte for byte, with its delimiter. The records around it go on. At the limit the records
are refused or sent as before: one below, at and one above it, keyed, binary records with
a multi-byte delimiter split across reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkactl.client.delimited import CHUNK
from tests import zygote
from tests.conftest import BrokerProcess
from tests.mirror.helpers import create_topics, read_topic

BIG = 300 << 20  # the long line: 300 MiB
RSS_BOUND_KB = 150 << 10  # the produce process's peak RSS stays under 150 MB
LIMIT = 100_000  # -X max.request.size of the boundary tests: key and value <= 99,900

# runs `kafkactl produce` as its only child and writes the child's peak RSS (KB) to argv[1]
PEAK = ("import resource, subprocess, sys\n"
        "code = subprocess.call(sys.argv[2:])\n"
        "open(sys.argv[1], 'w').write(str(resource.getrusage("
        "resource.RUSAGE_CHILDREN).ru_maxrss))\n"
        "sys.exit(code)\n")


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker  # every test uses topics of its own


def _produce_big_line(broker: BrokerProcess, tmp_path: Path, topic: str,
                      *args: str) -> tuple[int, str, int]:
    """`first`, a BIG line of 'a', `last` piped into produce: exit code, stderr, peak RSS
    (KB) of the produce process."""
    rss = tmp_path / "rss"
    feed = (f"(printf 'first\\n'; head -c {BIG} /dev/zero | tr '\\0' a; "
            "printf '\\nlast\\n')")
    cmd = [sys.executable, "-c", PEAK, str(rss), sys.executable, "-m", "kafkactl",
           "produce", "-b", broker.bootstrap, "-t", topic, *args]
    r = subprocess.run(f"{feed} | {subprocess.list2cmdline(cmd)}", shell=True,
                       capture_output=True, timeout=300)
    return r.returncode, r.stderr.decode(), int(rss.read_text())


@pytest.mark.parametrize("keep", [False, True], ids=["skipped", "failed-file"])
def test_a_300_megabyte_line_is_streamed_not_held(broker: BrokerProcess, tmp_path: Path,
                                                  keep: bool) -> None:
    topic = f"long-line-{keep}"
    create_topics(broker.bootstrap, {topic: 1})
    failed = tmp_path / "failed"
    code, err, peak_kb = _produce_big_line(
        broker, tmp_path, topic, *(["--failed-file", str(failed)] if keep else []))
    assert code == 1, err
    assert ("error: 2 of 3 records acknowledged, 1 not: a record is "
            f"{BIG + 100} bytes when serialized (key and value {BIG}), larger than "
            "max.request.size (1048576)") in err, err
    assert peak_kb < RSS_BOUND_KB, f"peak RSS {peak_kb} KB for a {BIG >> 20} MiB line"
    assert [v for _k, v, _h, _t in read_topic(broker.bootstrap, topic)[0]] == \
        [b"first", b"last"]
    if keep:
        assert err.rstrip().endswith(f"; it is in {failed}"), err
        assert failed.stat().st_size == BIG + 1
        with open(failed, "rb") as f:
            while piece := f.read(1 << 20):
                assert piece.strip(b"a") in (b"", b"\n"), piece[:80]
        with open(failed, "rb") as f:
            f.seek(BIG)
            assert f.read() == b"\n"


def _produce(broker: BrokerProcess, topic: str, data: bytes, *args: str,
             ) -> tuple[int, str]:
    r = zygote.run(["produce", "-b", broker.bootstrap, "-t", topic, "-X",
                    f"max.request.size={LIMIT}", *args], input=data, timeout=120)
    return r.returncode, r.stderr.decode()


def _refusal(size: int) -> str:
    return (f"a record is {size + 100} bytes when serialized (key and value {size}), "
            f"larger than max.request.size ({LIMIT})")


# (the produce options, the delimiter, a record whose key and value take n bytes)
SHAPES = {
    "lines": ([], b"\n", lambda n, c: c * n),
    "keyed": (["-K", ":"], b"\n", lambda n, c: b"k:" + c * (n - 1)),
    "binary-multibyte": (["-D", "\\xff\\xfe"], b"\xff\xfe",
                         lambda n, c: (c + b"\x00\xff\n\xfe") * (n // 5) + c * (n % 5)),
}


@pytest.mark.parametrize("keep", [False, True], ids=["skipped", "failed-file"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_records_around_the_limit_and_far_past_it(broker: BrokerProcess, tmp_path: Path,
                                                  shape: str, keep: bool) -> None:
    """Sizes (of key and value) one below, at and one above the largest max.request.size
    takes, and 3 MB (streamed: longer than a read), among small records, from a file whose
    reads end inside the long records (a multi-byte delimiter split across two of them):
    the same records acknowledged and refused as the general path decides, the refused
    ones in the failed file byte for byte."""
    args, delim, make = SHAPES[shape]
    topic = f"around-{shape}-{keep}"
    create_topics(broker.bootstrap, {topic: 1})
    most = LIMIT - 100
    below, at, above = make(most - 1, b"b"), make(most, b"t"), make(most + 1, b"x")
    far = make(3 << 20, b"f")
    # the file: `head`, then `far` ending so that its delimiter straddles two reads
    head = [b"s1", below, above, b"s2"]
    end = len(delim.join(head)) + len(delim) + len(far)
    boundary = (end // CHUNK + 1) * CHUNK
    far += far[:boundary - 1 - end]  # (its delimiter begins a byte before `boundary`)
    records = [*head, far, at, b"s3", above, b"last"]
    data = delim.join(records) + delim
    assert data.index(far + delim) + len(far) == boundary - 1
    src = tmp_path / "in"
    src.write_bytes(data)
    failed = tmp_path / "failed"
    code, err = _produce(broker, topic, b"", "-f", str(src), *args,
                         *(["--failed-file", str(failed)] if keep else []))
    assert code == 1, err
    n = len(records)
    assert f"error: {n - 3} of {n} records acknowledged, 3 not: {_refusal(most + 1)}" \
        in err, err
    landed = [v if k is None else k + b":" + v
              for k, v, _h, _t in read_topic(broker.bootstrap, topic)[0]]
    assert landed == [r for r in records if r not in (above, far)]
    if keep:
        assert failed.read_bytes() == above + delim + far + delim + above + delim


def test_a_transaction_with_a_long_line_is_aborted(broker: BrokerProcess,
                                                   tmp_path: Path) -> None:
    """As a record too large: a transaction holding one cannot commit; the long line is not
    held meanwhile."""
    create_topics(broker.bootstrap, {"long-txn": 1})
    data = b"a\n" + b"L" * (3 << 20) + b"\nb\n"
    code, err = _produce(broker, "long-txn", data, "--transactional-id", "long-txn")
    assert code == 1, err
    assert "the open transaction (3 records) was aborted" in err, err
    assert _refusal(3 << 20) in err, err
