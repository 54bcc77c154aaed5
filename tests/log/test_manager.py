from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafkactl.log.checkpoint import LOG_START_OFFSET_CHECKPOINT, read_checkpoint
from kafkactl.log.errors import LogDirInUseError
from kafkactl.log.manager import CLEAN_SHUTDOWN_MARKER, LogManager
from tests.log.helpers import SMALL, FakeTime, fill, make_batch


def _manager(dirs: list[Path], clock: FakeTime, **cfg: int) -> LogManager:
    m = LogManager(dirs, dataclasses.replace(SMALL, **cfg), time=clock)
    m.load()
    return m


def test_create_shutdown_reload_clean(tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "logs"
    m = _manager([d], clock)
    a = m.create_log("orders", 0)
    b = m.create_log("orders", 1)
    assert m.create_log("orders", 0) is a
    fill(a, 5)
    fill(b, 2)
    a.delete_records_before(3)
    m.shutdown()
    assert json.loads((d / CLEAN_SHUTDOWN_MARKER).read_text()) == {"version": 0,
                                                                    "brokerEpoch": 0}
    assert read_checkpoint(d / "recovery-point-offset-checkpoint") == {
        ("orders", 0): 15, ("orders", 1): 6}
    assert read_checkpoint(d / "log-start-offset-checkpoint") == {
        ("orders", 0): 3, ("orders", 1): 0}
    # indexes trimmed on a clean shutdown
    assert (d / "orders-0" / "00000000000000000000.index").stat().st_size % 8 == 0
    assert (d / "orders-0" / "00000000000000000000.index").stat().st_size < 4096
    m2 = _manager([d], clock)
    assert m2.had_clean_shutdown[d]
    assert not (d / CLEAN_SHUTDOWN_MARKER).exists()  # removed while running
    log = m2.get_log(("orders", 0))
    assert log is not None and log.log_end_offset == 15 and log.log_start_offset == 3
    assert not log.recovery_reports
    assert m2.get_log(("nope", 0)) is None
    m2.shutdown()


def test_unclean_restart_recovers_after_checkpoint(tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "logs"
    m = _manager([d], clock)
    log = m.create_log("t", 0)
    fill(log, 4)
    log.flush()
    m.checkpoint()
    fill(log, 3)
    seg_path = log.active_segment.log_path
    # crash: no shutdown (release the lock the way a dead process would)
    m._release_locks()
    with open(seg_path, "ab") as f:
        f.write(make_batch(2)[:30])
    m2 = _manager([d], clock)
    log2 = m2.get_log(("t", 0))
    assert log2 is not None and not m2.had_clean_shutdown[d]
    assert log2.log_end_offset == 21
    assert log2.recovery_reports and log2.recovery_reports[-1].bytes_truncated == 30
    m2.shutdown()
    log.close()


def test_second_manager_on_same_dir_fails_clearly(tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "logs"
    m = _manager([d], clock)
    with pytest.raises(LogDirInUseError, match="in use by another process"):
        _manager([d], clock)
    # and from another process
    code = (
        "import sys; from pathlib import Path\n"
        "from kafkactl.log import LogManager, LogConfig, LogDirInUseError\n"
        f"m = LogManager([Path({str(d)!r})], LogConfig())\n"
        "try:\n    m.load()\nexcept LogDirInUseError as e:\n    print(e); sys.exit(3)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 3 and "in use" in r.stdout
    m.shutdown()
    m3 = _manager([d], clock)  # free again after shutdown
    m3.shutdown()


def test_flush_dirty_and_retention(tmp_path: Path, clock: FakeTime) -> None:
    d = tmp_path / "logs"
    m = _manager([d], clock, flush_ms=1000, retention_ms=5000, segment_bytes=800,
                 file_delete_delay_ms=0)
    log = m.create_log("t", 0)
    fill(log, 20, ts0=clock.now_ms - 60_000)
    assert m.flush_dirty() == 0
    clock.now_ms += 1000
    assert m.flush_dirty() == 1 and log.recovery_point == log.log_end_offset
    removed = m.run_retention()
    assert removed > 0 and log.log_start_offset > 0
    assert not [p for p in (d / "t-0").iterdir() if p.name.endswith(".deleted")]
    m.shutdown()


def test_delete_log_and_multiple_dirs(tmp_path: Path, clock: FakeTime) -> None:
    d1, d2 = tmp_path / "a", tmp_path / "b"
    m = _manager([d1, d2], clock)
    logs = [m.create_log("t", p) for p in range(4)]
    assert {lg.dir.parent for lg in logs} == {d1, d2}
    fill(logs[0], 2)
    assert m.delete_log("t", 0)
    assert m.get_log(("t", 0)) is None
    assert any(p.name.endswith("-delete") for p in logs[0].dir.parent.iterdir())
    m.run_retention()
    assert not any(p.name.endswith("-delete") for p in logs[0].dir.parent.iterdir())
    m.shutdown()
    m2 = _manager([d1, d2], clock)
    assert sorted(m2.logs) == [("t", 1), ("t", 2), ("t", 3)]
    m2.shutdown()


def test_older_checkpoint_values_never_overwrite_newer(tmp_path: Path, clock: FakeTime) -> None:
    """A worker thread's write of values taken earlier, late behind shutdown's write of
    newer ones, is skipped: the log start offset after DeleteRecords stays."""
    d = tmp_path / "d0"
    m = _manager([d], clock)
    lg = m.create_log("t", 0)
    fill(lg, 10, count=2)
    older = m.checkpoint_values()
    assert lg.delete_records_before(8) >= 0
    newer = m.checkpoint_values()
    assert m.write_checkpoints(newer) == []
    assert m.write_checkpoints(older) == []  # skipped, not an error
    assert read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)[("t", 0)] == 8
    m.shutdown()


def test_a_dir_failing_at_start_is_offline_and_old_replicas_are_not_made_again(
        tmp_path: Path, clock: FakeTime) -> None:
    """KIP-112: the second dir cannot be used (a segment cannot be opened): it is offline,
    nothing of it stays open or locked, and only a new replica gets a log (in an online
    dir). The first dir failing stops the load, as before."""
    from kafkactl.log.errors import LogDirOfflineError
    from kafkactl.log.manager import LogDirUnusableError

    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], clock)
    for p in range(2):
        fill(m.create_log("t", p), 3)
    m.shutdown()
    assert (a / "t-0").is_dir() and (b / "t-1").is_dir()
    segment = next((b / "t-1").glob("*.log"))
    segment.unlink()
    segment.mkdir()  # cannot be opened

    m = _manager([a, b], clock)
    assert set(m.offline) == {b} and m.online_dirs == [a]
    assert "Is a directory (EISDIR)" in m.offline[b]
    assert m.offline_dirs() == {b}
    assert list(m.logs) == [("t", 0)]
    with pytest.raises(LogDirOfflineError, match="offline log dir"):
        m.create_log("t", 1, is_new=False)
    assert not (a / "t-1").exists()
    assert m.create_log("u", 0).dir.parent == a  # new: made in the online dir
    m.shutdown()
    assert (b / CLEAN_SHUTDOWN_MARKER).exists()  # the offline dir is left as it was
    with pytest.raises(LogDirUnusableError, match=f"Log directory {b} cannot be used"):
        _manager([b, a], clock)


def test_a_dir_taken_offline_at_runtime_is_left_for_the_next_start_to_recover(
        tmp_path: Path, clock: FakeTime) -> None:
    """A cluster broker's dir failing while it runs (take_dir_offline): its logs are
    dropped (files kept open, unwritten, until shutdown), old replicas are not made again
    elsewhere, it is not checkpointed and gets no clean-shutdown marker; the next start
    loads it again and recovers its logs with every record."""
    from kafkactl.log.errors import LogDirOfflineError

    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], clock)
    logs = [m.create_log("t", p) for p in range(4)]
    for lg in logs:
        fill(lg, 3)
    on_b = sorted(tp for tp, lg in m.logs.items() if lg.dir.parent == b)
    assert on_b == [("t", 1), ("t", 3)]
    checkpoint_before = (b / "recovery-point-offset-checkpoint").read_bytes() \
        if (b / "recovery-point-offset-checkpoint").exists() else None

    assert m.take_dir_offline(b, "storage error: test") == on_b
    assert m.take_dir_offline(b, "again") == []  # once
    assert m.offline == {b: "storage error: test"} and m.went_offline == {b}
    assert m.online_dirs == [a] and m.offline_dirs() == {b}
    assert sorted(m.logs) == [("t", 0), ("t", 2)]
    with pytest.raises(LogDirOfflineError, match="offline log dir"):
        m.create_log("t", 1, is_new=False)
    assert not (a / "t-1").exists()
    assert m.create_log("u", 0).dir.parent == a
    m.checkpoint()
    after = (b / "recovery-point-offset-checkpoint")
    assert (after.read_bytes() if after.exists() else None) == checkpoint_before
    retired = [logs[1], logs[3]]
    m.shutdown()
    assert all(lg._closed for lg in retired)
    assert (a / CLEAN_SHUTDOWN_MARKER).exists() and not (b / CLEAN_SHUTDOWN_MARKER).exists()

    m = _manager([a, b], clock)
    assert not m.offline and not m.had_clean_shutdown[b]
    assert sorted(m.logs) == [("t", p) for p in range(4)] + [("u", 0)]
    assert all(m.logs[("t", p)].log_end_offset == logs[p].log_end_offset for p in range(4))
    m.shutdown()
