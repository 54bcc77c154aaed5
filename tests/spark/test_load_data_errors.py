"""What the loader and the data source say when the data itself is the problem, against a
real broker: a batch damaged on the broker's disk (its CRC fails) is damaged data, exit 5,
named by topic, partition and offset, not "broker unreachable"; a broker's error code is
named (TOPIC_AUTHORIZATION_FAILED), not "unreachable"; a topic deleted while a range is
read is data loss (failOnDataLoss=false ends the range there, at once, keeping what was
read); an explicit range wholly deleted is zero rows with failOnDataLoss=false; a
--commit-group with active members is refused before the job. One spark-submit run: the
failed job's stderr is the loader's one line, without Spark's Java stack traces."""

from __future__ import annotations

import logging
import os
import struct
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.admin import AdminClient
from kafkactl.client.kafka_client import KafkaClient
from kafkactl.protocol.api_keys import ApiKey
from kafkactl.spark import load
from kafkactl.spark.options import DataLossError, OptionError, ReadOptions
from kafkactl.spark.partition_reader import RangeReader, read_range
from kafkactl.spark.planner import OffsetRange, plan, resolve_offsets, split_ranges
from tests import zygote
from tests.broker.wire import Wire
from tests.polling import wait_until
from tests.spark.conftest import create_topic, delete_records, jvm_confs, produce

RECORDS_PER_BATCH = 10


def fill_batches(bootstrap: str, topic: str, batches: int) -> None:
    """`batches` produce calls of RECORDS_PER_BATCH records each (each flushed alone, so
    each is at least one batch of its own) to partition 0."""
    for n in range(batches):
        produce(bootstrap, topic, [(0, None, f"v{n}-{i}".encode() * 20, None)
                                   for i in range(RECORDS_PER_BATCH)])


