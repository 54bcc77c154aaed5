"""`kafkactl dump-log` against DumpLogSegments' own rules (kafka/tools/DumpLogSegments.scala):
its `--files` and decoder-class flags, its independent time-index checks, Kafka's order of
the non-consecutive offset pairs and of the unknown-file lines, and the exit codes the README
promises (1: damage found, 2: bad arguments) for a failed sanity check and an index whose
.log is missing.

The segments are a real broker's: records produced through confluent-kafka, the broker
stopped cleanly, its partition directory copied for each test and dumped by a real
`kafkactl dump-log` process."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests import zygote
from tests.conftest import BrokerProcess, free_port
from tests.polling import wait_until

SEG = "00000000000000000000"
BASE_TS = 1_700_000_000_000
# one batch per record; batch 3 (offset 3) has a smaller timestamp than batch 2
TIMESTAMPS = [BASE_TS + t for t in (1000, 2000, 3000, 2500, 4000)]
KEYS = [struct.pack(">i", 7 * i - 10) for i in range(5)]  # 4 bytes: IntegerDecoder
VALUES = [struct.pack(">q", 1_234_567_890_123 * (i + 1)) for i in range(5)]  # LongDecoder


def kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    r = zygote.run(list(args), text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def dump(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return kafkactl("dump-log", *map(str, args))


def _produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes, int | None]],
             one_batch_each: bool) -> None:
    """Produce and wait for every ack (a delivery error fails the test); the producer is
    gone when this returns (it would keep dialing a stopped broker)."""
    from confluent_kafka import Producer

    errors: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    # batches stay below the small segment.bytes of the compaction test
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.size": 1000})
    for key, value, ts in records:
        p.produce(topic, key=key, value=value, timestamp=ts or 0,
                  on_delivery=delivered)
        if one_batch_each:
            assert p.flush(30) == 0
    assert p.flush(30) == 0 and errors == []


@pytest.fixture(scope="module")
def _broker_partition(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real broker's partition directory: 5 single-record batches, every batch indexed
    (index.interval.bytes=1), keys of 4 bytes and values of 8."""
    data = tmp_path_factory.mktemp("dump-rules") / "data"
    data.mkdir()
    broker = BrokerProcess(data, free_port())
    broker.start()
    try:
        r = kafkactl("topics", "create", "-b", broker.bootstrap, "-t", "dl", "--partitions",
                     "1", "--replication-factor", "1", "--config", "index.interval.bytes=1")
        assert r.returncode == 0, r.stderr
        _produce(broker.bootstrap, "dl", list(zip(KEYS, VALUES, TIMESTAMPS, strict=True)),
                 one_batch_each=True)
        assert broker.stop() == 0, broker.log()
    finally:
        broker.kill()
    yield data / "dl-0"


@pytest.fixture
def part(_broker_partition: Path, tmp_path: Path) -> Path:
    """A copy of the broker's partition directory, for the test to damage."""
    return Path(shutil.copytree(_broker_partition, tmp_path / "dl-0"))


def _time_entries(path: Path) -> list[tuple[int, int]]:
    raw = path.read_bytes()
    return [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw) - 11, 12)]


def _write_time_entries(path: Path, entries: list[tuple[int, int]]) -> None:
    path.write_bytes(b"".join(struct.pack(">qi", ts, off) for ts, off in entries))


# ---------------------------------------------------------------- 1: --files, decoders

def test_files_option_takes_kafkas_comma_list(part: Path) -> None:
    """kafka-dump-log.sh's REQUIRED `--files a,b`: same dump as the positional files; it
    repeats and goes with positional files (which come first)."""
    log, index, tindex = (part / f"{SEG}{s}" for s in (".log", ".index", ".timeindex"))
    positional = dump(log, index, tindex)
    assert positional.returncode == 0, positional.stderr
    assert [ln for ln in positional.stdout.splitlines() if ln.startswith("Dumping")] == \
        [f"Dumping {log}", f"Dumping {index}", f"Dumping {tindex}"]
    for args in (["--files", f"{log},{index},{tindex}"],
                 ["--files", f"{log},{index}", "--files", str(tindex)],
                 [str(log), "--files", f"{index},{tindex}"]):
        r = dump(*args)
        assert (r.returncode, r.stdout, r.stderr) == (0, positional.stdout, ""), args
    r = dump()  # no files at all: a bad argument
    assert r.returncode == 2 and "error: no files" in r.stderr and "--files" in r.stderr


