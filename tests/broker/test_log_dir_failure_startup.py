"""A log dir that cannot be used at start (D6): `kafkactl serve` says which dir and why in
one line and exits 1, with no traceback (it used to die with a Python traceback of the
PermissionError or IsADirectoryError).

Root is not denied by file modes, so the failures are made another way: a directory where
the `.lock` file or a segment is expected, or the broker run as uid 65534 (setpriv) over
dirs that uid owns holding files it may not open."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import zygote
from tests.conftest import free_port

NOBODY = 65534
SEGMENT = "00000000000000000000.log"


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
    r = _serve([a, b])
    _assert_one_line_error(
        r, f"Log directory {b} cannot be used: {b}/.lock: Is a directory (EISDIR).")
    assert not a.exists()  # made by this start, removed by its failure


def test_a_segment_that_cannot_be_opened_is_a_one_line_error(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    (b / "t-0" / SEGMENT).mkdir(parents=True)
    r = _serve([a, b])
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
    """The tester's case: the broker's user may not open a file in the second log dir."""
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
    r = _serve([a, b], as_nobody=True)
    _assert_one_line_error(
        r, f"Log directory {b} cannot be used: {denied}: Permission denied (EACCES).")
