"""`kafkactl produce` -> read back exactly by kcat and kafka-python."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafkactl.client.delimited import CHUNK
from tests import zygote
from tests.conftest import BrokerProcess

KAFKACTL = [sys.executable, "-m", "kafkactl"]


@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    """Tests given `broker` here only use topics of their own: one broker for the module
    (those that need broker configs or kill it use broker_factory)."""
    return module_broker


def run(args: list[str], stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess:
    return zygote.run(args, input=stdin, timeout=timeout)


def kcat_read(bootstrap: str, topic: str, fmt: str) -> bytes:
    out = subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-e", "-q", "-f", fmt],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_lines_read_by_kcat(broker, codec: str) -> None:
    topic = f"p-{codec}"
    lines = [b"line %d \xff\x00 binary" % i for i in range(300)]
    r = run(["produce", "-b", broker.bootstrap, "-t", topic, "-z", codec, "-p", "0"],
            b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    assert b"300 of 300 records acknowledged" in r.stderr
    assert kcat_read(broker.bootstrap, topic, "%s\n").split(b"\n")[:-1] == lines


def test_keys_headers_delimiters_read_by_kafka_python(broker, tmp_path: Path) -> None:
    from kafka import KafkaConsumer, TopicPartition

    src = tmp_path / "in"
    src.write_bytes(b"k1|v1\x00k2|v2\x00nokey\x00|emptykey\x00")
    r = run(["produce", "-b", broker.bootstrap, "-t", "kh", "--file", str(src), "-0",
             "--key-separator", "|", "-H", "a=1", "-H", "nul", "--acks", "1", "-q"])
    assert r.returncode == 0, r.stderr
    assert r.stderr == b""
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=5000)
    tp = TopicPartition("kh", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = []
    for m in c:
        got.append((m.key, m.value, m.headers))
        if len(got) == 4:
            break
    c.close()
    hdrs = [("a", b"1"), ("nul", None)]
    assert got == [(b"k1", b"v1", hdrs), (b"k2", b"v2", hdrs), (None, b"nokey", hdrs),
                   (b"", b"emptykey", hdrs)]


@pytest.mark.parametrize("how", [["--partitioner", "roundrobin"],
                                 ["--partitioner", "crc32", "-K", ":"], ["-K", ":"]])
def test_headers_on_lines_spread_over_partitions(broker, how: list[str]) -> None:
    """-H with the records spread over partitions: the per-record path (roundrobin, crc32)
    and the buffers of murmur2_scatter (the default) keep every record's key and headers."""
    topic = "hs-" + "-".join(a.strip("-:") for a in how if a.strip("-:"))
    r = run(["topics", "create", "-b", broker.bootstrap, "-t", topic, "--partitions", "3"])
    assert r.returncode == 0, r.stderr
    lines = [b"k%d:v%d" % (i, i) for i in range(60)] + [b"nosep"]
    r = run(["produce", "-b", broker.bootstrap, "-t", topic, *how, "-H", "h=1", "-q"],
            b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    got = sorted(kcat_read(broker.bootstrap, topic, "%k|%s|%h\n").splitlines())
    keyed = "-K" in how
    want = sorted((b"%s|%s|h=1" % tuple(line.partition(b":")[::2]) if keyed and b":" in line
                   else b"|%s|h=1" % line) for line in lines)
    assert got == want


@pytest.mark.parametrize("extra", [[], ["--failed-file", "{tmp}/failed"]])
def test_seq_spread_by_roundrobin_and_random(broker, tmp_path: Path, extra: list[str]) -> None:
    """`seq | produce --partitioner roundrobin` (grouped per partition, not record by record):
    line i in partition i % 3, in order; random: every line once, in order per partition.
    Past the encoder tables' 16,383 records, and with --failed-file's kept entries."""
    lines = [b"%d" % i for i in range(40000)]
    for name in ("roundrobin", "random"):
        topic = f"spread-{name}-{len(extra)}"
        r = run(["topics", "create", "-b", broker.bootstrap, "-t", topic, "--partitions", "3"])
        assert r.returncode == 0, r.stderr
        r = run(["produce", "-b", broker.bootstrap, "-t", topic, "--partitioner", name, "-q",
                 *[a.format(tmp=tmp_path) for a in extra]], b"\n".join(lines) + b"\n")
        assert r.returncode == 0, r.stderr
        got: dict[int, list[int]] = {}
        for row in kcat_read(broker.bootstrap, topic, "%p %s\n").splitlines():
            p, v = row.split()
            got.setdefault(int(p), []).append(int(v))
        if name == "roundrobin":
            assert got == {p: list(range(p, 40000, 3)) for p in range(3)}
        else:
            assert set(got) == {0, 1, 2} and all(vs == sorted(vs) for vs in got.values())
            assert sorted(v for vs in got.values() for v in vs) == list(range(40000))


def test_sync_and_custom_delimiter(broker) -> None:
    r = run(["produce", "-b", broker.bootstrap, "-t", "s", "--sync", "-D", ";", "-q"],
            b"a;b;c")
    assert r.returncode == 0, r.stderr
    assert kcat_read(broker.bootstrap, "s", "%s\n") == b"a\nb\nc\n"


def test_failure_is_reported_with_count_and_failed_file(tmp_path: Path) -> None:
    failed = tmp_path / "failed"
    r = run(["produce", "-b", "127.0.0.1:1", "-t", "x", "--failed-file", str(failed),
             "-X", "max.block.ms=2000"], b"a\nb\n")
    assert r.returncode != 0
    assert b"Traceback" not in r.stderr
    assert b"no broker answered" in r.stderr or b"not acknowledged" in r.stderr


def test_bad_options_are_clear_errors(broker) -> None:
    for args in (["--acks", "2"], ["-z", "brotli"], ["-X", "nonsense"],
                 ["-X", "no.such.prop=1"], ["--partitioner", "nosuchmod:fn"],
                 ["--partitioner", "os:getcwd"], ["-X", "partitioner=os:getenv"],
                 ["-K", ""], ["-D", ""], ["-D", "\\x"]):
        r = run(["produce", "-b", broker.bootstrap, "-t", "x", *args], b"a\n")
        assert r.returncode == 2, (args, r.stderr)
        assert b"Traceback" not in r.stderr and b"error:" in r.stderr
        assert b"bug in kafkactl" not in r.stderr, (args, r.stderr)


def test_a_partitioner_that_cannot_take_the_arguments_is_a_usage_error(broker) -> None:
    """A module:function whose signature does not take (topic, key, num_partitions) is
    refused before anything is read, naming the signature expected; one that fails when
    called is named as the cause (not reported as a bug in kafkactl)."""
    r = run(["produce", "-b", broker.bootstrap, "-t", "ptn-sig", "--partitioner", "os:getcwd"],
            b"a\n")
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode()
    assert err.startswith("error: partitioner os:getcwd: getcwd() does not take a "
                          "partitioner's arguments: it must be function(topic: str, "
                          "key: bytes | None, num_partitions: int) -> int"), err
    assert err.count("\n") == 1, err
    r = run(["produce", "-b", broker.bootstrap, "-t", "ptn-sig", "--partitioner",
             "builtins:max"], b"a\n")  # max("ptn-sig", None, 1): TypeError
    assert r.returncode == 1, r.stderr
    assert b"partitioner builtins:max failed: TypeError" in r.stderr, r.stderr
    assert b"bug in kafkactl" not in r.stderr and b"Traceback" not in r.stderr


def test_an_empty_key_separator_is_refused_before_reading(broker) -> None:
    r = run(["produce", "-b", broker.bootstrap, "-t", "ksep-empty", "-K", ""], b"a:1\n")
    assert r.returncode == 2, r.stderr
    assert r.stderr == b"error: the key separator (-K/--key-separator) must not be empty\n"


def test_missing_partition_reports_unacknowledged(broker) -> None:
    r = run(["produce", "-b", broker.bootstrap, "-t", "onep", "-p", "0", "-q"], b"a\n")
    assert r.returncode == 0
    r = run(["produce", "-b", broker.bootstrap, "-t", "onep", "-p", "7"], b"a\nb\n")
    assert r.returncode == 1
    assert b"partition 7 does not exist" in r.stderr and b"Traceback" not in r.stderr


@pytest.mark.parametrize("partitions", [1, 3])
def test_keyed_lines_land_where_the_java_client_would_put_them(broker, partitions: int) -> None:
    """`-K` without headers takes the bulk keyed path: every key must go to
    murmur2(key) % partitions (kafka-python's implementation of the Java formula), null and
    empty keys stay null/empty, and per-partition order is the input order."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.partitioner.default import murmur2

    topic = f"keyed{partitions}"
    r = run(["topics", "create", "-b", broker.bootstrap, "-t", topic,
             "--partitions", str(partitions)])
    assert r.returncode == 0, r.stderr
    lines = [b"user%d:event %d" % (i % 17, i) for i in range(3000)]
    lines[5] = b"no separator here"
    lines[9] = b":empty key"
    lines[11] = b"big:" + b"v" * 70_000  # past the encoder's tables: the general path
    r = run(["produce", "-b", broker.bootstrap, "-t", topic, "-K", ":", "--batch-size",
             "16384", "-q"], b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=5000, max_partition_fetch_bytes=1 << 20)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got: dict[int, list[tuple[bytes | None, bytes]]] = {p: [] for p in range(partitions)}
    for n, m in enumerate(c, 1):
        got[m.partition].append((m.key, m.value))
        if n == len(lines):
            break
    c.close()
    expected: dict[int, list[tuple[bytes | None, bytes]]] = {p: [] for p in range(partitions)}
    null_key_partitions = set()
    for line in lines:
        k, sep, v = line.partition(b":")
        key, value = (k, v) if sep else (None, line)
        if key is None:
            null_key_partitions.update(p for p, recs in got.items() if (None, line) in recs)
            continue
        expected[(murmur2(key) & 0x7FFFFFFF) % partitions].append((key, value))
    assert len(null_key_partitions) == 1  # the sticky partition
    for p in range(partitions):
        assert [kv for kv in got[p] if kv[0] is not None] == expected[p]
    assert sum(map(len, got.values())) == len(lines)


# -- a produce that fails part-way: acknowledged records stay, every other one is reported
# (and kept with --failed-file), one line says how many, the exit code is not 0 ---------------

def kcat_values(bootstrap: str, topic: str) -> list[bytes]:
    return kcat_read(bootstrap, topic, "%s\n").split(b"\n")[:-1]


def test_any_exception_part_way_flushes_what_was_accepted(broker, tmp_path: Path) -> None:
    """A user partitioner (`--partitioner module:function`) that raises IndexError at the
    1,501st record: the 1,500 before it are stored, the other 1,500 are in --failed-file,
    one line counts them, no traceback."""
    (tmp_path / "flaky_partitioner.py").write_text(
        "import itertools\n"
        "_seen = itertools.count()\n"
        "def partition(topic, key, num_partitions):\n"
        "    return [0][next(_seen) // 1500]\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    lines = [b"record %d" % i for i in range(3000)]
    failed = tmp_path / "failed"
    r = zygote.run(["produce", "-b", broker.bootstrap, "-t", "flaky", "--partitioner",
                    "flaky_partitioner:partition", "--failed-file", str(failed)],
                   input=b"\n".join(lines) + b"\n", timeout=60, env=env)
    assert r.returncode == 1, r.stderr
    assert b"Traceback" not in r.stderr
    err = r.stderr.decode().strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: 1,500 of 3,000 records acknowledged, 1,500 not "
                             "(1,500 read but never sent): partitioner "
                             "flaky_partitioner:partition failed: IndexError"), err
    assert "bug in kafkactl" not in err[0], err
    assert kcat_values(broker.bootstrap, "flaky") == lines[:1500]
    assert failed.read_bytes() == b"".join(line + b"\n" for line in lines[1500:])


def test_a_record_refused_part_way_in_sync_mode(broker_factory, tmp_path: Path) -> None:
    """`--sync` against a broker whose message.max.bytes refuses the 101st record: the
    100 before it are stored; the refused one and the 100 never sent are in --failed-file."""
    b = broker_factory(message_max_bytes="2000")
    lines = [b"small %d" % i for i in range(100)] + [b"x" * 5000] + \
        [b"after %d" % i for i in range(100)]
    failed = tmp_path / "failed"
    r = run(["produce", "-b", b.bootstrap, "-t", "big", "--sync", "--failed-file", str(failed)],
            b"\n".join(lines) + b"\n")
    assert r.returncode == 1, r.stderr
    err = r.stderr.decode().strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: 100 of 201 records acknowledged, 101 not "
                             "(100 read but never sent): "), err
    assert "max.message.bytes" in err[0] and str(failed) in err[0]
    assert kcat_values(b.bootstrap, "big") == lines[:100]
    assert failed.read_bytes() == b"".join(line + b"\n" for line in lines[100:])


def test_topic_creation_failure_keeps_every_record_read(broker_factory, tmp_path: Path) -> None:
    b = broker_factory(auto_create_topics_enable="false")
    failed = tmp_path / "failed"
    r = run(["produce", "-b", b.bootstrap, "-t", "absent", "--failed-file", str(failed)],
            b"a\nb\nc\n")
    assert r.returncode == 1
    err = r.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "0 of 0" not in err[0], err
    assert err[0].startswith("error: 0 of 3 records acknowledged, 3 not (3 read but never "
                             "sent): topic 'absent' does not exist"), err
    assert failed.read_bytes() == b"a\nb\nc\n"
    r = run(["produce", "-b", b.bootstrap, "-t", "absent"], b"a\n")  # no --failed-file
    assert r.returncode == 1 and b"--failed-file" in r.stderr


def test_broker_killed_mid_stream(broker_factory, tmp_path: Path) -> None:
    """Keyed records over 3 partitions; the broker dies part-way. After it comes back,
    the topic holds at least the acknowledged records, the topic plus --failed-file is
    every input line, and the failed file holds exactly as many lines as the message says
    were not acknowledged."""
    b = broker_factory()
    assert run(["topics", "create", "-b", b.bootstrap, "-t", "k3", "--partitions",
                "3"]).returncode == 0
    failed = tmp_path / "failed"
    p = subprocess.Popen(KAFKACTL + ["produce", "-b", b.bootstrap, "-t", "k3", "-K", ":",
                                     "--failed-file", str(failed),
                                     "-X", "delivery.timeout.ms=4000",
                                     "-X", "request.timeout.ms=1000",
                                     "-X", "max.block.ms=2000"],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdin is not None
    # at least one read's worth (read_records reads up to CHUNK bytes at a time)
    first = [b"k%d:first %d" % (i % 7, i) for i in range(CHUNK // 14 + 1)]
    data = b"\n".join(first) + b"\n"
    p.stdin.write(data)
    p.stdin.flush()
    deadline = time.monotonic() + 60
    while stored_count(b.bootstrap, "k3", 3) < data.count(b"\n", 0, CHUNK):
        assert time.monotonic() < deadline, "the first records never arrived"
        time.sleep(0.1)
    b.kill()
    second = [b"k%d:second %d" % (i % 7, i) for i in range(len(first))]
    _, stderr = p.communicate(b"\n".join(second) + b"\n", timeout=90)
    assert p.returncode == 1, stderr
    lines = stderr.decode().strip().splitlines()
    # the outage is told as it happens (once: the run is shorter than the reminders' 30 s)
    notices = [ln for ln in lines if ln.startswith("kafkactl produce: ")]
    assert len(notices) == 1 and " unreachable (" in notices[0], lines
    err = [ln for ln in lines if ln not in notices]
    assert len(err) == 1 and err[0].startswith("error: "), err
    acked, total = (int(x.replace(",", "")) for x in err[0].split()[1:4:2])
    # (records the broker stored may still be unacknowledged: it died before answering)
    assert total == 2 * len(first) and acked < total
    kept = failed.read_bytes().split(b"\n")[:-1]
    assert len(kept) == total - acked
    b.start()
    stored = kcat_read(b.bootstrap, "k3", "%k:%s\n").split(b"\n")[:-1]
    assert len(set(stored)) >= acked  # every acknowledged record is there
    assert set(stored) | set(kept) == set(first + second)


def stored_count(bootstrap: str, topic: str, partitions: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        c.close()
    return sum(ends.values())


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_before_any_record_says_nothing(broker, sig: int, code: int) -> None:
    p = subprocess.Popen(KAFKACTL + ["produce", "-b", broker.bootstrap, "-t", "idle"],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while b"pipe_read" not in _wchan(p.pid):  # blocked reading stdin: started, nothing read
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.02)
    p.send_signal(sig)
    _, stderr = p.communicate(timeout=30)
    assert p.returncode == code
    assert stderr == b""


def test_sigterm_mid_pipe_flushes_and_reports_like_ctrl_c(broker) -> None:
    """SIGTERM (kill, timeout, systemd, docker stop) while the pipe stays open: what was
    read is flushed and acknowledged, the summary says so, and the exit status is 143."""
    lines = [b"term %d" % i for i in range(300)]
    r = run(["topics", "create", "-b", broker.bootstrap, "-t", "sigterm"])
    assert r.returncode == 0, r.stderr
    p = subprocess.Popen(KAFKACTL + ["produce", "-b", broker.bootstrap, "-t", "sigterm",
                                     "--linger-ms", "1"],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdin is not None
    p.stdin.write(b"\n".join(lines) + b"\n")
    p.stdin.flush()
    deadline = time.monotonic() + 60
    while stored_count(broker.bootstrap, "sigterm", 1) < 300:
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, stderr = p.communicate(timeout=60)
    assert p.returncode == 143, stderr
    assert stderr.startswith(b"300 of 300 records acknowledged"), stderr
    assert stderr.rstrip().endswith(b"(interrupted)"), stderr
    assert kcat_values(broker.bootstrap, "sigterm") == lines


def _wchan(pid: int) -> bytes:
    """Where the process sleeps in the kernel (Linux)."""
    try:
        return Path(f"/proc/{pid}/wchan").read_bytes()
    except OSError:
        return b""


# -- -X takes librdkafka's and Java's names (issue 30, item 7) --------------------------------

def test_librdkafka_names_are_taken_and_applied(broker) -> None:
    """The names kcat users pass, refused before: the records arrive, and the batch on
    disk is gzip as compression.codec asked."""
    lines = [b"rdkafka %d" % i for i in range(200)]
    r = run(["produce", "-b", broker.bootstrap, "-t", "rdk", "-p", "0",
             "-X", "queue.buffering.max.ms=10", "-X", "compression.codec=gzip",
             "-X", "message.timeout.ms=30000", "-X", "batch.num.messages=100",
             "-X", "socket.timeout.ms=10000", "-X", "message.max.bytes=2000000",
             "-X", "request.required.acks=1", "-X", "client.id=rdk-test"],
            b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    assert b"200 of 200 records acknowledged" in r.stderr
    assert kcat_values(broker.bootstrap, "rdk") == lines
    segment = broker.data_dir / "rdk-0" / "00000000000000000000.log"
    dump = run(["dump-log", str(segment)])
    assert dump.returncode == 0, dump.stderr
    assert b"compresscodec: gzip" in dump.stdout, dump.stdout


def test_a_small_message_max_bytes_refuses_a_big_record(broker, tmp_path: Path) -> None:
    """librdkafka's message.max.bytes is the producer's max.request.size: checked by the
    client for each record on the record-by-record path (a header makes it that)."""
    failed = tmp_path / "failed"
    r = run(["produce", "-b", broker.bootstrap, "-t", "mmb", "-X", "message.max.bytes=1000",
             "-H", "h=1", "--failed-file", str(failed)], b"small\n" + b"x" * 5000 + b"\n")
    assert r.returncode == 1, r.stderr
    assert b"larger than max.request.size (1000)" in r.stderr, r.stderr
    assert b"it is in " + str(failed).encode() in r.stderr, r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["-X", "queue.buffering.max.msx=1"],
     "-X queue.buffering.max.msx: not a producer property kafkactl knows; the closest is "
     "queue.buffering.max.ms"),
    (["-X", "fetch.wait.max.ms=1"], "-X fetch.wait.max.ms: a consumer property"),
    (["--linger-ms", "5", "-X", "queue.buffering.max.ms=100"],
     "--linger-ms 5 and -X queue.buffering.max.ms=100 disagree: give one"),
    (["-z", "lz4", "-X", "compression.type=gzip"],
     "--compression lz4 and -X compression.type=gzip disagree"),
    (["-X", "acks=maybe"], "-X acks=maybe: must be one of all, -1, 0, 1"),
])
def test_property_refusals(broker, args: list[str], message: str) -> None:
    r = run(["produce", "-b", broker.bootstrap, "-t", "refused", *args], b"a\n")
    assert r.returncode == 2, r.stderr
    assert r.stderr.decode().strip() == f"error: {message}" or message in r.stderr.decode()
    assert b"Traceback" not in r.stderr


def test_a_flag_and_x_that_agree_are_fine(broker) -> None:
    r = run(["produce", "-b", broker.bootstrap, "-t", "agree", "--acks", "all",
             "-X", "request.required.acks=-1", "-z", "LZ4", "-X", "compression.codec=lz4"],
            b"a\n")
    assert r.returncode == 0, r.stderr


def test_acks_0_says_sent_not_acknowledged(broker) -> None:
    r = run(["produce", "-b", broker.bootstrap, "-t", "acks0", "--acks", "0"], b"a\nb\n")
    assert r.returncode == 0, r.stderr
    assert b"2 of 2 records sent " in r.stderr and b"acknowledged" not in r.stderr, r.stderr


@pytest.mark.parametrize(("records", "kept"), [(1, "it is in"), (3, "all 3 are in")])
def test_the_failed_file_sentence(tmp_path: Path, records: int, kept: str) -> None:
    failed = tmp_path / "failed"
    r = run(["produce", "-b", "127.0.0.1:1", "-t", "x", "--failed-file", str(failed),
             "-X", "max.block.ms=1000"], b"a\n" * records)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert f"; {kept} {failed}" in err, err
    assert failed.read_bytes() == b"a\n" * records