def _payloads(stdout: str) -> list[str]:
    # split("\n"): a key printed as text may hold a character splitlines() splits at
    return [ln.split(" headerKeys: [] ", 1)[1] for ln in stdout.split("\n")
            if ln.startswith("| offset:")]


def test_decoder_classes_kafka_ships(part: Path) -> None:
    """--key-decoder-class / --value-decoder-class with Kafka's decoders: each implies
    --print-data-log, as in DumpLogSegments; IntegerDecoder / LongDecoder print the number
    (ByteBuffer.getInt / getLong), StringDecoder the text, DefaultDecoder the bytes."""
    log = part / f"{SEG}.log"
    r = dump(log, "--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder",
             "--value-decoder-class", "org.apache.kafka.tools.api.LongDecoder")
    assert r.returncode == 0, r.stderr
    assert _payloads(r.stdout) == [
        f"key: {7 * i - 10} payload: {1_234_567_890_123 * (i + 1)}" for i in range(5)]
    # Kafka 3.x's kafka.serializer names are the same decoders
    r3 = dump(log, "--key-decoder-class", "kafka.serializer.IntegerDecoder",
              "--value-decoder-class", "kafka.serializer.LongDecoder")
    assert (r3.returncode, r3.stdout) == (0, r.stdout)
    # StringDecoder is what --print-data-log prints
    plain = dump(log, "--print-data-log")
    for name in ("org.apache.kafka.tools.api.StringDecoder", "kafka.serializer.StringDecoder"):
        rs = dump(log, "--value-decoder-class", name, "--key-decoder-class", name)
        assert (rs.returncode, rs.stdout) == (0, plain.stdout), name
    rd = dump(log, "--key-decoder-class", "org.apache.kafka.tools.api.DefaultDecoder",
              "--value-decoder-class", "org.apache.kafka.tools.api.DefaultDecoder")
    assert _payloads(rd.stdout) == [f"key: {k.hex()} payload: {v.hex()}"
                                    for k, v in zip(KEYS, VALUES, strict=True)]
    # --json carries the decoded numbers as numbers
    rj = dump(log, "--json", "--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder",
              "--value-decoder-class", "org.apache.kafka.tools.api.LongDecoder")
    recs = [o for o in map(json.loads, rj.stdout.split("\n")[:-1]) if o["type"] == "record"]
    assert [(o["key"], o["payload"]) for o in recs] == \
        [(7 * i - 10, 1_234_567_890_123 * (i + 1)) for i in range(5)]


def test_decoder_class_errors(part: Path) -> None:
    log = part / f"{SEG}.log"
    # a class kafkactl does not have: a bad argument, named, before anything is dumped
    r = dump(log, "--value-decoder-class", "com.example.MyDecoder")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: --value-decoder-class com.example.MyDecoder: ")
    assert "org.apache.kafka.tools.api.StringDecoder" in r.stderr
    # a payload shorter than the decoder reads (Kafka: BufferUnderflowException): a sentence
    r = dump(log, "--key-decoder-class", "org.apache.kafka.tools.api.LongDecoder")
    assert r.returncode == 2
    assert "the key of the record at offset 0 is 4 byte(s), LongDecoder reads 8" in r.stderr


# ---------------------------------------------------------------- 2: .timeindex checks

