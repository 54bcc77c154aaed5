"""A log dir that cannot be used at start. The first of log.dirs (it holds the broker's
own metadata) or the last one left: `kafkactl serve` says which dir and why in one line and
exits 1, with no traceback (it used to die with a Python traceback of the PermissionError
or IsADirectoryError). Any other: it is offline (KIP-112) and the broker serves the rest.

Root is not denied by file modes, so the failures are made another way: a directory where
the `.lock` file or a segment is expected, or the broker run as uid 65534 (setpriv) over
dirs that uid owns holding files it may not open."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.protocol.api_keys import ApiKey
from kafkactl.protocol.errors import ErrorCode
from tests import zygote
from tests.broker.wire import Wire, batch
from tests.conftest import free_port

NOBODY = 65534
SEGMENT = "00000000000000000000.log"
LOCK = ".lock"


def _serve(dirs: list[Path], *, as_nobody: bool = False) -> subprocess.CompletedProcess[str]:
    argv = ["serve", "--override", f"log.dirs={','.join(map(str, dirs))}",
            "--listen", f"127.0.0.1:{free_port()}"]
    if not as_nobody:
        return zygote.run(argv, text=True, timeout=60, cwd=dirs[0].parent)
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, "-m", "kafkactl", *argv],
        capture_output=True, text=True, timeout=60, cwd=dirs[0].parent,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def _assert_one_line_error(r: subprocess.CompletedProcess[str], expected: str) -> None:
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    errors = [line for line in r.stderr.splitlines() if "error" in line.lower()]
    assert errors == [f"error: {expected}"], r.stderr


def test_a_lock_file_that_cannot_be_opened_is_a_one_line_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    (b / ".lock").mkdir(parents=True)
    r = _serve([b, a])
    _assert_one_line_error(
        r, f"Log directory {b} cannot be used: {b}/.lock: Is a directory (EISDIR).")
    assert not a.exists()  # made by this start, removed by its failure


def test_a_segment_that_cannot_be_opened_is_a_one_line_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    (b / "t-0" / SEGMENT).mkdir(parents=True)
    r = _serve([b, a])
    _assert_one_line_error(
        r, f"Log directory {b} cannot be used: {b}/t-0/{SEGMENT}: Is a directory (EISDIR).")


@pytest.fixture
def nobody_dirs() -> Iterator[Path]:
    """A directory uid 65534 can reach (pytest's tmp_path is root's alone), skipping when
    setpriv is missing or that uid cannot run this interpreter and import kafkactl."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run the broker as another uid")
    probe = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, "-c", "import kafkactl.cli.app"], capture_output=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, cwd="/")
    if probe.returncode != 0:
        pytest.skip(f"uid {NOBODY} cannot import kafkactl: {probe.stderr[-300:]!r}")
    base = Path(tempfile.mkdtemp(prefix="kafkactl-nobody-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _owned_by_nobody(*paths: Path) -> None:
    for p in paths:
        p.mkdir(parents=True, exist_ok=True)
        os.chown(p, NOBODY, NOBODY)


@pytest.mark.parametrize("damage", ["lock", "partition dir", "read-only segment"])
def test_permission_denied_in_a_log_dir_is_a_one_line_error(nobody_dirs: Path,
                                                            damage: str) -> None:
    """The tester's case (then in the second log dir): the broker's user may not open a
    file in the first log dir."""
    a, b = nobody_dirs / "a", nobody_dirs / "b"
    _owned_by_nobody(a, b)
    if damage == "lock":
        (b / ".lock").touch(mode=0o600)  # root's
        denied = b / ".lock"
    elif damage == "partition dir":
        (b / "t-0").mkdir(mode=0o700)  # root's
        denied = b / "t-0"
    else:
        _owned_by_nobody(b / "t-0")
        (b / "t-0" / SEGMENT).touch(mode=0o644)  # root's: readable, not writable
        denied = b / "t-0" / SEGMENT
    r = _serve([b, a], as_nobody=True)
    _assert_one_line_error(
        r, f"Log directory {b} cannot be used: {denied}: Permission denied (EACCES).")


def test_a_failed_second_log_dir_is_offline_and_the_broker_serves_the_rest(
        broker_factory: Any, tmp_path: Path) -> None:
    """KIP-112: the partitions of a dir that fails at start are offline (no leader,
    KAFKA_STORAGE_ERROR; no empty log made for them in another dir), the others are
    served, DescribeLogDirs says which dir; repaired and restarted, nothing was lost. A
    topic deleted meanwhile is deleted from the repaired dir at that restart."""
    from kafka.admin import KafkaAdminClient

    a, b = tmp_path / "a", tmp_path / "b"
    broker = broker_factory(log_dirs=f"{a},{b}")
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("t", 4)["error_code"] == 0
        assert w.create_topic("d", 4)["error_code"] == 0
        for p in range(4):
            assert w.produce("t", batch([b"p%d-%d" % (p, i) for i in range(10)]),
                             partition=p)["error_code"] == 0
    in_b = sorted(p for p in range(4) if (b / f"t-{p}").is_dir())
    in_a = sorted(set(range(4)) - set(in_b))
    assert in_a and in_b and any((b / f"d-{p}").is_dir() for p in range(4))
    assert broker.stop() == 0
    (b / LOCK).unlink()
    (b / LOCK).mkdir()  # the dir cannot be locked: it cannot be used
    broker.start()
    assert f"Log directory {b} cannot be used: {b}/{LOCK}: Is a directory (EISDIR). It is " \
        "offline" in broker.log()
    with Wire(broker.bootstrap) as w:
        meta = w.request(ApiKey.METADATA, 12, {
            "topics": [{"name": "t", "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
        parts = {p["partition_index"]: p for p in meta["topics"][0]["partitions"]}
        for p in in_b:
            assert (parts[p]["error_code"], parts[p]["leader_id"]) == (
                ErrorCode.LEADER_NOT_AVAILABLE, -1)
            assert parts[p]["offline_replicas"] == parts[p]["replica_nodes"]
            assert w.produce("t", batch([b"x"]), partition=p)["error_code"] == \
                ErrorCode.KAFKA_STORAGE_ERROR
        for p in in_a:
            assert parts[p]["leader_id"] >= 0 and not parts[p]["offline_replicas"]
            assert w.produce("t", batch([b"after"]), partition=p)["base_offset"] == 10
    assert not any((a / f"t-{p}").exists() for p in in_b)  # nothing made in place of them
    with Wire(broker.bootstrap) as w:
        deleted = w.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["d"], "timeout_ms": 5000})
        assert deleted["responses"][0]["error_code"] == 0
    assert not any(x.name.startswith("d-") and not x.name.endswith("-delete")
                   for x in a.iterdir())
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        [answer] = admin.describe_log_dirs()
    finally:
        admin.close()
    codes = {Path(d["log_dir"]): (d["error_code"], d["total_bytes"] > 0)
             for d in answer["log_dirs"]}
    assert codes == {a.absolute(): (0, True), b.absolute(): (ErrorCode.KAFKA_STORAGE_ERROR,
                                                             False)}

    assert broker.stop() == 0
    (b / LOCK).rmdir()  # repaired
    broker.start()
    with Wire(broker.bootstrap) as w:
        for p in in_b:
            fetched = w.request(ApiKey.FETCH, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "topics": [{"topic": "t", "partitions": [
                    {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                     "current_leader_epoch": -1, "log_start_offset": -1,
                     "last_fetched_epoch": -1}]}],
                "forgotten_topics_data": [], "rack_id": ""})
            part = fetched["responses"][0]["partitions"][0]
            assert (part["error_code"], part["high_watermark"]) == (0, 10)
    assert not any(x.name.startswith("d-") and not x.name.endswith("-delete")
                   for x in b.iterdir())  # the deletion finished in the repaired dir
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("d", 1)["error_code"] == 0  # the name is free again


def test_a_file_where_a_partition_dir_should_be_is_that_partition_offline(
        broker_factory: Any, tmp_path: Path) -> None:
    """The tester's case: a regular file named like a partition's dir. That partition is
    offline (KAFKA_STORAGE_ERROR, one ERROR line); the broker serves the others (it stopped
    with 'File exists')."""
    a, b = tmp_path / "a", tmp_path / "b"
    broker = broker_factory(log_dirs=f"{a},{b}")
    with Wire(broker.bootstrap) as w:
        assert w.create_topic("t", 2)["error_code"] == 0
    assert (a / "t-0").is_dir() and (b / "t-1").is_dir()
    assert broker.stop() == 0
    shutil.rmtree(b / "t-1")
    (b / "t-1").write_bytes(b"junk\n")
    broker.start()
    assert f"cannot host t-1: {b}/t-1: File exists (EEXIST)" in broker.log()
    with Wire(broker.bootstrap) as w:
        assert w.produce("t", batch([b"x"]), partition=1)["error_code"] == \
            ErrorCode.KAFKA_STORAGE_ERROR
        assert w.produce("t", batch([b"y"]), partition=0)["error_code"] == 0


def test_a_log_dir_listed_twice_is_named_as_such(tmp_path: Path) -> None:
    """Kafka's "Duplicate log directory found" (it said "in use by another process")."""
    a = tmp_path / "a"
    r = _serve([a, tmp_path / "x" / ".." / "a"])
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "Duplicate log directory found: " in r.stderr and "in use" not in r.stderr, r.stderr
