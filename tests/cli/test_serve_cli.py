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


def test_a_thread_that_outlives_a_clean_stop_is_named_and_does_not_hang_the_exit() -> None:
    """The exit watchdog serve arms after "broker stopped cleanly": a non-daemon thread that
    never ends (as a call blocked in ZooKeeper would) is named with its stack, and the
    process exits with status 1 instead of waiting for it."""
    import subprocess
    import sys

    program = (
        "import threading, time\n"
        "from kafkactl.cli.serve import _exit_watchdog\n"
        "def stuck_in_a_call():\n"
        "    time.sleep(3600)\n"
        "threading.Thread(target=stuck_in_a_call, name='zk-admin_0').start()\n"
        "_exit_watchdog(0.5)\n")
    r = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1, r.stderr
    assert "has not exited 0.5 s later; still running: zk-admin_0" in r.stderr, r.stderr
    assert "stuck_in_a_call" in r.stderr, r.stderr


def test_a_clean_exit_is_not_held_by_the_watchdog() -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c",
                        "from kafkactl.cli.serve import _exit_watchdog\n_exit_watchdog(60)\n"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "has not exited" not in r.stderr
