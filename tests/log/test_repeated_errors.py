"""Errors that repeat with every retry are rate-limited in the broker log like the
"Storage error in log dir" line (StorageErrorLog): the first at ERROR at once, then at
most one WARNING per 30 s per key with the count, and the count not reported yet when the
key works again. Here RepeatedErrorLog itself (a fake clock, no sleeps), and a segment
whose failed write cannot be cut off (a read-only file system: EROFS, simulated by
making os.pwrite and os.ftruncate fail as the kernel does after `errors=remount-ro`)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactl.log import segment as segment_module
from kafkactl.log.errors import KafkaStorageError
from kafkactl.log.log import Log
from kafkactl.log.log_dir_failure import STORAGE_ERROR_REPEAT_S, RepeatedErrorLog
from tests.log.helpers import SMALL, Clock, FakeTime, make_batch

LOGGER = "kafkactl.test.repeated"



def _records(caplog: pytest.LogCaptureFixture, logger: str, level: int = logging.INFO
             ) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name == logger and r.levelno >= level]


def test_first_error_at_once_then_one_summary_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = Clock()
    errors = RepeatedErrorLog(logging.getLogger(LOGGER), clock=clock)
    assert errors.repeat_s == STORAGE_ERROR_REPEAT_S == 30.0
    assert not errors.failing
    errors.failed("/d", "cannot do %s: %s", "it", "Read-only file system")
    # the first one is never held back
    assert _records(caplog, LOGGER) == [(logging.ERROR, "cannot do it: Read-only file system")]
    assert errors.failing
    for _ in range(299):  # ten a second for 29.9 s: DEBUG only
        clock.now += 0.1
        errors.failed("/d", "cannot do %s: %s", "it", "Read-only file system")
    assert len(_records(caplog, LOGGER)) == 1
    assert len(_records(caplog, LOGGER, logging.DEBUG)) == 300
    clock.now += 0.1  # 30 s after the first report
    errors.failed("/d", "cannot do %s: %s", "that", "Read-only file system")
    assert _records(caplog, LOGGER)[1:] == [
        (logging.WARNING, "cannot do that: Read-only file system (again; 299 more like it "
                          "in the 30 s since the last report)")]
    clock.now += 29.0
    errors.failed("/d", "cannot do %s", "it")
    clock.now += 1.0
    errors.failed("/d", "cannot do %s", "it")
    assert _records(caplog, LOGGER)[2:] == [
        (logging.WARNING, "cannot do it (again; 1 more like it in the 30 s since the last "
                          "report)")]


def test_keys_are_independent_and_recovery_tells_the_count_and_resets(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = Clock()
    errors = RepeatedErrorLog(logging.getLogger(LOGGER), clock=clock)
    for _ in range(5):
        errors.failed("/a", "a failed")
        errors.failed("/b", "b failed")
    assert _records(caplog, LOGGER) == [(logging.ERROR, "a failed"), (logging.ERROR, "b failed")]
    errors.recovered("/a", "%s works again", "/a")
    errors.recovered("/c", "%s works again", "/c")  # never failed: nothing said
    assert _records(caplog, LOGGER)[2:] == [
        (logging.INFO, "/a works again (after 4 more errors since the last report)")]
    assert errors.failing  # /b still fails
    errors.failed("/a", "a failed")  # a new first error: at once
    assert _records(caplog, LOGGER)[3:] == [(logging.ERROR, "a failed")]
    errors.recovered("/a", "%s works again", "/a")
    errors.recovered("/b", "%s works again", "/b")
    assert _records(caplog, LOGGER)[4:] == [
        (logging.INFO, "/a works again"),
        (logging.INFO, "/b works again (after 4 more errors since the last report)")]
    assert not errors.failing


def test_thousands_of_keys_failing_together_stay_one_line_each_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = Clock()
    errors = RepeatedErrorLog(logging.getLogger(LOGGER), clock=clock)
    for _second in range(60):
        for p in range(2000):  # one log dir, 2000 partitions, a retry each per second
            errors.failed("/mnt", "p%d failed", p)
        clock.now += 1.0
    lines = _records(caplog, LOGGER)
    assert lines == [(logging.ERROR, "p0 failed"),
                     (logging.WARNING, "p0 failed (again; 59999 more like it in the 30 s "
                                       "since the last report)")]


@contextlib.contextmanager
def _read_only_fs() -> Iterator[None]:
    """Writes and truncates fail with EROFS, as on an ext4 remounted read-only."""
    def fail(*_args: object) -> int:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    real_pwrite, real_ftruncate = os.pwrite, os.ftruncate
    os.pwrite, os.ftruncate = fail, fail  # type: ignore[assignment]
    try:
        yield
    finally:
        os.pwrite, os.ftruncate = real_pwrite, real_ftruncate


SEGMENT_LOGGER = "kafkactl.log.segment"


def test_failed_cut_backs_are_rate_limited_per_log_dir(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A produce retried ten times a second for two minutes to two partitions of a
    read-only log dir: one ERROR, one WARNING per 30 s, not one line per retry."""
    caplog.set_level(logging.DEBUG, logger=SEGMENT_LOGGER)
    clock = Clock()
    monkeypatch.setattr(segment_module, "cut_back_errors",
                        RepeatedErrorLog(logging.getLogger(SEGMENT_LOGGER), clock=clock))
    log_dir = tmp_path / "mnt"
    logs = [Log(log_dir / f"r-{p}", SMALL, time=FakeTime()) for p in (0, 1)]
    for log in logs:
        log.append(make_batch())
    sizes = [log.active_segment.size for log in logs]
    with _read_only_fs():
        for _tenth in range(1200):
            for log in logs:
                with pytest.raises(KafkaStorageError, match="Read-only file system"):
                    log.append(make_batch())
            clock.now += 0.1
    lines = _records(caplog, SEGMENT_LOGGER)
    first = (f"cannot cut a failed write off {logs[0].active_segment.log_path} at "
             f"{sizes[0]} bytes: Read-only file system")
    assert lines[0] == (logging.ERROR, first)  # the first one, as before, at once
    assert [lvl for lvl, _m in lines] == [logging.ERROR] + [logging.WARNING] * 3
    assert all("Read-only file system (again; " in m and "in the 30 s since the last report"
               in m for _l, m in lines[1:])
    counted = sum(int(m.split("again; ")[1].split()[0]) for _l, m in lines[1:])
    assert len(_records(caplog, SEGMENT_LOGGER, logging.DEBUG)) == 2400

    # the file system is writable again: the next append works, said once, with the
    # errors not reported yet (none is lost: 4 lines + those counted + those = 2400)
    caplog.clear()
    for log in logs:
        log.append(make_batch())
    unreported = 2400 - len(lines) - counted
    assert unreported > 0
    assert _records(caplog, SEGMENT_LOGGER) == [
        (logging.INFO, f"segments in {log_dir} take writes again (after {unreported} more "
                       "errors since the last report)")]
    assert not segment_module.cut_back_errors.failing
    for log in logs:
        assert [b.base_offset for b in log.iter_batches()] == [0, 3]
        log.close()
