"""Shared helpers for bench/broker_*.py: start/stop a `kafkactl serve` process, CPU time,
and the raw-sendfile baseline of the fetch figures."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Broker:
    proc: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    owns_data_dir: bool = False  # made by start_broker: removed by stop()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        """User + system CPU the broker process has used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.owns_data_dir:  # benches write GBs: leave no temp data behind
            shutil.rmtree(self.data_dir, ignore_errors=True)


def start_broker(*overrides: str, data_dir: Path | None = None,
                 extra_listeners: str = "", log_level: str = "warning",
                 log_file: Path | None = None) -> Broker:
    """`extra_listeners` (e.g. `SASL_SSL://127.0.0.1:9093`) come after the PLAINTEXT one;
    `log_file` takes the broker's log (appended) instead of this process's stderr."""
    port = free_port()
    d = data_dir or Path(tempfile.mkdtemp(prefix="kafkactl-bench-"))
    args = [sys.executable, "-m", "kafkactl", "serve", "--data-dir", str(d),
            "--listen", f"127.0.0.1:{port}", "--log-level", log_level]
    if extra_listeners:
        args += ["--override", f"listeners=PLAINTEXT://127.0.0.1:{port},{extra_listeners}"]
    for o in overrides:
        args += ["--override", o]
    # cwd: not a checkout (and the data dir may not exist yet), so `python -m` takes
    # kafkactl from PYTHONPATH (--kafkactl DIR rounds) or the installed package, not from
    # the directory the bench runs in
    stderr = open(log_file, "ab") if log_file is not None else None  # noqa: SIM115
    try:
        proc = subprocess.Popen(args, cwd=tempfile.gettempdir(), stderr=stderr)
    finally:
        if stderr is not None:
            stderr.close()  # the child holds its own descriptor
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return Broker(proc, port, d, owns_data_dir=data_dir is None)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("broker did not start")


def raw_sendfile(paths: Sequence[str | Path], span: int) -> float:
    """MB/s of os.sendfile of `paths` (8 MiB calls, a blocking socket) over loopback, the
    receiver filling a buffer of `span` bytes from its start again and again, as a Fetch
    consumer fills its buffer with each response of `span` bytes: the same memory traffic
    on both sides of the ratio (here a receiver reusing a cache-hot 1 MiB buffer read 4.1-4.4
    GB/s, one writing over 8 MiB 3.6-4.4, over 64 MiB 1.2-1.3)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    sizes = [os.path.getsize(p) for p in paths]

    def serve() -> None:
        conn, _ = srv.accept()
        for p, size in zip(paths, sizes, strict=True):
            with open(p, "rb") as f:
                off = 0
                while off < size:
                    off += os.sendfile(conn.fileno(), f.fileno(), off, min(8 << 20, size - off))
        conn.close()

    t = threading.Thread(target=serve)
    t.start()
    sock = socket.create_connection(("127.0.0.1", port))
    view = memoryview(bytearray(span))
    total, got, pos = sum(sizes), 0, 0
    t0 = time.perf_counter()
    while got < total:
        if pos == span:
            pos = 0
        n = sock.recv_into(view[pos:])
        if not n:
            break
        got += n
        pos += n
    dt = time.perf_counter() - t0
    t.join()
    sock.close()
    srv.close()
    return got / dt / 1e6
