"""Shared helpers for bench/broker_*.py: start/stop a `kafkactl serve` process, CPU time."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
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
