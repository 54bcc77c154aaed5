"""The tests' forked brokers (tests/broker_zygote.py) answer like `python -m kafkactl serve`
started with Popen: exit codes, signals, logs."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import broker_zygote
from tests.conftest import BrokerProcess, free_port


@pytest.mark.parametrize("fork", ["1", "0"])
def test_start_stop_kill_and_the_log(fork: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKACTL_TEST_FORK", fork)
    (tmp_path / "data").mkdir()
    b = BrokerProcess(tmp_path / "data", free_port())
    b.start()
    assert isinstance(b.proc, broker_zygote.ForkedBroker) == (fork == "1")
    assert b.stop() == 0
    assert "broker stopped cleanly" in b.log()
    b.start()
    assert b.proc is not None and b.proc.poll() is None
    b.proc.send_signal(signal.SIGKILL)
    assert b.proc.wait(20) == -signal.SIGKILL


def test_a_refused_start_exits_as_the_command_line_does(tmp_path: Path) -> None:
    argv = ["serve", "--data-dir", str(tmp_path / "d"), "--no-such-option"]
    log = tmp_path / "forked.log"
    forked = broker_zygote.spawn(argv, str(log))
    assert forked is not None
    direct = subprocess.run([sys.executable, "-m", "kafkactl", *argv], capture_output=True,
                            text=True, timeout=60)
    assert forked.wait(60) == direct.returncode == 2
    assert log.read_text() == direct.stderr
    running = broker_zygote.spawn(["serve", "--data-dir", str(tmp_path / "e"), "--listen",
                                   f"127.0.0.1:{free_port()}"], str(tmp_path / "e.log"))
    assert running is not None
    with pytest.raises(subprocess.TimeoutExpired):
        running.wait(0.2)
    running.terminate()
    assert running.wait(20) == 0
