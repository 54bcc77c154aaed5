"""`kafkactl serve` that cannot start leaves no data directory of its own making behind,
and never removes one that existed (issue 30, item 10)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests import zygote


def _serve_on_a_taken_port(data_dir: Path) -> tuple[int, str]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = zygote.run(["serve", "-d", str(data_dir), "--listen", f"127.0.0.1:{port}"],
                       text=True, timeout=60)
    return r.returncode, r.stderr


def test_a_failed_start_removes_the_data_dir_it_created(tmp_path: Path) -> None:
    code, err = _serve_on_a_taken_port(tmp_path / "new" / "deeper" / "data")
    assert code == 1, err
    assert "cannot listen on" in err, err
    assert not (tmp_path / "new").exists(), list(tmp_path.rglob("*"))


def test_a_failed_start_keeps_a_data_dir_that_existed(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    code, err = _serve_on_a_taken_port(existing)
    assert code == 1, err
    assert (existing / "keep.txt").read_text() == "mine"
