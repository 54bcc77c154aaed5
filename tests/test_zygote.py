"""The tests' forked kafkactl processes (tests/zygote.py) answer like `python -m kafkactl`
started with Popen: exit codes, signals, logs, standard streams, environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import zygote
from tests.conftest import BrokerProcess, free_port


@pytest.mark.parametrize("fork", ["1", "0"])
def test_start_stop_kill_and_the_log(fork: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKACTL_TEST_FORK", fork)
    (tmp_path / "data").mkdir()
    b = BrokerProcess(tmp_path / "data", free_port())
    b.start()
    assert isinstance(b.proc, zygote.Forked) == (fork == "1")
    assert b.stop() == 0
    assert "broker stopped cleanly" in b.log()
    b.start()
    assert b.proc is not None and b.proc.poll() is None
    b.proc.send_signal(signal.SIGKILL)
    assert b.proc.wait(20) == -signal.SIGKILL


def test_a_refused_start_exits_as_the_command_line_does(tmp_path: Path) -> None:
    argv = ["serve", "--data-dir", str(tmp_path / "d"), "--no-such-option"]
    log = tmp_path / "forked.log"
    forked = zygote.spawn(argv, str(log))
    if forked is None:
        pytest.skip("KAFKACTL_TEST_FORK=0: no forked brokers to compare")
    direct = subprocess.run([sys.executable, "-m", "kafkactl", *argv], capture_output=True,
                            text=True, timeout=60)
    assert forked.wait(60) == direct.returncode == 2
    assert log.read_text() == direct.stderr
    running = zygote.spawn(["serve", "--data-dir", str(tmp_path / "e"), "--listen",
                                   f"127.0.0.1:{free_port()}"], str(tmp_path / "e.log"))
    assert running is not None
    with pytest.raises(subprocess.TimeoutExpired):
        running.wait(0.2)
    running.terminate()
    assert running.wait(20) == 0


@pytest.mark.parametrize("argv", [["--version"], ["no-such-command"], ["produce", "--help"],
                                  ["dump-log", "--files", "/no/such/segment.log"],
                                  ["topics", "list", "-b", "127.0.0.1:1"]])
def test_a_forked_command_answers_as_a_fresh_interpreter(argv: list[str]) -> None:
    forked = zygote.run(argv, text=True, timeout=60)
    fresh = subprocess.run([sys.executable, "-m", "kafkactl", *argv], capture_output=True,
                           text=True, timeout=60)
    assert (forked.returncode, forked.stdout, forked.stderr) == \
        (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_forked_command_reads_stdin_and_is_killed_at_its_timeout(
        module_broker: BrokerProcess, tmp_path: Path) -> None:
    b = module_broker.bootstrap
    lines = [f"line {i} " + "x" * (i * 37 % 300) for i in range(500)]
    done = zygote.run(["produce", "-b", b, "-t", "zygote-stdin"], input="\n".join(lines) + "\n",
                      text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = zygote.run(["consume", "-b", b, "-t", "zygote-stdin", "--from-beginning", "-e",
                      "-q"], timeout=60)
    assert out.returncode == 0 and out.stdout.decode().splitlines() == lines, out.stderr
    z = zygote._the_zygote()
    before = set() if z is None else set(z.exits)
    with pytest.raises(subprocess.TimeoutExpired):  # no -e: waits for records forever
        zygote.run(["consume", "-b", b, "-t", "zygote-stdin", "-q"], timeout=2)
    if z is not None:  # the killed command was reaped, with SIGKILL
        assert -signal.SIGKILL in [code for pid, code in z.exits.items() if pid not in before]


def test_a_forked_command_sees_its_environment_and_directory(tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    here = zygote.run(["dump-log", "00000000000000000000.log"], cwd=tmp_path, text=True,
                      timeout=60)
    assert here.returncode == 0 and "Dumping 00000000000000000000.log" in here.stdout
    (tmp_path / "plugin_here.py").write_text("def partition(*args):\n    return 0\n")
    produce = ["produce", "-b", "127.0.0.1:1", "-t", "t", "--partitioner",
               "plugin_here:partition", "-X", "delivery.timeout.ms=300",
               "-X", "request.timeout.ms=200"]
    unseen = zygote.run(produce, input="v\n", text=True, timeout=60)
    assert unseen.returncode == 2 and "cannot import partitioner module 'plugin_here'" \
        in unseen.stderr
    # PYTHONPATH is read when the interpreter starts: the fork is given the child's own
    seen = zygote.run(produce, input="v\n", env={**os.environ, "PYTHONPATH": str(tmp_path)},
                      text=True, timeout=60)
    assert seen.returncode == 1 and "no broker answered" in seen.stderr, seen.stderr
