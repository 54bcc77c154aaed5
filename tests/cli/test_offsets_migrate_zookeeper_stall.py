"""`kafkactl offsets migrate` when ZooKeeper stalls mid-run (its process SIGSTOPped): a stall
kazoo notices (the connection dropped: ConnectionLoss) is ridden out, the run finishing
once ZooKeeper answers again; a stall longer than --zookeeper-timeout ends the run with
one `error:` line naming ZooKeeper and how far it got, after the groups already done
were printed, and no traceback.

Deterministic by construction: each group is printed (and flushed) as soon as it is done,
before the next group is read from ZooKeeper, and the command's stdout is a pipe of one
page that the test does not read while the first group's report (larger than the pipe)
is being written. So once the broker holds the first group's offsets, the command is
held before reading the second group from ZooKeeper: ZooKeeper is stopped exactly there,
then the pipe is drained."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactl.client.consumer import SimpleConsumer
from kafkactl.client.group.group_admin import GroupAdmin
from kafkactl.cluster import zookeeper as zkmod
from tests import zygote
from tests.cluster.zk import ZooKeeperServer, available
from tests.polling import wait_until

LONG = "t" * 200  # a topic name that makes the first group's report larger than the pipe
BIG_PARTITIONS = 30
SMALL_GROUPS = 200
PIPE_SIZE = 4096


@pytest.fixture
def env(broker_factory: Any, tmp_path: Path) -> Iterator[tuple[ZooKeeperServer, Any, str]]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path / "zk")
    server.start()
    try:
        chroot = f"{server.connect}/stall-{uuid.uuid4().hex[:8]}"
        b = broker_factory(zookeeper_connect=chroot, group_initial_rebalance_delay_ms="0")
        zk = zkmod.connect(chroot, timeout_s=10)
        try:
            wait_until(lambda: zk.exists("/brokers/ids/0"), 30, "broker registration")
            for topic, partitions in ((LONG, BIG_PARTITIONS), ("small", 1)):
                r = zygote.run(["topics", "create", "-t", topic, "--partitions", str(partitions),
                                "-b", b.bootstrap], text=True, timeout=60)
                assert r.returncode == 0, r.stderr
            for p in range(BIG_PARTITIONS):
                zk.create(f"/consumers/a-big/offsets/{LONG}/{p}", b"0", makepath=True)
            for i in range(SMALL_GROUPS):
                zk.create(f"/consumers/b-{i:03d}/offsets/small/0", b"0", makepath=True)
        finally:
            zkmod.close(zk)
        yield server, b, chroot
    finally:
        assert server.proc is not None
        if server.proc.poll() is None:
            os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()


def broker_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    sc = SimpleConsumer(bootstrap)
    try:
        return {tp: o for tp, o in GroupAdmin(sc.client).fetch_offsets(group).items()
                if o >= 0}
    finally:
        sc.close()


class Migration:
    """`kafkactl offsets migrate --all-groups` with its stdout a one-page pipe, read only
    when `drain` is called."""

    def __init__(self, tmp_path: Path, chroot: str, bootstrap: str, *extra: str) -> None:
        r, w = os.pipe()
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self.err_path = tmp_path / "migrate.err"
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kafkactl", "offsets", "migrate", "--zookeeper",
                 chroot, "-b", bootstrap, "--all-groups", *extra],
                stdout=w, stderr=err, stdin=subprocess.DEVNULL)
        os.close(w)
        self._r = r
        self._out = bytearray()
        self._reader: threading.Thread | None = None

    def drain(self) -> None:
        def read() -> None:
            while chunk := os.read(self._r, 65536):
                self._out += chunk
            os.close(self._r)
        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()

    def finish(self, timeout: float) -> tuple[int, str, str]:
        if self._reader is None:
            self.drain()
        assert self._reader is not None
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        return code, self._out.decode(), self.err_path.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def zookeeper_sockets(pid: int, port: int) -> set[str]:
    """The inodes of the process's TCP sockets connected to `port` on the loopback."""
    mine = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            mine.add(link[len("socket:["):-1])
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[9] in mine:
            out.add(fields[9])
    return out


