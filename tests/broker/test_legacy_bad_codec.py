"""Old-format (magic 0/1) messages whose attributes name no codec (attributes & 7 = 5, 6 or
7) behind a valid CRC, as a tester crafts them.

- Produce v0-v2: that partition is answered CORRUPT_MESSAGE (Kafka's CompressionType.forId
  throws and ReplicaManager answers UNKNOWN_SERVER_ERROR; CORRUPT_MESSAGE is the code every
  client of that era knows, as for other bad magic 0/1 message sets), nothing is stored, the
  connection keeps answering and the broker logs no traceback. A magic-2 batch with such a
  codec is UNSUPPORTED_COMPRESSION_TYPE, as before.
- On disk: recovery cuts the segment at that message with the usual report (never a
  traceback, never the BufferError an unclosable map used to raise over the real error);
  `kafkactl serve` starts, `recover --dry-run` reports it, `dump-log` says it in one line.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kafkactl.cli.app import app
from kafkactl.log import recovery
from kafkactl.log.config import LogConfig
from kafkactl.log.log import Log
from kafkactl.protocol.errors import ErrorCode
from kafkactl.record.batch import RecordBatch, assemble_batch, encode_record
from kafkactl.record.codecs import Compression
from kafkactl.record.convert import up_convert
from kafkactl.record.errors import CorruptRecordError, RecordError
from kafkactl.record.legacy import LegacyBatch, build_message_set, encode_message
from kafkactl.record.memory_records import scan
from tests.broker._damage import partition_dir, segments
from tests.conftest import BrokerProcess

from .wire import Wire, batch

runner = CliRunner()
BAD_CODECS = (5, 6, 7)


def _bad_message(magic: int, codec: int, offset: int = 0) -> bytes:
    """One uncompressed-looking message whose attributes claim `codec`, CRC correct."""
    ts = None if magic == 0 else int(time.time() * 1000)
    return encode_message(magic, offset, b"key", b"value", timestamp=ts, attributes=codec)


def _log_end(w: Wire, topic: str) -> int:
    return int(w.fetch(topic, 0)["high_watermark"])


# ---- the record layer: a RecordError, never a ValueError ------------------------------------

@pytest.mark.parametrize("codec", BAD_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_unknown_codec_is_a_record_error(magic: int, codec: int) -> None:
    raw = _bad_message(magic, codec)
    b = LegacyBatch(raw)
    assert b.is_valid()  # the CRC is right: only the codec is wrong
    with pytest.raises(CorruptRecordError, match=f"unknown compression type id {codec}"):
        _ = b.compression
    with pytest.raises(RecordError):
        up_convert(raw, assign_offsets=True)
    res = scan(raw)
    assert res.valid_bytes == 0 and res.error_position == 0
    assert res.error is not None and f"compression type id {codec}" in res.error


@pytest.mark.parametrize("codec", BAD_CODECS)
def test_unknown_codec_of_a_v2_batch_is_a_record_error(codec: int) -> None:
    ts = int(time.time() * 1000)
    raw = assemble_batch(encode_record(0, 0, None, b"v"), attributes=codec, last_offset_delta=0,
                         base_timestamp=ts, max_timestamp=ts, producer_id=-1,
                         producer_epoch=-1, base_sequence=-1, record_count=1)
    with pytest.raises(CorruptRecordError, match=f"unknown compression type id {codec}"):
        _ = RecordBatch(raw).compression


# ---- Produce ---------------------------------------------------------------------------------

@pytest.fixture
def broker(module_broker: BrokerProcess) -> BrokerProcess:
    return module_broker


@pytest.mark.parametrize(("version", "magic", "codec"), [(0, 0, 5), (1, 1, 6), (2, 1, 7),
                                                         (2, 0, 7)])
def test_produce_of_a_legacy_message_with_an_unknown_codec(broker: Any, version: int,
                                                           magic: int, codec: int) -> None:
    topic = f"legacy-codec-v{version}-m{magic}-c{codec}"
    good = build_message_set(magic, [(None if magic == 0 else int(time.time() * 1000),
                                      b"k", b"after")])
    with Wire(broker.bootstrap) as w:
        r = w.produce(topic, _bad_message(magic, codec), version=version)
        assert r["error_code"] == ErrorCode.CORRUPT_MESSAGE, r
        assert _log_end(w, topic) == 0  # nothing stored
        # the same connection answers the next request, and the partition takes records
        ok = w.produce(topic, good, version=version)
        assert ok["error_code"] == 0 and ok["base_offset"] == 0, ok
        assert _log_end(w, topic) == 1
    # also behind a good message in the same set: the whole set is refused
    with Wire(broker.bootstrap) as w:
        r = w.produce(topic, good + _bad_message(magic, codec, 1), version=version)
        assert r["error_code"] == ErrorCode.CORRUPT_MESSAGE, r
        assert _log_end(w, topic) == 1
    assert "Traceback" not in broker.log(), broker.log()
    assert "is not a valid Compression" not in broker.log()


@pytest.mark.parametrize("version", [3, 9])
@pytest.mark.parametrize("codec", BAD_CODECS)
def test_produce_of_a_v2_batch_with_an_unknown_codec(broker: Any, version: int,
                                                     codec: int) -> None:
    topic = f"v2-codec-v{version}-c{codec}"
    ts = int(time.time() * 1000)
    raw = assemble_batch(encode_record(0, 0, None, b"v"), attributes=codec, last_offset_delta=0,
                         base_timestamp=ts, max_timestamp=ts, producer_id=-1,
                         producer_epoch=-1, base_sequence=-1, record_count=1)
    with Wire(broker.bootstrap) as w:
        r = w.produce(topic, raw, version=version)
        assert r["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, r
        assert _log_end(w, topic) == 0
        ok = w.produce(topic, batch([b"after"]), version=version)
        assert ok["error_code"] == 0 and ok["base_offset"] == 0, ok
    assert "Traceback" not in broker.log(), broker.log()


# ---- on disk ---------------------------------------------------------------------------------

GOOD = build_message_set(1, [(5, b"a", b"b"), (6, None, b"c")], Compression.GZIP)  # offsets 0-1


def _old_partition(tmp_path: Path, codec: int = 7) -> tuple[Path, bytes]:
    """A partition directory as Kafka 0.10 left it: a gzip wrapper (offsets 0-1), then a
    message claiming `codec` (offset 2), then a good one (offset 3): no index files."""
    part = tmp_path / "old-0"
    part.mkdir()
    data = GOOD + _bad_message(1, codec, 2) + build_message_set(1, [(7, b"x", b"y")],
                                                                 base_offset=3)
    (part / "00000000000000000000.log").write_bytes(data)
    return part, data


@pytest.mark.parametrize("codec", BAD_CODECS)
def test_recovery_cuts_at_the_message(tmp_path: Path, codec: int) -> None:
    part, _data = _old_partition(tmp_path, codec)
    log = Log(part, LogConfig(), needs_recovery=True)
    try:
        assert log.log_end_offset == 2
        (report,) = log.recovery_reports
        assert report.valid_bytes == len(GOOD) and report.error_position == len(GOOD)
        assert report.error is not None
        assert f"unknown compression type id {codec}" in report.error
        assert [r.offset for b in log.iter_batches() for r in b] == [0, 1]
    finally:
        log.close()
    assert (part / "00000000000000000000.log").read_bytes() == GOOD


def test_recover_dry_run_reports_it(tmp_path: Path) -> None:
    part, data = _old_partition(tmp_path)
    r = runner.invoke(app, ["recover", str(part), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    (seg,) = json.loads(r.output)["segments"]
    assert seg["valid_bytes"] == len(GOOD) and seg["error_position"] == len(GOOD)
    assert "unknown compression type id 7" in seg["error"]
    assert seg["bytes_truncated"] == len(data) - len(GOOD)
    r = runner.invoke(app, ["recover", str(part), "--dry-run"])
    assert r.exit_code == 1 and "unknown compression type id 7" in " ".join(r.output.split())
    assert (part / "00000000000000000000.log").read_bytes() == data  # untouched
    r = runner.invoke(app, ["recover", str(part)])
    assert r.exit_code == 0, r.output
    assert (part / "00000000000000000000.log").read_bytes() == GOOD


def test_dump_log_says_it_in_one_line(tmp_path: Path) -> None:
    part, data = _old_partition(tmp_path)
    r = runner.invoke(app, ["dump-log", str(part / "00000000000000000000.log")])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code in (1, 2), r.output
    assert "Traceback" not in r.output
    problems = [ln for ln in r.output.splitlines()
                if "invalid bytes" in ln or ln.startswith("error:")]
    assert len(problems) == 1, r.output
    doc = [json.loads(ln) for ln in runner.invoke(
        app, ["dump-log", "--json", str(part / "00000000000000000000.log")]).output.splitlines()
        if ln.startswith("{")]
    bad = [d for d in doc if d.get("type") == "invalid_bytes"]
    assert bad and bad[0]["position"] == len(GOOD), doc
    assert "unknown compression type id 7" in bad[0]["reason"]
    assert len(data) - len(GOOD) == bad[0]["count"]


def test_a_failing_scan_shows_its_own_error_not_a_buffer_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever fails while the segment is mapped (here a stand-in error raised with views
    into the map alive in its frames), the map is closed and that error is what shows."""
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(GOOD)

    def failing(buf: memoryview, *_a: object, **_k: object) -> None:
        view = buf[4:20]  # noqa: F841 - a live export of the map in the failing frame
        raise KeyError("the real error")

    monkeypatch.setattr(recovery, "validate_log_bytes", failing)
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(KeyError, match="the real error"):
            recovery.validate_file(fd, len(GOOD), 0)
    finally:
        os.close(fd)


