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
