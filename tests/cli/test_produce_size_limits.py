"""`kafkactl produce` refuses a record too large to send on every path, as the producer's
send() does and as Java's producer raises RecordTooLargeException: one whose key and value
take more than max.request.size (-X max.request.size, librdkafka's message.max.bytes)
less 100 bytes, or more than buffer.memory less 100. The bulk paths (lines, keyed lines,
lines with headers, compressed, several partitions) count it failed and go on: the error
line names it, --failed-file keeps it, the others are acknowledged, exit 1. A 110 MB line
is refused at once; and a request larger than the broker's socket.request.max.bytes,
which closes the connection under it, is not sent again for delivery.timeout.ms."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests import zygote
from tests.conftest import BrokerProcess
from tests.mirror.helpers import create_topics, read_topic

LIMIT = 100_000  # -X max.request.size
SMALL = [b"s%d" % i for i in range(5)]


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker  # every test uses topics of its own


def _plain(size: int, fill: bytes) -> bytes:
    return fill * size


def _keyed(size: int, fill: bytes) -> bytes:
    return b"k:" + fill * (size - 1)  # key "k" and the value: `size` bytes


# path -> (produce's options, the line whose key and value take `size` bytes, partitions)
PATHS: dict[str, tuple[list[str], Callable[[int, bytes], bytes], int]] = {
    "lines": ([], _plain, 1),
    "keyed": (["-K", ":"], _keyed, 1),
    "headers": (["-H", "a=b"], _plain, 1),  # (headers do not count: send()'s size)
    "gzip": (["-z", "gzip"], _plain, 1),
    "keyed-3-partitions": (["-K", ":"], _keyed, 3),
    "roundrobin": (["--partitioner", "roundrobin"], _plain, 3),
}


def _input(make: Callable[[int, bytes], bytes]) -> tuple[list[bytes], bytes]:
    """Small lines around three big ones: one below the limit, one above, one at it (in
    that order: the refused one is not the last); and the refused one."""
    below, above, at = (make(LIMIT - 100 + d, fill) for d, fill in
                        ((-1, b"b"), (1, b"x"), (0, b"a")))
    return [*SMALL, below, above, at, *SMALL[::-1]], above


def _produce(broker: BrokerProcess, topic: str, lines: list[bytes], *args: str,
             timeout: float = 120) -> tuple[int, str]:
    r = zygote.run(["produce", "-b", broker.bootstrap, "-t", topic, *args],
                   input=b"\n".join(lines) + b"\n", timeout=timeout)
    return r.returncode, r.stderr.decode()


def _landed(broker: BrokerProcess, topic: str, keyed: bool) -> list[bytes]:
    """The records of `topic` as input lines (key:value), sorted (several partitions)."""
    out = []
    for rows in read_topic(broker.bootstrap, topic).values():
        for key, value, _headers, _ts in rows:
            assert value is not None
            out.append(value if not keyed or key is None else key + b":" + value)
    return sorted(out)




def _refusal(size: int) -> str:
    """The error of a record whose key and value take `size` bytes: the size compared
    with the limit is told (as Java's "when serialized"), the framing counted in."""
    return (f"a record is {size + 100} bytes when serialized (key and value {size}), "
            f"larger than max.request.size ({LIMIT})")


@pytest.mark.parametrize("batch_size", [None, "16384"])
@pytest.mark.parametrize("path", list(PATHS))
def test_a_record_over_max_request_size_is_refused_the_others_acknowledged(
        broker: BrokerProcess, path: str, batch_size: str | None) -> None:
    args, make, partitions = PATHS[path]
    topic = f"limit-{path}-{batch_size or 'default'}"
    create_topics(broker.bootstrap, {topic: partitions})
    lines, above = _input(make)
    more = ["--batch-size", batch_size] if batch_size else []
    code, err = _produce(broker, topic, lines, "-X", f"max.request.size={LIMIT}", *args,
                         *more)
    assert code == 1, err
    n = len(lines)
    assert (f"error: {n - 1} of {n} records acknowledged, 1 not: "
            f"{_refusal(LIMIT - 99)}") in err, err
    assert "Traceback" not in err
    want = sorted(line for line in lines if line != above)
    assert _landed(broker, topic, args[:1] == ["-K"]) == want


@pytest.mark.parametrize("path", ["lines", "keyed", "gzip", "keyed-3-partitions",
                                  "roundrobin"])
def test_refused_records_go_to_the_failed_file(broker: BrokerProcess, tmp_path: Path,
                                               path: str) -> None:
    args, make, partitions = PATHS[path]
    topic = f"limit-failed-{path}"
    create_topics(broker.bootstrap, {topic: partitions})
    lines, above = _input(make)
    second = make(LIMIT, b"y")  # a second one refused, far from the first
    lines = [*lines, second, b"last"]
    failed = tmp_path / "failed"
    code, err = _produce(broker, topic, lines, "-X", f"message.max.bytes={LIMIT}",
                         "--failed-file", str(failed), *args)
    assert code == 1, err
    n = len(lines)
    # (the first refused one is the error told; over partitions, either)
    first = _refusal(LIMIT - 99) if partitions == 1 else "a record is "
    assert (f"error: {n - 2} of {n} records acknowledged, 2 not: {first}") in err, err
    assert (_refusal(LIMIT - 99) in err) != (_refusal(LIMIT) in err), err
    assert err.rstrip().endswith(f"; all 2 are in {failed}"), err
    assert sorted(failed.read_bytes().split(b"\n")) == sorted([b"", above, second])
    want = sorted(line for line in lines if line not in (above, second))
    assert _landed(broker, topic, args[:1] == ["-K"]) == want


def test_headers_with_a_failed_file_go_record_by_record(broker: BrokerProcess,
                                                        tmp_path: Path) -> None:
    """-H with --failed-file takes the record-by-record path (send()): a refused record
    in the middle is counted failed and written to the file, and the records after it
    are sent (as the bulk paths; only --sync stops there)."""
    lines = [*SMALL, b"x" * (LIMIT - 99), b"b" * (LIMIT - 101), b"a" * (LIMIT - 100)]
    failed = tmp_path / "failed"
    code, err = _produce(broker, "limit-headers-failed", lines, "-X",
                         f"max.request.size={LIMIT}", "-H", "a=b", "--failed-file",
                         str(failed))
    assert code == 1, err
    assert _refusal(LIMIT - 99) in err, err
    assert failed.read_bytes() == b"x" * (LIMIT - 99) + b"\n"
    want = sorted(line for line in lines if line != b"x" * (LIMIT - 99))
    assert _landed(broker, "limit-headers-failed", False) == want


@pytest.mark.parametrize("path", ["lines", "keyed", "headers"])
def test_a_record_over_buffer_memory_is_refused(broker: BrokerProcess, path: str) -> None:
    """As Java's producer: a record larger than buffer.memory is never sent (here
    max.request.size would allow it)."""
    args = PATHS[path][0]
    topic = f"limit-memory-{path}"
    big = b"k:" + b"m" * 299_999 if args[:1] == ["-K"] else b"m" * 300_000
    lines = [*SMALL, big, b"last"]
    code, err = _produce(broker, topic, lines, "-X", "buffer.memory=200000",
                         "--batch-size", "16384", "-X", "max.request.size=1000000", *args)
    assert code == 1, err
    assert ("error: 6 of 7 records acknowledged, 1 not: a record is 300100 bytes when "
            "serialized (key and value 300000), larger than buffer.memory (200000)") in err, err
    assert _landed(broker, topic, args[:1] == ["-K"]) == sorted([*SMALL, b"last"])


def _huge_line(tmp_path: Path) -> Path:
    path = tmp_path / "huge"
    with open(path, "wb") as f:
        f.write(b"q" * 110_000_000 + b"\n")
    return path


def test_a_110_megabyte_line_is_refused_at_once(broker: BrokerProcess,
                                                tmp_path: Path) -> None:
    """Not sent to a broker that closes the connection of a request that large
    (socket.request.max.bytes) whatever the topic's max.message.bytes: refused, the
    producer's default max.request.size. (delivery.timeout.ms short: a producer that
    sent it again and again would end with another error in 10 s, not 120.)"""
    create_topics(broker.bootstrap, {"limit-110m": 1}, {"max.message.bytes": "100000000"})
    huge = _huge_line(tmp_path)
    r = zygote.run(["produce", "-b", broker.bootstrap, "-t", "limit-110m", "-f", str(huge),
                    "-X", "delivery.timeout.ms=10000", "-X", "request.timeout.ms=5000"],
                   timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert ("error: 0 of 1 records acknowledged, 1 not: a record is 110000100 bytes when "
            "serialized (key and value 110000000), larger than max.request.size (1048576)"
            ) in err, err


def test_a_request_over_socket_request_max_bytes_is_not_sent_again(
        broker: BrokerProcess, tmp_path: Path) -> None:
    """max.request.size raised past the broker's socket.request.max.bytes (104857600 by
    default): the broker closes the connection under the 110 MB request; the producer
    says why after that, instead of sending it again for delivery.timeout.ms (the
    buffer.memory of produce's defaults holds a record max.request.size allows)."""
    create_topics(broker.bootstrap, {"limit-socket": 1}, {"max.message.bytes": "200000000"})
    huge = _huge_line(tmp_path)
    r = zygote.run(["produce", "-b", broker.bootstrap, "-t", "limit-socket", "-f",
                    str(huge), "-X", "max.request.size=200000000",
                    "-X", "delivery.timeout.ms=20000", "-X", "request.timeout.ms=15000"],
                   timeout=120)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "error: 0 of 1 records acknowledged, 1 not: the broker closed the connection" \
        in err, err
    assert ("the request may exceed the broker's socket.request.max.bytes (104857600 by "
            "default); lower max.request.size (200000000) below it") in err, err
    # the broker is still up and takes the next records
    code, err = _produce(broker, "limit-socket", [b"after"])
    assert code == 0, err