def segment_batches(path: Path) -> list[tuple[int, int, int]]:
    """(file position, base offset, size) of each whole batch in a segment file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        out.append((pos, base, 12 + length))
        pos += 12 + length
    return out


def damage_batch(broker: Any, topic: str, records: int) -> int:
    """Flip the last byte of a batch in the middle of `topic`-0's segment on the broker's
    disk (its records: the header still frames it, its CRC no longer matches), once the
    file holds all `records`; returns the damaged batch's base offset."""
    seg = wait_until(lambda: next(iter(Path(broker.data_dir).rglob(f"{topic}-0/*.log")),
                                  None), 30, f"{topic}-0's segment file")

    def written() -> list[tuple[int, int, int]] | None:
        found = segment_batches(seg)
        return found if found and found[-1][1] + 1 >= records - RECORDS_PER_BATCH else None

    batches = wait_until(written, 30, "every batch written to the segment file")
    pos, base, size = batches[len(batches) // 2]
    assert base > 0, batches
    with open(seg, "r+b") as f:
        f.seek(pos + size - 1)
        byte = f.read(1)
        f.seek(pos + size - 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    return base


def relayed(e: BaseException) -> RuntimeError:
    """`e` as a failed Spark job relays it to the driver: its Python traceback as text."""
    return RuntimeError("Job aborted due to stage failure: ... PythonException: "
                        + "".join(traceback.format_exception(e)))


def test_a_damaged_batch_is_damaged_data_not_an_unreachable_broker(broker: Any) -> None:
    b = broker.bootstrap
    create_topic(b, "dmg", 1)
    fill_batches(b, "dmg", 6)
    base = damage_batch(broker, "dmg", 60)
    for skip in (False, True):  # failOnDataLoss does not skip damage
        ro = ReadOptions(bootstrap=b, subscribe=("dmg",), fail_on_data_loss=not skip)
        ranges, _start, _end = plan(ro)
        with pytest.raises(Exception) as failed:
            for rng in ranges:
                list(read_range(ro, rng))
        assert type(failed.value).__name__ == "DamagedDataError", failed.value
        assert str(failed.value).startswith(
            f"topic dmg partition 0: damaged batch at offset {base} (CRC mismatch)"), \
            failed.value
    reason, code = load.task_failure(relayed(failed.value))
    assert code == load.EXIT_DATA_LOSS == 5, (reason, code)
    assert reason == (f"topic dmg partition 0: damaged batch at offset {base} (CRC mismatch):"
                      f" nothing from offset {base} on can be read; nothing loaded"), reason


def test_a_broker_error_code_is_named(broker_factory: Any) -> None:
    """The leader refuses the Fetch (Describe allowed, Read not): the error is
    TOPIC_AUTHORIZATION_FAILED by name, refused credentials (exit 3), not "broker
    unreachable: ... broker error code 29"."""
    broker = broker_factory(authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                            allow_everyone_if_no_acl_found="true")
    b = broker.bootstrap
    create_topic(b, "ro", 1)
    produce(b, "ro", [(0, None, b"x", None)] * 5)
    with Wire(b) as w:  # an ACL on the topic: only Describe is allowed from now on
        r = w.request(ApiKey.CREATE_ACLS, 3, {"creations": [{
            "resource_type": 2, "resource_name": "ro", "resource_pattern_type": 3,
            "principal": "User:ANONYMOUS", "host": "*", "operation": 8,
            "permission_type": 3}]})
        assert r["results"][0]["error_code"] == 0, r
    ro = ReadOptions(bootstrap=b, subscribe=("ro",), poll_timeout_ms=20000)
    with pytest.raises(Exception) as failed:
        list(read_range(ro, OffsetRange("ro", 0, 0, 5)))
    assert "TOPIC_AUTHORIZATION_FAILED (error code 29)" in str(failed.value), failed.value
    reason, code = load.task_failure(relayed(failed.value))
    assert "unreachable" not in reason and "TOPIC_AUTHORIZATION_FAILED" in reason, reason
    assert code == load.EXIT_BROKER, (reason, code)


def _delete_topic(bootstrap: str, topic: str) -> None:
    with AdminClient(bootstrap) as admin:
        assert admin.delete_topics([topic])[topic] is None
    client = KafkaClient(bootstrap)
    try:
        wait_until(lambda: client.refresh_metadata([topic]).partitions_for(topic) is None,
                   30, f"topic {topic} gone from the metadata")
    finally:
        client.close()


def test_a_topic_deleted_while_read_is_data_loss(broker: Any,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """Deleted after the range's first chunk was read: failOnDataLoss=false ends the range
    there at once, keeping the rows read (it waited kafkaConsumer.pollTimeoutMs for a
    leader, then failed "broker unreachable: ... no leader"); failOnDataLoss=true fails
    with data loss naming the deleted topic. A range whose task starts after the deletion
    likewise."""
    b = broker.bootstrap
    n = 3000
    for topic in ("gone-skip", "gone-fail"):
        create_topic(b, topic, 1)
        produce(b, topic, [(0, None, b"v" * 200, None)] * n)
    for topic, skip in (("gone-skip", True), ("gone-fail", False)):
        ro = ReadOptions(bootstrap=b, subscribe=(topic,), fail_on_data_loss=not skip,
                         poll_timeout_ms=20000)
        rng = OffsetRange(topic, 0, 0, n)
        chunks = RangeReader(ro, rng, fetch_bytes=4096).batches()
        first = next(chunks)
        assert 0 < first.num_rows < n
        _delete_topic(b, topic)
        late = RangeReader(ro, rng)  # a task started after the deletion
        if skip:
            with caplog.at_level(logging.WARNING, logger="kafkactl.spark"):
                try:
                    rest = list(chunks)
                    nothing = list(late.batches())
                except Exception as e:  # noqa: BLE001 - the old failure, as an assertion
                    raise AssertionError(f"failOnDataLoss=false failed: {e!r}") from e
            offsets = [o for c in (first, *rest) for o in c.column("offset").to_pylist()]
            assert offsets == list(range(len(offsets))) and len(offsets) < n
            assert nothing == []
            assert f"the topic {topic} was deleted; skipped (failOnDataLoss=false)" in \
                caplog.text
            continue
        for reader in (chunks, late.batches()):
            with pytest.raises(Exception) as failed:
                list(reader)
            assert type(failed.value).__name__ == "TopicDeletedError", failed.value
            assert isinstance(failed.value, DataLossError)
            assert f"the topic {topic} was deleted" in str(failed.value)
        reason, code = load.task_failure(relayed(failed.value))
        assert code == load.EXIT_DATA_LOSS, (reason, code)
        assert reason.startswith(f"data loss: topic {topic} partition 0: offsets 0..{n - 1}")
        assert reason.endswith(f"the topic {topic} was deleted; run with --skip-data-loss to "
                               "load what is left"), reason


def test_a_wholly_deleted_range_is_zero_rows_without_fail_on_data_loss(
        broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    """startingOffsets 5, endingOffsets 150, the log now starting at 188: with
    failOnDataLoss=false nothing is left to read (Spark returns zero rows), with a
    warning; with failOnDataLoss=true it is data loss. (It raised OptionError "ending
    offset 150 is before the starting offset 188" either way.)"""
    b = broker.bootstrap
    create_topic(b, "many", 1)
    produce(b, "many", [(0, None, b"m", None)] * 200)
    delete_records(b, "many", 0, 188)
    tp = ("many", 0)
    for fail in (False, True):
        ro = ReadOptions(bootstrap=b, subscribe=("many",), starting={tp: 5},
                         ending={tp: 150}, fail_on_data_loss=fail)
        sc = ro.consumer("test")
        try:
            if fail:
                with pytest.raises(DataLossError) as lost:
                    resolve_offsets(sc, ro, [tp])
                assert "below the log start offset 188" in str(lost.value)
                continue
            with caplog.at_level(logging.WARNING, logger="kafkactl.spark"):
                try:
                    start, end = resolve_offsets(sc, ro, [tp])
                except OptionError as e:  # the old failure, as an assertion
                    raise AssertionError(f"failOnDataLoss=false refused: {e}") from e
        finally:
            sc.close()
        assert start == end == {tp: 188}
        assert split_ranges(start, end, None) == []
        assert "offsets 5..149 are all below the log start offset 188" in caplog.text
    # an ending offset before the starting one, both in the log, is still an option error
    ro = ReadOptions(bootstrap=b, subscribe=("many",), starting={tp: 195}, ending={tp: 190},
                     fail_on_data_loss=False)
    sc = ro.consumer("test")
    try:
        with pytest.raises(Exception, match="ending offset 190 is before the starting"):
            resolve_offsets(sc, ro, [tp])
    finally:
        sc.close()


class NoSpark:
    """Stands for the Spark session: the test fails if the loader gets as far as using it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the loader started the Spark job (spark.{name})")


def test_commit_group_with_active_members_is_refused_before_the_job(
        broker: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kafkactl.client.group.consumer import GroupConsumer

    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "cg", 1)
    produce(b, "cg", [(0, None, b"c", None)] * 5)
    member = GroupConsumer("cg", group_id="busy", bootstrap_servers=b,
                           enable_auto_commit=False, session_timeout_ms=120000)
    try:
        wait_until(lambda: bool(member.assignment()), 60, "the member's assignment")
        argv = ["--bootstrap", b, "--topic", "cg", "--output", str(out),
                "--commit-group", "busy"]
        code = load.main(argv, NoSpark())
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == load.EXIT_OUTPUT == 4, line
        assert line == ("kafkactl spark-load: error: --commit-group busy: offsets can only be "
                        "committed if the group 'busy' is inactive, but the current state is "
                        "Stable (1 member). Stop its consumers first, or use another group; "
                        "nothing loaded"), line
        # the CLI with a local master: refused before spark-submit (there is none at this
        # SPARK_HOME: running it would exit 2, "cannot run")
        env = dict(os.environ, SPARK_HOME=str(tmp_path / "no-spark"),
                   XDG_CACHE_HOME=str(tmp_path / "cache"))
        r = zygote.run(["spark-load", "-b", b, "-t", "cg", "-o", str(out), "--commit-group",
                        "busy"], env=env, text=True, timeout=120)
        assert r.returncode == 4, r.stdout + r.stderr
        assert r.stderr.strip().splitlines()[-1] == line, r.stderr
        # a commit refused later (members joined during the run) names the error code
        with pytest.raises(load.LoadError) as refused:
            load.commit_group(b, "busy", {("cg", 0): 5}, "run-1")
        assert "cg-0: UNKNOWN_MEMBER_ID (error 25)" in str(refused.value), refused.value
        assert refused.value.code == load.EXIT_OUTPUT
    finally:
        member.close()
    load.check_commit_group(b, "busy")  # Empty now: allowed
    load.check_commit_group(b, "never-used")  # Dead (does not exist): allowed


@pytest.mark.slow  # one spark-submit run: tens of seconds
def test_cli_damaged_batch_fails_in_one_line(spark_installed: None, broker: Any,
                                             tmp_path: Path) -> None:
    """`kafkactl spark-load` over a damaged batch: exit 5 and the one-line reason naming
    topic, partition and offset, last on stderr; none of Spark's ERROR logs of the failed
    task (each with its Java stack trace: ~200-400 lines) on the terminal."""
    b, out = broker.bootstrap, tmp_path / "out"
    create_topic(b, "dmgcli", 1)
    fill_batches(b, "dmgcli", 6)
    base = damage_batch(broker, "dmgcli", 60)
    cmd = [sys.executable, "-m", "kafkactl", "spark-load", "-b", b, "-t", "dmgcli",
           "-o", str(out), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           *jvm_confs()]
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    text = done.stdout + done.stderr
    frames = [ln for ln in text.splitlines() if ln.startswith("\tat ")]
    assert not frames, f"{len(frames)} Java stack frames:\n{text[-3000:]}"
    assert done.returncode == load.EXIT_DATA_LOSS, text[-3000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"kafkactl spark-load: error: topic dmgcli partition 0: damaged batch at offset "
        f"{base} (CRC mismatch): nothing from offset {base} on can be read; nothing loaded")
    assert not (out / "_kafkactl" / "offsets.json").exists()
    print(text)  # (-s shows what the terminal got)
