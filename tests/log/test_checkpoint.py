from __future__ import annotations

from pathlib import Path

import pytest

from kafkactl.log.checkpoint import read_checkpoint, write_checkpoint
from kafkactl.log.errors import CheckpointError


def test_format_is_kafkas(tmp_path: Path) -> None:
    p = tmp_path / "recovery-point-offset-checkpoint"
    write_checkpoint(p, {("orders", 1): 42, ("a.b_c-d", 0): 7})
    assert p.read_text() == "0\n2\na.b_c-d 0 7\norders 1 42\n"
    assert read_checkpoint(p) == {("orders", 1): 42, ("a.b_c-d", 0): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_missing_file_is_empty_and_any_whitespace_parses(tmp_path: Path) -> None:
    assert read_checkpoint(tmp_path / "nope") == {}
    p = tmp_path / "c"
    p.write_text("0\n1\ntopic\t3   9\n")
    assert read_checkpoint(p) == {("topic", 3): 9}


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt x 1\n", "0\n1\nt 0\n"])
def test_malformed(tmp_path: Path, text: str) -> None:
    p = tmp_path / "c"
    p.write_text(text)
    with pytest.raises(CheckpointError):
        read_checkpoint(p)


@pytest.mark.parametrize("data", [b"\xff\xfe\x00garbage", b"0\n1\n\xc3\x28 0 5\n",
                                  b"0\n1\nt\x00 0 5\n"])
def test_non_utf8_or_binary_is_a_checkpoint_error(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "c"
    p.write_bytes(data)
    with pytest.raises(CheckpointError):
        read_checkpoint(p)


def test_cleaner_treats_a_damaged_checkpoint_as_absent(tmp_path: Path) -> None:
    from kafkactl.log.cleaner import LogCleaner
    from kafkactl.log.config import LogConfig
    from kafkactl.log.log import Log
    from tests.log.helpers import FakeTime, fill

    lg = Log(tmp_path / "orders-0", LogConfig(), time=FakeTime())
    fill(lg, 3)
    cleaner = LogCleaner()
    cleaner.checkpoint_path(lg).write_bytes(b"0\n1\norders 0 \xff\xfe\n")
    assert cleaner.first_dirty_offset(lg) == 0
    lg.close()


def test_salvage_keeps_the_readable_lines(tmp_path: Path) -> None:
    from kafkactl.log.checkpoint import checkpoint_problem, salvage_checkpoint

    p = tmp_path / "c"
    p.write_bytes(b"0\n3\norders 0 42\n\xff\xfe 1 7\nb 2 x\nc 1 9\n")
    assert "not text" in (checkpoint_problem(p) or "")
    assert salvage_checkpoint(p) == {("orders", 0): 42, ("c", 1): 9}
    write_checkpoint(p, {("a", 0): 1})
    assert checkpoint_problem(p) is None