def _stderr_groups(stderr: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    title = ""
    for line in stderr.splitlines():
        if line.startswith(" ") or line.startswith("Indexed offset:"):
            groups[title].append(line.strip())
        else:
            title = re.sub(r" ?:\S+$", "", line)
            groups[title] = []
    return groups


def _recover_and_dump_flags(part: Path) -> tuple[list[Any], list[Any]]:
    r = kafkactl("recover", str(part), "--dry-run", "--json")
    recovered = sorted((p["index"], p["entry"], p["kind"]) for s in json.loads(r.stdout)["segments"]
                       for p in s["index_problems"])
    r = dump(part / f"{SEG}.timeindex", "--verify-index-only", "--json")
    dumped = sorted((o["index"], o["entry"], o["kind"])
                    for o in map(json.loads, r.stdout.splitlines())
                    if o["type"] == "index_problem")
    return recovered, dumped


def test_time_index_entry_out_of_order_is_not_a_mismatch(part: Path) -> None:
    """(2500 @ 3) after (3000 @ 2), 2500 being batch 3's own largest timestamp: Kafka says
    only "out of order" (previously indexed 3000), never "timestamp mismatch"."""
    tindex = part / f"{SEG}.timeindex"
    ts = dict(enumerate(TIMESTAMPS))
    assert _time_entries(tindex) == [(ts[1], 1), (ts[2], 2), (ts[4], 4)]  # as the broker wrote
    _write_time_entries(tindex, [(ts[1], 1), (ts[2], 2), (ts[3], 3), (ts[4], 4)])
    r = dump(tindex, "--verify-index-only")
    assert r.returncode == 1
    assert r.stderr == (f"Found out of order timestamp in :{tindex.resolve()}\n"
                        f"  Index timestamp: {ts[3]}, Previously indexed timestamp: {ts[2]}\n")
    recovered, dumped = _recover_and_dump_flags(part)
    assert recovered == dumped == [("time", 2, "out_of_order")]


def test_time_index_entry_both_mismatched_and_out_of_order(part: Path) -> None:
    """DumpLogSegments makes its two checks independently: an entry can fail both, and the
    log timestamp it names is the entry's own batch's, not a running maximum."""
    tindex = part / f"{SEG}.timeindex"
    ts = dict(enumerate(TIMESTAMPS))
    _write_time_entries(tindex, [(ts[1], 1), (ts[2], 2), (ts[3] - 100, 3), (ts[4], 4)])
    r = dump(tindex, "--verify-index-only")
    assert r.returncode == 1
    assert _stderr_groups(r.stderr) == {
        "Found timestamp mismatch in": [f"Index timestamp: {ts[3] - 100}, "
                                        f"log timestamp: {ts[3]}"],
        "Found out of order timestamp in": [f"Index timestamp: {ts[3] - 100}, "
                                            f"Previously indexed timestamp: {ts[2]}"],
    }
    recovered, dumped = _recover_and_dump_flags(part)
    assert recovered == dumped == [("time", 2, "mismatch"), ("time", 2, "out_of_order")]


def test_time_index_entry_only_kafkactl_rejects_is_no_kafka_mismatch(part: Path) -> None:
    """(2500 @ 3) right after (2000 @ 1): Kafka's checks pass (its batch's own timestamp, in
    order); recover still rejects it (a lookup by time would skip offset 2, stamped 3000).
    dump-log flags it as recover does, under its own heading, not as Kafka's mismatch."""
    tindex = part / f"{SEG}.timeindex"
    ts = dict(enumerate(TIMESTAMPS))
    _write_time_entries(tindex, [(ts[1], 1), (ts[3], 3), (ts[4], 4)])
    r = dump(tindex, "--verify-index-only")
    assert r.returncode == 1
    assert "timestamp mismatch" not in r.stderr and "out of order" not in r.stderr
    assert _stderr_groups(r.stderr) == {"Found invalid index entries in": [
        f"time index entry 1 (timestamp {ts[3]}, offset 3): the largest timestamp up to "
        f"that offset is {ts[2]}"]}
    recovered, dumped = _recover_and_dump_flags(part)
    assert recovered == dumped == [("time", 1, "mismatch")]


# ---------------------------------------------------------------- 3, 4: exit codes

@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_failed_sanity_check_is_damage_exit_1(part: Path, suffix: str) -> None:
    path = part / f"{SEG}{suffix}"
    r = dump(path, "--index-sanity-check")
    assert (r.returncode, r.stdout.splitlines()[-1]) == (0, f"{path} passed sanity check.")
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 5)  # not a whole number of entries
    r = dump(path, "--index-sanity-check")
    assert r.returncode == 1, r.stderr  # damage found (2 is for bad arguments)
    assert r.stdout == f"Dumping {path}\n"
    assert r.stderr.startswith(f"{path} failed sanity check: ")
    r = dump(path, "--index-sanity-check", "--json")
    assert r.returncode == 1
    assert json.loads(r.stdout.splitlines()[-1])["passed"] is False


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_index_without_its_log_says_the_log_is_missing(part: Path, suffix: str) -> None:
    """DumpLogSegments dies with java.nio.file.NoSuchFileException naming the .log; dump-log
    says so (exit 1: the segment is damaged), not "log offset: -1" for every entry."""
    path = part / f"{SEG}{suffix}"
    (part / f"{SEG}.log").unlink()
    r = dump(path, "--verify-index-only")
    assert r.returncode == 1
    assert "Mismatches" not in r.stderr and "not found in the log" not in r.stderr
    assert r.stderr == (f"error: Cannot check {path} against its log: "
                        f"{(part / SEG).resolve()}.log does not exist (NoSuchFileException)\n")
    # the entries still print (they are what the file holds)
    r = dump(path)
    assert r.returncode == 1 and len(r.stdout.splitlines()) > 2


