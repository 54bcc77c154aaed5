"""`kafkactl produce` whose topic is deleted while it runs (auto-create off) says so on
stderr as soon as its metadata shows the topic gone, instead of 120 s of silence and then
a timeout that blames an unreachable leader (Java's client logs UNKNOWN_TOPIC_OR_PARTITION
at each refresh). A real broker."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.groups.helpers import read_lines
from tests.polling import wait_until


def _kafkactl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkactl", *args], capture_output=True,
                          text=True, timeout=60)


def test_a_deleted_topic_is_said_at_once(broker_factory: Any) -> None:
    b = broker_factory(auto_create_topics_enable="false")
    assert _kafkactl("topics", "create", "-t", "gone", "-b", b.bootstrap).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "kafkactl", "produce", "-t", "gone",
                             "--linger-ms", "0", "-b", b.bootstrap],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    lines: list[bytes] = []
    read_lines(proc.stderr, lines)
    try:
        proc.stdin.write(b"first\n")
        proc.stdin.flush()
        wait_until(lambda: _kafkactl("topics", "offsets", "-t", "gone", "-b", b.bootstrap)
                   .stdout.strip().endswith(":1"), 60, "the first record")
        r = _kafkactl("topics", "delete", "-t", "gone", "-b", b.bootstrap)
        assert r.returncode == 0, r.stderr
        proc.stdin.write(b"second\n")
        proc.stdin.flush()
        said = b"kafkactl produce: topic gone does not exist (deleted?)"
        wait_until(lambda: any(said in ln for ln in lines), 60,
                   f"produce saying the topic is gone:\n{b''.join(lines).decode()}")
    finally:
        proc.kill()
        proc.wait(30)
    assert sum(said in ln for ln in lines) == 1  # once