def held_after_first_group(m: Migration, bootstrap: str) -> None:
    """Wait until the first group is migrated: from then on the command is held writing
    its report, before it reads the next group from ZooKeeper."""
    wait_until(lambda: m.proc.poll() is not None or
               len(broker_offsets(bootstrap, "a-big")) == BIG_PARTITIONS, 120,
               "the first group's offsets on the broker")
    assert m.proc.poll() is None, "the command ended before ZooKeeper was stopped"


def test_zookeeper_that_stops_answering_ends_the_run_with_one_line(
        env: Any, tmp_path: Path) -> None:
    server, b, chroot = env
    m = Migration(tmp_path, chroot, b.bootstrap, "--zookeeper-timeout", "5")
    try:
        held_after_first_group(m, b.bootstrap)
        os.kill(server.proc.pid, signal.SIGSTOP)
        code, out, err = m.finish(120)
    finally:
        m.kill()
        os.kill(server.proc.pid, signal.SIGCONT)
    assert code == 1, out + err
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith(
        f"error: ZooKeeper at {chroot} did not answer within 5 s (listing "
        "/consumers/b-000/offsets: "), err
    assert "stopped at group b-000, after 1 of 201 group(s), reported above; run it " \
           "again to finish" in err, err
    assert f"group a-big: {BIG_PARTITIONS} migrated" in out.splitlines(), out
    assert "b-000" not in out
    assert broker_offsets(b.bootstrap, "b-000") == {}


@pytest.mark.parametrize("beyond_session", [False, True],
                         ids=["connection-lost", "session-expired"])
def test_a_zookeeper_stall_is_ridden_out(env: Any, tmp_path: Path,
                                         beyond_session: bool) -> None:
    """Stopped until kazoo gave its connection up (no answer to its pings within two
    thirds of the 10 s session: the request in flight fails with ConnectionLoss), or
    beyond the session: until kazoo has also given up two reconnection attempts (each
    waits the session timeout for the server's handshake), so ZooKeeper expires the
    session when it resumes."""
    server, b, chroot = env
    # (the default --zookeeper-timeout, 30 s, rides out the first; the second, about
    # 17 s of stall and a new session, gets room to spare)
    extra = ("--zookeeper-timeout", "300") if beyond_session else ()
    m = Migration(tmp_path, chroot, b.bootstrap, *extra)
    try:
        held_after_first_group(m, b.bootstrap)
        before = zookeeper_sockets(m.proc.pid, server.port)
        assert before, "the command has no connection to ZooKeeper"
        os.kill(server.proc.pid, signal.SIGSTOP)
        m.drain()  # the command goes on to read the next group: no answer
        seen = set(before)

        def given_up() -> bool:
            if m.proc.poll() is not None:
                return True
            now = zookeeper_sockets(m.proc.pid, server.port)
            seen.update(now)
            if before & now:
                return False
            # each reconnection attempt is a new socket: the second one shows that the
            # first waited out its session-long handshake
            return not beyond_session or len(seen - before) >= 2
        wait_until(given_up, 120, "kazoo giving the connection up")
        os.kill(server.proc.pid, signal.SIGCONT)
        code, out, err = m.finish(300)
    finally:
        m.kill()
        os.kill(server.proc.pid, signal.SIGCONT)
    assert code == 0, out + err
    assert "Traceback" not in err and "error" not in err, err
    lines = out.splitlines()
    assert f"group a-big: {BIG_PARTITIONS} migrated" in lines
    assert all(f"group b-{i:03d}: 1 migrated" in lines for i in range(SMALL_GROUPS)), out
    assert broker_offsets(b.bootstrap, f"b-{SMALL_GROUPS - 1:03d}") == {("small", 0): 0}