# ---------------------------------------------------------------- 6: unknown files

def test_unknown_file_is_dumping_then_ignoring(part: Path) -> None:
    ckpt = part / "leader-epoch-checkpoint"
    log = part / f"{SEG}.log"
    assert ckpt.exists()
    r = dump(ckpt, log)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:3] == [f"Dumping {ckpt}", f"Dumping {log}",
                                        "Log starting offset: 0"]
    assert r.stderr == f"Ignoring unknown file {ckpt}\n"


# ---------------------------------------------------------------- 5: non-consecutive pairs

def test_non_consecutive_pairs_print_last_first(broker_factory: Any) -> None:
    """A compacted segment has gaps; DumpLogSegments prepends each pair to a list, so the
    last gap of a file prints first."""
    b = broker_factory(log_cleaner_backoff_ms="100")
    r = kafkactl("topics", "create", "-b", b.bootstrap, "-t", "cmp", "--partitions", "1",
                 "--config", "cleanup.policy=compact", "--config", "segment.bytes=2000",
                 "--config", "min.cleanable.dirty.ratio=0.01")
    assert r.returncode == 0, r.stderr
    # k0..k9, then new versions of the even keys: cleaned, offsets 1, 3, 5, 7, 9 stay;
    # then filler under new keys: the segments roll past the versions
    _produce(b.bootstrap, "cmp",
             [(b"k%d" % k, b"v" * 20, None) for k in [*range(10), 0, 2, 4, 6, 8]]
             + [(b"f%d" % i, b"x" * 100, None) for i in range(60)], one_batch_each=False)
    cp = b.data_dir / "cleaner-offset-checkpoint"

    def cleaned_upto() -> int:
        text = cp.read_text() if cp.exists() else ""
        return int(text.split("cmp 0 ")[1].split()[0]) if "cmp 0 " in text else -1

    wait_until(lambda: cleaned_upto() >= 15, 60, "a cleaner pass over the versions")
    assert b.stop() == 0, b.log()
    segs = sorted((b.data_dir / "cmp-0").glob("*.log"))
    r = dump("--deep-iteration", *segs)
    assert r.returncode == 0, r.stderr
    blocks: list[list[tuple[int, int]]] = []
    for line in r.stderr.splitlines():
        if line.startswith("Non-consecutive offsets in "):
            blocks.append([])
        else:
            a, b_ = re.fullmatch(r"  (\d+) is followed by (\d+)", line).groups()  # type: ignore[union-attr]
            blocks[-1].append((int(a), int(b_)))
    assert any(len(pairs) >= 2 for pairs in blocks), r.stderr
    for pairs in blocks:
        assert pairs == sorted(pairs, reverse=True), r.stderr
    assert (1, 3) in [pair for pairs in blocks for pair in pairs]