def test_serve_starts_over_such_a_segment(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory()
    with Wire(b.bootstrap) as w:
        msgs = build_message_set(1, [(int(time.time() * 1000), b"k", b"v%d" % i)
                                     for i in range(2)])
        assert w.produce("oldfmt", msgs, version=2)["error_code"] == 0
    assert b.stop() == 0
    (seg,) = segments(b.data_dir, "oldfmt")
    good = seg.read_bytes()
    with open(seg, "ab") as f:  # as if Kafka 0.10 had written it after them
        f.write(_bad_message(1, 7, 2) + build_message_set(1, [(7, b"x", b"y")], base_offset=3))
    for stale in partition_dir(b.data_dir, "oldfmt").glob("*.index"):
        stale.unlink()  # the tail is validated either way; no index: rebuilt from the log
    b.start()
    with Wire(b.bootstrap) as w:
        assert _log_end(w, "oldfmt") == 2
        r = w.produce("oldfmt", batch([b"after"]))
        assert r["error_code"] == 0 and r["base_offset"] == 2
    log = b.log()
    assert "Traceback" not in log and "BufferError" not in log, log
    assert "unknown compression type id 7" in log and "truncated segment" in log, log
    assert seg.read_bytes()[:len(good)] == good



def test_an_old_fetcher_gets_corrupt_message_for_damage_a_clean_start_kept(
        broker_factory: Any) -> None:
    """A batch whose codec bits were damaged (CRC made to match) in a segment a clean start
    does not check again: a Fetch v2 client, whose data must be converted, gets
    CORRUPT_MESSAGE for the partition and the connection answers its next request (the
    conversion error escaped the handler)."""
    from kafkactl.record.crc import crc32c

    b: BrokerProcess = broker_factory()
    with Wire(b.bootstrap) as w:
        assert w.create_topic("dmg", configs={"segment.bytes": "100"})["error_code"] == 0
        for i in range(3):  # each batch its own segment
            assert w.produce("dmg", batch([b"value-%d" % i]))["error_code"] == 0
    assert b.stop() == 0
    first = min(segments(b.data_dir, "dmg"))
    data = bytearray(first.read_bytes())
    data[22] = (data[22] & ~0x07) | 7  # attributes' low byte: codec 7
    data[17:21] = crc32c(bytes(data[21:])).to_bytes(4, "big")
    first.write_bytes(bytes(data))
    b.start()
    with Wire(b.bootstrap) as w:
        r = w.fetch("dmg", 0, version=2)
        assert r["error_code"] == ErrorCode.CORRUPT_MESSAGE, r
        assert w.fetch("dmg", 1, version=2)["error_code"] == 0  # the connection still answers
    assert "Traceback" not in b.log()
