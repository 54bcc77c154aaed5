"""Open files: the broker raises its soft limit to the hard one at start, warns when the
segments on disk leave too little room, and a segment keeps one descriptor (its indexes
are mapped without one)."""

from __future__ import annotations

import logging
import os
import resource
from pathlib import Path

import pytest

from kafkactl.broker import open_files
from kafkactl.broker.topic_admin import TopicError
from kafkactl.log.config import LogConfig
from kafkactl.log.manager import LogManager
from tests.conftest import BrokerProcess, free_port


def _open_under(root: Path) -> list[str]:
    """The files below `root` this process holds open (by what each descriptor points at:
    other threads of the test process open and close descriptors meanwhile)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith(str(root) + "/"):
            out.append(target)
    return out


def test_a_segment_keeps_one_open_file(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    lm.load()
    for p in range(20):
        lm.create_log("t", p)
    # the .log of each partition; .index/.timeindex are mapped only (and the log dir's
    # .lock is the dir's, not a segment's)
    held = [f for f in _open_under(tmp_path) if Path(f).parent != tmp_path]
    assert sorted(Path(f).name for f in held) == ["00000000000000000000.log"] * 20, held
    lm.shutdown()
    assert [f for f in _open_under(tmp_path) if Path(f).parent != tmp_path] == []


def test_segments_on_disk_counts_every_log_file(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    lm.load()
    for p in range(7):
        lm.create_log("t", p)
    lm.shutdown()
    assert open_files.segments_on_disk([tmp_path]) == 7


def test_start_warns_when_the_limit_is_too_low(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    lm = LogManager([tmp_path], LogConfig())
    lm.load()
    for p in range(30):
        lm.create_log("t", p)
    lm.shutdown()
    monkeypatch.setattr(open_files.resource, "getrlimit", lambda _r: (520, 520))
    with caplog.at_level(logging.WARNING):
        assert open_files.check_start_limit([tmp_path]) == 30
    assert "30 segments" in caplog.text and "ulimit -n" in caplog.text
    caplog.clear()
    monkeypatch.setattr(open_files.resource, "getrlimit", lambda _r: (4096, 4096))
    with caplog.at_level(logging.WARNING):
        open_files.check_start_limit([tmp_path])
    assert "ulimit" not in caplog.text


def test_create_refuses_partitions_the_limit_cannot_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(open_files.resource, "getrlimit", lambda _r: (1024, 1024))
    with pytest.raises(TopicError, match="open files limit 1024"):
        open_files.check_open_file_room(1000)
    open_files.check_open_file_room(10)


def _limits_of(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open files line")


def test_the_broker_raises_its_soft_limit_to_the_hard_one(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 1024:
        pytest.skip("needs a finite hard limit above 1024")
    data = tmp_path / "data"
    data.mkdir()
    b = BrokerProcess(data, free_port())
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        b.start()  # inherits soft 1024
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert b.proc is not None
        assert _limits_of(b.proc.pid) == (hard, hard)
    finally:
        b.stop()


def test_start_warns_near_max_map_count(tmp_path: Path,
                                        caplog: pytest.LogCaptureFixture) -> None:
    limit = tmp_path / "max_map_count"
    limit.write_text("4096\n")
    with caplog.at_level(logging.WARNING):
        open_files.check_map_count(2000, limit)
    assert "vm.max_map_count is 4096" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        open_files.check_map_count(10, limit)
    assert not caplog.text
