"""`kafkactl consume -G`: a second SIGTERM while the final commit waits on the broker does
not cut the shutdown short: the commit and the LeaveGroup complete and the summary prints
(as a JVM's shutdown hook runs to its end)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.group.group_admin import GroupAdmin
from kafkactl.client.kafka_client import KafkaClient
from tests import zygote
from tests.groups.helpers import offsets_show, read_lines, wait_until
from tests.sockets import queued_requests


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_a_second_sigterm_does_not_cut_the_final_commit_and_leave(broker_factory: Any,
                                                                   tmp_path: Path) -> None:
    b = broker_factory(group_initial_rebalance_delay_ms="0")
    assert zygote.run(["topics", "create", "-t", "k3", "--partitions", "1", "-b",
                       b.bootstrap], timeout=60).returncode == 0
    assert zygote.run(["produce", "-t", "k3", "-b", b.bootstrap],
                      input=b"".join(b"r%d\n" % i for i in range(5)), timeout=60
                      ).returncode == 0
    out = tmp_path / "o"
    # no auto-commit, no heartbeat and a fetch parked at the broker for the test's length:
    # once the records are printed, the consumer sends nothing until it is stopped
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkactl", "consume", "-G", "dbl4", "-t", "k3", "-o",
         "earliest", "-b", b.bootstrap, "-X", "auto.commit.interval.ms=60000",
         "-X", "fetch.wait.max.ms=60000", "-X", "heartbeat.interval.ms=60000",
         "-X", "session.timeout.ms=120000"],
        stdout=open(out, "wb"), stderr=subprocess.PIPE)  # noqa: SIM115
    assert proc.stderr is not None
    errs: list[bytes] = []
    reader = read_lines(proc.stderr, errs)
    assert b.proc is not None
    try:
        wait_until(lambda: out.read_bytes().count(b"\n") == 5, 60, "the 5 records printed")
        wait_until(lambda: queued_requests(b.port) == 0, 20, "the broker read every request")
        b.proc.send_signal(signal.SIGSTOP)
        try:
            proc.send_signal(signal.SIGTERM)
            wait_until(lambda: queued_requests(b.port) >= 1, 20,
                       "the final commit waiting at the stopped broker")
            proc.send_signal(signal.SIGTERM)
            wait_until(lambda: proc.poll() is not None or any(b"stopping" in e for e in errs),
                       20, "the second SIGTERM handled")
        finally:
            b.proc.send_signal(signal.SIGCONT)
        assert proc.wait(60) == 0, errs
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    text = b"".join(errs).decode()
    assert "Processed a total of 5 messages" in text, text
    assert offsets_show(b.bootstrap, "dbl4")[("k3", 0)]["current_offset"] == 5
    client = KafkaClient(b.bootstrap)
    try:  # it left the group (not waiting out its 120 s session)
        assert GroupAdmin(client).describe_group("dbl4").state == "Empty"
    finally:
        client.close()


def test_zookeeper_only_options_without_zookeeper_are_usage_errors() -> None:
    for args in (["--offsets-storage", "kafka"], ["--offsets-storage", "zookeeper"],
                 ["--offsets-storage", "kafka", "--dual-commit"], ["--dual-commit"]):
        r = zygote.run(["consume", "-G", "g", "-t", "t", "-b", "127.0.0.1:1", *args],
                       text=True, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        assert ("only with --zookeeper" in r.stderr
                or "--dual-commit goes with --offsets-storage kafka" in r.stderr), r.stderr
