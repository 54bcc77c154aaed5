"""A real ZooKeeper server for tests: Debian's `zookeeper` package, standalone, on a free
loopback port with its data in a temp dir (shared by the ZooKeeper-consumer, offsets-migrate
and cluster tests)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.conftest import free_port as _free_port
from tests.jvm_options import TEST_JVM_OPTIONS

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
ZK_CONF = Path("/etc/zookeeper/conf")


def available() -> str | None:
    """None when a ZooKeeper server can run here, else the reason it cannot."""
    if not ZK_JAR.exists():
        return f"{ZK_JAR} missing: install Debian's zookeeper package (scripts/test.sh does)"
    if shutil.which("java") is None:
        return "no java on PATH: install default-jre-headless (scripts/test.sh does)"
    return None


class ZooKeeperServer:
    def __init__(self, base: Path, jvm_options: tuple[str, ...] = TEST_JVM_OPTIONS) -> None:
        self.base = base
        self.jvm_options = jvm_options
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        (base / "data").mkdir(parents=True, exist_ok=True)
        (base / "zoo.cfg").write_text(
            "tickTime=500\n"
            f"dataDir={base / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "minSessionTimeout=1000\nmaxSessionTimeout=60000\n"
            "4lw.commands.whitelist=ruok,srvr\n")

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        log = open(self.base / "zookeeper.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            ["java", "-Xmx128m", *self.jvm_options, f"-Dzookeeper.log.dir={self.base}",
             "-Dzookeeper.root.logger=WARN,CONSOLE", "-cp", f"{ZK_CONF}:{ZK_JAR}",
             "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(self.base / "zoo.cfg")],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited: {self.log()}")
            if self._serving():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"zookeeper did not start within {timeout}s: {self.log()}")

    def _serving(self) -> bool:
        """Whether the server serves sessions: `srvr` reports its mode then. `ruok` answers
        as soon as the port is bound, while the database is still loading ("not currently
        serving requests"): a client connecting in that window waits out its handshake
        (seen after a restart under load: 10 s without a session)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"srvr")
                answer = b""
                while chunk := s.recv(4096):
                    answer += chunk
        except OSError:
            return False
        return b"Mode: " in answer

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        path = self.base / "zookeeper.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""
